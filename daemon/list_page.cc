#include "daemon/list_page.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

using kiln::v1::ListRequest;
using kiln::v1::ListResponse;

// A position in a usage order.
struct Cursor {
  int64_t value = 0;  // last use (Unix ms) or object bytes
  std::string key;
};

// Whether `a` comes before `b`: the larger value first (the smaller with
// `reverse`), ties in key order.
bool Precedes(const Cursor& a, const Cursor& b, bool reverse) {
  if (a.value != b.value) return reverse ? a.value < b.value : a.value > b.value;
  return a.key < b.key;
}

absl::StatusOr<std::optional<Cursor>> ParseCursor(const std::string& token) {
  if (token.empty()) return std::nullopt;
  const size_t colon = token.find(':');
  Cursor cursor;
  if (colon == std::string::npos || !absl::SimpleAtoi(token.substr(0, colon), &cursor.value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token '", token.substr(0, 80),
                     "' is not one this order returned: pass the "
                     "next_page_token of the previous page, with the same order"));
  }
  cursor.key = token.substr(colon + 1);
  return cursor;
}

bool Matches(const std::string& graph_name, const ListRequest& request) {
  return absl::StrContains(graph_name, request.graph_substring());
}

void Add(kiln::v1::ArtifactMetadata metadata, const EntryUsage& usage, ListResponse& response) {
  *response.add_entries() = std::move(metadata);
  kiln::v1::EntryUse* use = response.add_uses();
  use->set_last_use_unix_ms(absl::ToUnixMillis(usage.last_use));
  use->set_pinned(usage.pinned);
}

// A brief entry: what the usage record holds of the metadata (for a
// table, only what it shows).
kiln::v1::ArtifactMetadata Brief(const EntryUsage& usage, bool table) {
  kiln::v1::ArtifactMetadata metadata;
  metadata.set_key(table ? usage.key.substr(0, 16) : usage.key);
  if (!table) metadata.set_digest(usage.digest);
  metadata.set_object_bytes(usage.object_bytes);
  metadata.set_graph_name(usage.graph_name);
  metadata.set_created_unix_ms(absl::ToUnixMillis(usage.created));
  metadata.mutable_timings()->set_total_ms(usage.compile_ms);
  if (!table) metadata.set_source_graph(usage.source_graph);
  return metadata;
}

void MergeTouch(const LastTouchedFn& last_touched, EntryUsage& usage) {
  if (!last_touched) return;
  if (std::optional<absl::Time> touched = last_touched(usage.key)) {
    usage.last_use = std::max(usage.last_use, *touched);
  }
}

absl::StatusOr<ListResponse> KeyOrderPage(ArtifactStore& store, const LastTouchedFn& last_touched,
                                          const ListRequest& request, int page_size) {
  ListResponse response;
  std::string after = request.page_token();
  // Without a filter one entry past the page tells whether another follows;
  // with one, matches are read in chunks until that one more.
  const int chunk = request.graph_substring().empty() ? page_size + 1 : std::max(page_size, 256);
  while (true) {
    ASSIGN_OR_RETURN(std::vector<ListedEntry> entries, store.ListAfter(after, chunk));
    for (ListedEntry& entry : entries) {
      after = entry.metadata.key();
      if (!Matches(entry.metadata.graph_name(), request)) continue;
      if (response.entries_size() == page_size) {
        response.set_next_page_token(response.entries().rbegin()->key());
        return response;
      }
      MergeTouch(last_touched, entry.usage);
      Add(std::move(entry.metadata), entry.usage, response);
    }
    if (static_cast<int>(entries.size()) < chunk) return response;
  }
}

absl::StatusOr<ListResponse> UsageOrderPage(ArtifactStore& store, const LastTouchedFn& last_touched,
                                            const ListRequest& request, int page_size) {
  ASSIGN_OR_RETURN(const std::optional<Cursor> after, ParseCursor(request.page_token()));
  ASSIGN_OR_RETURN(std::vector<EntryUsage> usages, store.Usage());
  const bool by_size = request.order() == ListRequest::ORDER_SIZE;
  const bool by_key = request.order() == ListRequest::ORDER_KEY;  // brief only
  const bool reverse = request.reverse();
  // Positions point into `usages`: 100,000 of them sort in milliseconds
  // when no key is copied.
  struct Position {
    int64_t value;
    EntryUsage* usage;  // an element of `usages`
  };
  auto precedes = [reverse](const Position& a, const Position& b) {
    if (a.value != b.value) return reverse ? a.value < b.value : a.value > b.value;
    return a.usage->key < b.usage->key;
  };
  std::vector<Position> order;
  order.reserve(usages.size());
  for (EntryUsage& usage : usages) {
    // Size and key order need the local index's uses only for the entries
    // shown.
    if (!by_size && !by_key) MergeTouch(last_touched, usage);
    const Position position{by_key    ? 0
                            : by_size ? usage.object_bytes
                                      : absl::ToUnixMillis(usage.last_use),
                            &usage};
    if (after.has_value() && !Precedes(*after, Cursor{position.value, usage.key}, reverse)) {
      continue;
    }
    order.push_back(position);
  }
  // Unfiltered, the page and the entry after it are usually all that is
  // read: sort those first, the rest only when reading reaches them (a
  // filter, or entries evicted since the scan).
  size_t sorted = std::min(order.size(), static_cast<size_t>(page_size) + 1);
  if (request.graph_substring().empty()) {
    std::partial_sort(order.begin(), order.begin() + sorted, order.end(), precedes);
  } else {
    std::sort(order.begin(), order.end(), precedes);
    sorted = order.size();
  }
  ListResponse response;
  Cursor last;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == sorted) {
      std::sort(order.begin() + i, order.end(), precedes);
      sorted = order.size();
    }
    const Position& position = order[i];
    EntryUsage& usage = *position.usage;
    if (!Matches(usage.graph_name, request)) continue;
    std::optional<kiln::v1::ArtifactMetadata> metadata;
    if (request.brief()) {
      metadata = Brief(usage, request.table());
    } else {
      // The metadata of an entry evicted since the usage scan is gone: skip.
      ASSIGN_OR_RETURN(metadata, store.Lookup(usage.key));
      if (!metadata.has_value()) continue;
    }
    if (response.entries_size() == page_size) {
      response.set_next_page_token(absl::StrCat(last.value, ":", last.key));
      break;
    }
    if (by_size || by_key) MergeTouch(last_touched, usage);
    Add(*std::move(metadata), usage, response);
    last = Cursor{position.value, usage.key};
  }
  return response;
}

}  // namespace

absl::StatusOr<ListResponse> ListPage(ArtifactStore& store, const LastTouchedFn& last_touched,
                                      const ListRequest& request) {
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size ", request.page_size(), " is negative; 0 means the default"));
  }
  const int page_size = request.page_size() == 0
                            ? kDefaultListPageSize
                            : std::min(request.page_size(),
                                       request.brief() ? kMaxBriefListPageSize : kMaxListPageSize);
  switch (request.order()) {
    case ListRequest::ORDER_KEY:
      if (request.reverse()) {
        return absl::InvalidArgumentError(
            "reverse applies to ORDER_LAST_USE and ORDER_SIZE, not to key order");
      }
      // Brief entries come from the usage records alone, in any order.
      if (request.brief()) return UsageOrderPage(store, last_touched, request, page_size);
      return KeyOrderPage(store, last_touched, request, page_size);
    case ListRequest::ORDER_LAST_USE:
    case ListRequest::ORDER_SIZE:
      return UsageOrderPage(store, last_touched, request, page_size);
    default:
      return absl::InvalidArgumentError(absl::StrCat("order ", request.order(), " is unknown"));
  }
}

}  // namespace kiln
