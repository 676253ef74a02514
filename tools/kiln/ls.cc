#include "tools/kiln/ls.h"

#include <google/protobuf/arena.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "tools/kiln/human_units.h"
#include "tools/kiln/json.h"

namespace kiln {
namespace {

using kiln::v1::ListRequest;
using kiln::v1::ListResponse;

// kilnd's largest pages (daemon/list_page.h kMaxListPageSize,
// kMaxBriefListPageSize).
constexpr int64_t kMaxListPageSize = 10000;
constexpr int64_t kMaxBriefListPageSize = 100000;

// One listed entry: indexes into a ListResponse's entries and uses.
struct Row {
  const kiln::v1::ArtifactMetadata* entry;
  const kiln::v1::EntryUse* use;
};

// Negative, zero or positive as `a` comes before, with or after `b` in
// `sort`'s natural direction (before reverse and the key tie-break).
int Compare(const std::string& sort, const Row& a, const Row& b) {
  auto three_way = [](const auto& x, const auto& y) { return x < y ? -1 : (y < x ? 1 : 0); };
  if (sort == "last_use") return three_way(b.use->last_use_unix_ms(), a.use->last_use_unix_ms());
  if (sort == "size") return three_way(b.entry->object_bytes(), a.entry->object_bytes());
  if (sort == "created") return three_way(b.entry->created_unix_ms(), a.entry->created_unix_ms());
  if (sort == "name") return three_way(a.entry->graph_name(), b.entry->graph_name());
  return three_way(a.entry->key(), b.entry->key());
}

// Pages through the List RPC with `request` until `limit` entries (0: all),
// into `all`. Sets `more` when entries beyond them exist. Pages live on
// `all`'s arena, as `all` does.
absl::Status Fetch(Client& client, ListRequest request, int64_t limit, ListResponse& all,
                   bool* more) {
  *more = false;
  while (true) {
    const int64_t largest = request.brief() ? kMaxBriefListPageSize : kMaxListPageSize;
    const int64_t wanted = limit == 0 ? largest : limit - all.entries_size();
    request.set_page_size(static_cast<int>(std::min<int64_t>(wanted, largest)));
    ListResponse* page = google::protobuf::Arena::CreateMessage<ListResponse>(all.GetArena());
    RETURN_IF_ERROR(client.ListPage(request, *page));
    if (page->local_uses_unread()) all.set_local_uses_unread(true);
    if (page->entries_size() != page->uses_size()) {
      return absl::InternalError(absl::StrCat("kilnd listed ", page->entries_size(),
                                              " entries with ", page->uses_size(), " uses"));
    }
    if (all.entries().empty()) {
      all.mutable_entries()->Swap(page->mutable_entries());
      all.mutable_uses()->Swap(page->mutable_uses());
    } else {
      all.mutable_entries()->MergeFrom(page->entries());
      all.mutable_uses()->MergeFrom(page->uses());
    }
    if (page->next_page_token().empty()) return absl::OkStatus();
    if (limit != 0 && all.entries_size() >= limit) {
      *more = true;
      return absl::OkStatus();
    }
    request.set_page_token(page->next_page_token());
  }
}

// `text` into `line` padded with spaces to `width` columns, on the left
// (`right`) or the right; never cut, as printf's "%-20s" does not.
void AppendPadded(std::string& line, absl::string_view text, size_t width, bool right = false) {
  const size_t padding = text.size() < width ? width - text.size() : 0;
  if (right) line.append(padding, ' ');
  line.append(text.data(), text.size());
  if (!right) line.append(padding, ' ');
}

// Rows by hand rather than one StrFormat each: a third of a 100,000-row
// listing's work went to the formatter.
void PrintTable(const std::vector<Row>& rows, std::ostream& out) {
  const absl::TimeZone zone = absl::LocalTimeZone();  // once: it reads TZ
  out << absl::StrFormat("%-16s  %-20s  %10s  %10s  %-19s  %-19s  %s\n", "KEY", "GRAPH", "SIZE",
                         "COMPILE", "LAST USE", "CREATED", "PINNED");
  std::string line;
  for (const Row& row : rows) {
    const kiln::v1::ArtifactMetadata& entry = *row.entry;
    line.clear();
    AppendPadded(line, absl::string_view(entry.key()).substr(0, 16), 16);
    line += "  ";
    AppendPadded(line, entry.graph_name().empty() ? "-" : entry.graph_name(), 20);
    line += "  ";
    AppendPadded(line, HumanBytes(entry.object_bytes()), 10, /*right=*/true);
    line += "  ";
    // "%7.1f ms" (a compile time is never negative), half to even as printf.
    const double ms = std::min(std::max(entry.timings().total_ms(), 0.0), 1e12);
    const int64_t tenths = static_cast<int64_t>(std::nearbyint(ms * 10));
    AppendPadded(line, absl::StrCat(tenths / 10, ".", tenths % 10), 7, /*right=*/true);
    line += " ms  ";
    AppendPadded(line, HumanTime(absl::FromUnixMillis(row.use->last_use_unix_ms()), zone), 19);
    line += "  ";
    AppendPadded(line, HumanTime(absl::FromUnixMillis(entry.created_unix_ms()), zone), 19);
    line += "  ";
    line += row.use->pinned() ? "pinned\n" : "\n";
    out.write(line.data(), static_cast<std::streamsize>(line.size()));
  }
}

}  // namespace

absl::Status ListEntries(Client& client, const LsOptions& options, std::ostream& out,
                         std::ostream& notes) {
  const std::string& sort = options.sort;
  if (sort != "last_use" && sort != "size" && sort != "created" && sort != "name" &&
      sort != "key") {
    return absl::InvalidArgumentError(
        absl::StrCat("--sort=", sort, " is not one of last_use, size, created, name, key"));
  }
  if (options.limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--limit=", options.limit, " is negative; 0 lists every entry"));
  }
  ListRequest request;
  request.set_graph_substring(options.graph);
  // What a listing shows, from kilnd's usage records: a tenth of the
  // bytes of full records (`kiln show KEY` prints one).
  request.set_brief(true);
  request.set_table(!options.json);
  // kilnd's orders when it can sort; else every entry, sorted here.
  const bool by_kilnd = sort == "last_use" || sort == "size" || (sort == "key" && !options.reverse);
  if (by_kilnd && sort != "key") {
    request.set_order(sort == "size" ? ListRequest::ORDER_SIZE : ListRequest::ORDER_LAST_USE);
    request.set_reverse(options.reverse);
  }
  bool more = false;
  // On an arena: 100,000 entries parse faster and are freed at once (each
  // message and string freed alone was a sixth of the listing's work).
  google::protobuf::Arena arena;
  ListResponse& list = *google::protobuf::Arena::CreateMessage<ListResponse>(&arena);
  RETURN_IF_ERROR(Fetch(client, request, by_kilnd ? options.limit : 0, list, &more));
  std::vector<Row> rows;
  for (int i = 0; i < list.entries_size(); ++i) rows.push_back({&list.entries(i), &list.uses(i)});
  if (!by_kilnd) {
    std::sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
      const int order = Compare(sort, a, b);
      if (order != 0) return options.reverse ? order > 0 : order < 0;
      return options.reverse && sort == "key" ? a.entry->key() > b.entry->key()
                                              : a.entry->key() < b.entry->key();
    });
    if (options.limit != 0 && static_cast<int64_t>(rows.size()) > options.limit) {
      rows.resize(options.limit);
      more = true;
    }
  }
  if (options.json) {
    ListResponse shown;  // in the order shown, without a page token
    shown.set_local_uses_unread(list.local_uses_unread());
    for (const Row& row : rows) {
      *shown.add_entries() = *row.entry;
      *shown.add_uses() = *row.use;
    }
    out << ToJson(shown) << "\n";
  } else {
    PrintTable(rows, out);
  }
  if (list.local_uses_unread() && !options.json) {
    notes << "kiln ls: kilnd has not yet read the local index's uses since it started (it will "
             "within seconds): LAST USE leaves out processes' local-index hits\n";
  }
  if (more && !options.json) {
    notes << "kiln ls: showing the first " << rows.size()
          << " entries; --limit=N shows more, --limit=0 all\n";
  }
  return absl::OkStatus();
}

}  // namespace kiln
