// kiln ls: one page of entries with their usage (daemon/list_page.h).
#ifndef KILN_DAEMON_ADMIN_LIST_H_
#define KILN_DAEMON_ADMIN_LIST_H_

#include "absl/status/statusor.h"
#include "cache/local_tier.h"
#include "proto/service.pb.h"

namespace kiln::admin {

// With `uses_unread` (kilnd's background thread has not walked the local
// index yet), the page shows the store's uses alone and says so
// (ListResponse.local_uses_unread) rather than stat every entry.
absl::StatusOr<kiln::v1::ListResponse> List(LocalTier& tier, bool uses_unread,
                                            const kiln::v1::ListRequest& request);

}  // namespace kiln::admin

#endif  // KILN_DAEMON_ADMIN_LIST_H_
