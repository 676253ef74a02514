// A cache tier: a place artifacts are kept, behind two calls (sccache's
// storage interface): Find a key, Commit an entry with its object. A miss is
// a value, not an error. Tiers compose: the fleet tier
// (cache/remote/fleet_tier.h) wraps another tier, as sccache's multi-level
// cache does; the local tier (cache/local_tier.h) is the bottom one.
//
// Implementations are thread-safe.
#ifndef KILN_CACHE_TIER_H_
#define KILN_CACHE_TIER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/service.pb.h"

namespace kiln {

class Tier {
 public:
  // What one miss asks, passed to each of its looks: a fresh one per miss.
  struct Query {
    std::string key;
    bool want_bytes = false;  // the object inline in the response too
    bool repair = false;      // rewrite the object file: a client found it corrupt
    // What a tier remembers from one look to the next (the fleet tier's
    // wait on another machine's lease). Callers only keep it.
    std::shared_ptr<void> progress;
  };
  // One look's answer: the artifact (`response`), a miss (compile it), or a
  // positive `look_again_after` while another machine compiles it.
  struct Found {
    std::optional<kiln::v1::CompileResponse> response;
    absl::Duration look_again_after = absl::ZeroDuration();
  };

  virtual ~Tier() = default;

  // A hit records a use of the entry; its response names the object file
  // on this machine.
  virtual absl::StatusOr<Found> Find(Query& query) = 0;
  // Stores one entry with its object. `synced`: durable before it returns
  // (a compile's result); otherwise an OS crash may lose it (an entry
  // fetched from another tier, fetched again).
  virtual absl::Status Commit(const kiln::v1::ArtifactMetadata& metadata, std::string object,
                              bool synced) = 0;
  // A miss that Find answered ended without a Commit (the compile failed,
  // or found the entry after all): what the tier held for `key` goes.
  virtual void Abandon(const std::string& key) {}
};

}  // namespace kiln

#endif  // KILN_CACHE_TIER_H_
