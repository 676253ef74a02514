// kiln why: the last misses, or one request, explained against the stored
// entries: which part of the key differs from the nearest ones
// (daemon/miss_explainer.h).
#ifndef KILN_DAEMON_ADMIN_WHY_H_
#define KILN_DAEMON_ADMIN_WHY_H_

#include <vector>

#include "abi/target.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cache/local_tier.h"
#include "cache/request_key.h"
#include "daemon/miss_explainer.h"
#include "proto/service.pb.h"

namespace kiln::admin {

// With request.request, that request keyed as of `now` for `toolchains`;
// otherwise `recent_misses` (newest first).
absl::StatusOr<kiln::v1::WhyResponse> Why(LocalTier& tier, const kiln::v1::WhyRequest& request,
                                          const std::vector<KeyedRequestSummary>& recent_misses,
                                          const TargetToolchains& toolchains,
                                          const ToolchainDigests& toolchain_digests,
                                          absl::Time now);

}  // namespace kiln::admin

#endif  // KILN_DAEMON_ADMIN_WHY_H_
