#include "cache/index_reconcile.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<ReconcileResult> ReconcileLocalIndex(ArtifactStore& store, const LocalIndex& index,
                                                    const ReconcileOptions& options) {
  ReconcileResult result;
  // Each entry's blob as the usage records say: a record that agrees needs
  // no metadata read. One that does not is checked against the entry
  // itself, under the lock (it may have been stored since this scan).
  ASSIGN_OR_RETURN(const std::vector<EntryUsage> usages, store.Usage());
  absl::flat_hash_map<absl::string_view, absl::string_view> stored_digest;
  stored_digest.reserve(usages.size());
  for (const EntryUsage& usage : usages) stored_digest.emplace(usage.key, usage.digest);
  absl::flat_hash_set<std::string> indexed;  // keys whose record stays
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
    if (auto it = stored_digest.find(key);
        it != stored_digest.end() && it->second == (*record)->digest()) {
      indexed.insert(key);
      continue;
    }
    ASSIGN_OR_RETURN(const auto entry, store.Lookup(key));
    if (!entry.has_value() || entry->digest() != (*record)->digest()) {
      RETURN_IF_ERROR(index.Remove(key));
      ++result.lost;
    } else {
      indexed.insert(key);
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
      if (indexed.contains(**key)) continue;
      const auto record = index.Find(**key);  // indexed since the pass above?
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
