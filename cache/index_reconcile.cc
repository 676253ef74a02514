#include "cache/index_reconcile.h"

#include "common/logging.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<ReconcileResult> ReconcileLocalIndex(ArtifactStore& store, const LocalIndex& index,
                                                    const ReconcileOptions& options) {
  ReconcileResult result;
  ASSIGN_OR_RETURN(const std::vector<std::string> keys, index.Keys());
  for (const std::string& key : keys) {
    if (options.stop()) return absl::CancelledError("stopped before the index was reconciled");
    absl::MutexLockMaybe lock(options.per_record_lock);
    ++result.checked;
    const auto record = index.Find(key);
    if (!record.ok()) {
      KILN_LOG(WARNING) << "removing an untrusted index record: " << record.status().message();
      RETURN_IF_ERROR(index.Remove(key));
      ++result.damaged;
      continue;
    }
    if (!record->has_value()) continue;  // removed since it was listed
    ASSIGN_OR_RETURN(const auto entry, store.Lookup(key));
    if (!entry.has_value() || entry->digest() != (*record)->digest()) {
      RETURN_IF_ERROR(index.Remove(key));
      ++result.lost;
    }
  }
  // Aliases of keys no longer indexed, or that cannot be trusted.
  ASSIGN_OR_RETURN(const std::vector<std::string> aliases, index.AliasDigests());
  for (const std::string& digest : aliases) {
    if (options.stop()) return absl::CancelledError("stopped before the index was reconciled");
    absl::MutexLockMaybe lock(options.per_record_lock);
    const auto key = index.FindAlias(digest);
    bool live = false;
    if (key.ok() && key->has_value()) {
      const auto record = index.Find(**key);
      live = record.ok() && record->has_value();
    }
    if (live) continue;
    RETURN_IF_ERROR(index.RemoveAlias(digest));
    ++result.stale_aliases;
  }
  if (result.lost > 0 || result.damaged > 0) {
    KILN_LOG(WARNING) << "local index: removed " << result.lost
                      << " records of entries the store does not have and " << result.damaged
                      << " damaged records (of " << result.checked << ")";
  }
  if (result.stale_aliases > 0) {
    KILN_LOG(INFO) << "local index: removed " << result.stale_aliases
                   << " request aliases of keys no longer indexed";
  }
  return result;
}

}  // namespace kiln
