#include "cache/index_reconcile.h"

#include "common/logging.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<ReconcileResult> ReconcileLocalIndex(ArtifactStore& store, const LocalIndex& index) {
  ReconcileResult result;
  ASSIGN_OR_RETURN(const std::vector<std::string> keys, index.Keys());
  for (const std::string& key : keys) {
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
  if (result.lost > 0 || result.damaged > 0) {
    KILN_LOG(WARNING) << "local index: removed " << result.lost
                      << " records of entries the store does not have and " << result.damaged
                      << " damaged records (of " << result.checked << ")";
  }
  return result;
}

}  // namespace kiln
