// The fleet tier over the local one, as sccache's multi-level cache: a
// local miss asks the fleet (remote_tier.h), one look at a time; an entry
// another machine compiled is committed to the local tier and answered;
// otherwise the fleet-wide lease taken for the key is held here until the
// compile here commits (and the artifact is published behind the reply) or
// is abandoned. The daemon never holds a lease.
//
// Thread-safe.
#ifndef KILN_CACHE_REMOTE_FLEET_TIER_H_
#define KILN_CACHE_REMOTE_FLEET_TIER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/local_tier.h"
#include "cache/remote/remote_tier.h"
#include "proto/service.pb.h"

namespace kiln {

class FleetTier {
 public:
  // `local` must outlive this tier; `now` stamps a fetched entry's first
  // use here.
  FleetTier(LocalTier* local, std::shared_ptr<RemoteTier> remote, std::function<absl::Time()> now);

  // One look's answer: the artifact, a miss (compile here), or a positive
  // `look_again_after` while another machine compiles it.
  struct Found {
    std::optional<kiln::v1::CompileResponse> response;
    absl::Duration look_again_after = absl::ZeroDuration();
  };
  // The local tier, then one look at the fleet. `wait` carries one miss's
  // state from look to look: a fresh one per miss.
  absl::StatusOr<Found> Find(const std::string& key, bool want_bytes, RemoteTier::Wait* wait);
  // Commits to the local tier (synced), then publishes to the fleet behind
  // the reply, releasing the lease Find took for the key.
  absl::Status Commit(const kiln::v1::ArtifactMetadata& metadata, std::string object);
  // Releases the lease Find took for `key`, if any (a compile that failed
  // or found the entry stored after all).
  void Abandon(const std::string& key);

  RemoteTier& remote() { return *remote_; }

 private:
  LocalTier* const local_;
  const std::shared_ptr<RemoteTier> remote_;
  const std::function<absl::Time()> now_;
  absl::Mutex mutex_;
  absl::flat_hash_map<std::string, std::unique_ptr<RemoteTier::Lease>> leases_
      ABSL_GUARDED_BY(mutex_);
};

}  // namespace kiln

#endif  // KILN_CACHE_REMOTE_FLEET_TIER_H_
