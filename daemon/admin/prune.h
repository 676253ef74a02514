// kiln prune: removes (or, `dry_run`, lists) the entries that can never hit
// here: built for a toolchain, codegen version or target this kilnd does
// not compile for (StaleReason, cache/request_key.h).
#ifndef KILN_DAEMON_ADMIN_PRUNE_H_
#define KILN_DAEMON_ADMIN_PRUNE_H_

#include "absl/status/statusor.h"
#include "cache/local_tier.h"
#include "cache/request_key.h"
#include "proto/service.pb.h"

namespace kiln::admin {

absl::StatusOr<kiln::v1::PruneResponse> Prune(LocalTier& tier, const ToolchainDigests& toolchains,
                                              bool dry_run);

}  // namespace kiln::admin

#endif  // KILN_DAEMON_ADMIN_PRUNE_H_
