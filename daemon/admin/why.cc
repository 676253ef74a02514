#include "daemon/admin/why.h"

#include "common/status_macros.h"

namespace kiln::admin {

absl::StatusOr<kiln::v1::WhyResponse> Why(LocalTier& tier, const kiln::v1::WhyRequest& request,
                                          const std::vector<KeyedRequestSummary>& recent_misses,
                                          const TargetToolchains& toolchains,
                                          const ToolchainDigests& toolchain_digests,
                                          absl::Time now) {
  std::vector<KeyedRequestSummary> asked;
  if (request.has_request()) {
    ASSIGN_OR_RETURN(const KeyedRequest keyed, KeyRequest(request.request(), toolchain_digests));
    asked.push_back(SummarizeRequest(keyed.inputs, keyed.key,
                                     toolchains.at(request.request().options().target()), now));
  } else {
    asked = recent_misses;
  }
  kiln::v1::WhyResponse response;
  if (asked.empty()) return response;
  ASSIGN_OR_RETURN(const std::vector<kiln::v1::ArtifactMetadata> entries, tier.store().List());
  for (const KeyedRequestSummary& one : asked) {
    *response.add_requests() = Explain(one, entries, request.nearest() > 0 ? request.nearest() : 3);
  }
  return response;
}

}  // namespace kiln::admin
