// kiln verify: reads every entry, blob, object file and index record, and
// with `repair` evicts entries whose blob is damaged, rewrites object files
// from their blobs, republishes index records and removes object files no
// entry references (see VerifyRequest in proto/service.proto).
#ifndef KILN_DAEMON_ADMIN_VERIFY_H_
#define KILN_DAEMON_ADMIN_VERIFY_H_

#include "absl/status/statusor.h"
#include "cache/local_tier.h"
#include "proto/service.pb.h"

namespace kiln::admin {

absl::StatusOr<kiln::v1::VerifyResponse> Verify(LocalTier& tier, bool repair);

}  // namespace kiln::admin

#endif  // KILN_DAEMON_ADMIN_VERIFY_H_
