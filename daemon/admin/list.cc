#include "daemon/admin/list.h"

#include "common/status_macros.h"
#include "daemon/list_page.h"

namespace kiln::admin {

absl::StatusOr<kiln::v1::ListResponse> List(LocalTier& tier, bool uses_unread,
                                            const kiln::v1::ListRequest& request) {
  const LastTouchedFn store_only = [](const std::string&) { return std::optional<absl::Time>(); };
  ASSIGN_OR_RETURN(kiln::v1::ListResponse page,
                   ListPage(tier.store(), uses_unread ? store_only : tier.LastTouched(), request));
  page.set_local_uses_unread(uses_unread);
  return page;
}

}  // namespace kiln::admin
