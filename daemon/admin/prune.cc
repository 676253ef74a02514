#include "daemon/admin/prune.h"

#include <string>
#include <vector>

#include "common/status_macros.h"

namespace kiln::admin {

absl::StatusOr<kiln::v1::PruneResponse> Prune(LocalTier& tier, const ToolchainDigests& toolchains,
                                              bool dry_run) {
  ASSIGN_OR_RETURN(const std::vector<kiln::v1::ArtifactMetadata> entries, tier.store().List());
  kiln::v1::PruneResponse response;
  for (const kiln::v1::ArtifactMetadata& entry : entries) {
    const std::string reason = StaleReason(entry, toolchains);
    if (reason.empty()) continue;
    kiln::v1::PruneResponse::Pruned* pruned = response.add_pruned();
    pruned->set_key(entry.key());
    pruned->set_reason(reason);
    pruned->set_object_bytes(entry.object_bytes());
    if (dry_run) continue;
    const absl::Status evicted = tier.Evict(entry.key());
    if (!evicted.ok() && !absl::IsNotFound(evicted)) return evicted;
  }
  return response;
}

}  // namespace kiln::admin
