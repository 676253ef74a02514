// The fleet tier over another tier (the local one), as sccache's multi-level
// cache: a miss there asks the fleet (remote_tier.h), one look at a time; an
// entry another machine compiled is committed to the inner tier and answered;
// otherwise the fleet-wide lease taken for the key is held here until the
// compile here commits (and the artifact is published behind the reply) or
// is abandoned. The daemon never holds a lease.
//
// Thread-safe.
#ifndef KILN_CACHE_REMOTE_FLEET_TIER_H_
#define KILN_CACHE_REMOTE_FLEET_TIER_H_

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/remote/remote_tier.h"
#include "cache/tier.h"
#include "proto/service.pb.h"

namespace kiln {

class FleetTier : public Tier {
 public:
  // `inner` must outlive this tier.
  FleetTier(Tier* inner, std::shared_ptr<RemoteTier> remote);

  // The inner tier, then one look at the fleet; the query's `progress`
  // carries the miss's wait from look to look.
  absl::StatusOr<Found> Find(Query& query) override;
  // Commits to the inner tier, then publishes to the fleet behind the
  // reply, releasing the lease Find took for the key.
  absl::Status Commit(const kiln::v1::ArtifactMetadata& metadata, std::string object,
                      bool synced) override;
  // Releases the lease Find took for `key`, if any.
  void Abandon(const std::string& key) override;

  RemoteTier& remote() { return *remote_; }

 private:
  Tier* const inner_;
  const std::shared_ptr<RemoteTier> remote_;
  absl::Mutex mutex_;
  absl::flat_hash_map<std::string, std::unique_ptr<RemoteTier::Lease>> leases_
      ABSL_GUARDED_BY(mutex_);
};

}  // namespace kiln

#endif  // KILN_CACHE_REMOTE_FLEET_TIER_H_
