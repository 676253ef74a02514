#include "daemon/admin/gc.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/status_macros.h"

namespace kiln::admin {

absl::StatusOr<GcResult> Gc(LocalTier& tier, const GcLimits& limits, absl::Time now) {
  ASSIGN_OR_RETURN(std::vector<EntryUsage> entries, tier.store().Usage());
  // The local index's uses afresh, in one walk (what listings read next).
  tier.RefreshTouches();
  const LastTouchedFn last_touched = tier.LastTouched();
  absl::flat_hash_map<std::string, int> references;  // entries per blob
  GcResult result;
  for (EntryUsage& entry : entries) {
    if (std::optional<absl::Time> touched = last_touched(entry.key)) {
      entry.last_use = std::max(entry.last_use, *touched);
    }
    if (references[entry.digest]++ == 0) result.bytes_before += entry.object_bytes;
  }
  std::sort(entries.begin(), entries.end(), [](const EntryUsage& a, const EntryUsage& b) {
    return std::tie(a.last_use, a.key) < std::tie(b.last_use, b.key);
  });
  result.bytes_after = result.bytes_before;
  for (const EntryUsage& entry : entries) {
    if (entry.pinned) continue;
    const bool too_old =
        limits.max_age > absl::ZeroDuration() && now - entry.last_use > limits.max_age;
    const bool too_big = limits.max_bytes > 0 && result.bytes_after > limits.max_bytes &&
                         now - entry.last_use >= limits.grace;
    if (!too_old && !too_big) break;  // every later entry is newer
    if (--references[entry.digest] == 0) result.bytes_after -= entry.object_bytes;
    result.evicted.push_back(entry);
  }
  if (limits.dry_run || result.evicted.empty()) return result;
  absl::flat_hash_set<std::string> evicted;
  for (const EntryUsage& entry : result.evicted) {
    // One sync, with the last.
    const absl::Status status = tier.Evict(entry.key, &entry == &result.evicted.back());
    // A concurrent `kiln evict` may have been first; anything else stops.
    if (!status.ok() && !absl::IsNotFound(status)) return status;
    evicted.insert(entry.key);
  }
  // Requests that named the evicted keys (local_index.h) go too.
  ASSIGN_OR_RETURN(const std::vector<std::string> aliases, tier.index().AliasDigests());
  for (const std::string& digest : aliases) {
    absl::StatusOr<std::optional<std::string>> key = tier.index().FindAlias(digest);
    if (key.ok() && key->has_value() && evicted.contains(**key)) {
      RETURN_IF_ERROR(tier.index().RemoveAlias(digest));
    }
  }
  return result;
}

}  // namespace kiln::admin
