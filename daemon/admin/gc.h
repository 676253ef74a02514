// kiln gc: evicts least recently used entries first (a store use or a
// client's local-index hit is a use) until the cache is within `max_bytes`,
// and every entry unused for longer than `max_age`; pinned entries never.
// kilnd's background eviction runs it with its own limits.
#ifndef KILN_DAEMON_ADMIN_GC_H_
#define KILN_DAEMON_ADMIN_GC_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cache/local_tier.h"
#include "cache/store.h"

namespace kiln::admin {

struct GcLimits {
  int64_t max_bytes = 0;                          // 0: no size cap
  absl::Duration max_age = absl::ZeroDuration();  // 0: no age limit
  // Entries used this recently are spared by the size cap: a client that
  // was just answered still has to load the object.
  absl::Duration grace = absl::ZeroDuration();
  bool dry_run = false;  // choose, but evict nothing
};

struct GcResult {
  std::vector<EntryUsage> evicted;  // oldest use first
  int64_t bytes_before = 0;
  int64_t bytes_after = 0;
};

// Refreshes the tier's local-index uses, evicts what `limits` say as of
// `now`, then removes the request aliases of the evicted keys.
absl::StatusOr<GcResult> Gc(LocalTier& tier, const GcLimits& limits, absl::Time now);

}  // namespace kiln::admin

#endif  // KILN_DAEMON_ADMIN_GC_H_
