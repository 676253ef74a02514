// One page of the List RPC (proto/service.proto ListRequest): kilnd's
// listing without the RPC layer.
//
// Key order reads the page's entries from the store (ListAfter) and nothing
// past them. Usage orders (last use, size) sort every entry's usage record
// — a few dozen bytes each, no metadata — and then read the metadata of the
// page's entries only, so a first page of 50 at 100,000 entries costs one
// scan of the usage family and 50 point reads. A graph-name filter reads
// candidates' metadata one by one until the page is full and one more
// match shows that another page follows.
//
// Page tokens: key order, the page's last key; usage orders,
// "VALUE:KEY" of the page's last entry (last use in Unix ms, or bytes).
// Entries added, used or evicted between pages move, and are listed where
// they then fall — a page never repeats or skips an entry that stayed put.
#ifndef KILN_DAEMON_LIST_PAGE_H_
#define KILN_DAEMON_LIST_PAGE_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cache/store.h"
#include "proto/service.pb.h"

namespace kiln {

inline constexpr int kDefaultListPageSize = 1000;
inline constexpr int kMaxListPageSize = 10000;

// A use the store has not recorded (a client's local-index hit,
// LocalIndex::LastTouched), or nullopt.
using LastTouchedFn = std::function<std::optional<absl::Time>(const std::string& key)>;

// The page `request` asks for. InvalidArgument for a negative page_size or
// a page_token this order never returned (naming it).
absl::StatusOr<kiln::v1::ListResponse> ListPage(ArtifactStore& store,
                                                const LastTouchedFn& last_touched,
                                                const kiln::v1::ListRequest& request);

}  // namespace kiln

#endif  // KILN_DAEMON_LIST_PAGE_H_
