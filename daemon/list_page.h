// One page of the List RPC (proto/service.proto ListRequest): kilnd's
// listing without the RPC layer.
//
// Key order reads the page's entries from the store (ListAfter) and nothing
// past them. Usage orders (last use, size) sort every entry's usage record
// — a few hundred bytes each, no metadata — and then read the metadata of
// the page's entries only, so a first page of 50 at 100,000 entries costs
// one scan of the usage family and 50 point reads. Brief pages (what `kiln
// ls` shows), in any order, read no metadata at all: the usage records
// hold the graph name, creation and compile times. A graph-name filter
// matches against the usage records too.
//
// Page tokens: full key order, the page's last key; usage orders and brief
// key order, "VALUE:KEY" of the page's last entry (last use in Unix ms,
// bytes, or 0).
// Entries added, used or evicted between pages move, and are listed where
// they then fall — a page never repeats or skips an entry that stayed put.
#ifndef KILN_DAEMON_LIST_PAGE_H_
#define KILN_DAEMON_LIST_PAGE_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cache/local_tier.h"
#include "cache/store.h"
#include "proto/service.pb.h"

namespace kiln {

inline constexpr int kDefaultListPageSize = 1000;
inline constexpr int kMaxListPageSize = 10000;
// Brief entries (ListRequest.brief) are a few hundred bytes: a page holds
// every entry of a full cache.
inline constexpr int kMaxBriefListPageSize = 100000;

// The page `request` asks for. InvalidArgument for a negative page_size or
// a page_token this order never returned (naming it).
absl::StatusOr<kiln::v1::ListResponse> ListPage(ArtifactStore& store,
                                                const LastTouchedFn& last_touched,
                                                const kiln::v1::ListRequest& request);

}  // namespace kiln

#endif  // KILN_DAEMON_LIST_PAGE_H_
