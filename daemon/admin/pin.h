// kiln pin / unpin: pinned entries are never evicted (daemon/admin/gc.h).
#ifndef KILN_DAEMON_ADMIN_PIN_H_
#define KILN_DAEMON_ADMIN_PIN_H_

#include "absl/status/statusor.h"
#include "cache/local_tier.h"
#include "proto/service.pb.h"

namespace kiln::admin {

// Pins or unpins every entry whose key starts with request.key (at least 6
// hex digits), or, with request.graph_digest, every entry compiled from
// that graph (CompileRequest.source_graph); answers the full keys.
// NotFound when none matches.
absl::StatusOr<kiln::v1::PinResponse> Pin(LocalTier& tier, const kiln::v1::PinRequest& request);

}  // namespace kiln::admin

#endif  // KILN_DAEMON_ADMIN_PIN_H_
