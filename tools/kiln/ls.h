// `kiln ls`: the cache's entries, sorted, filtered and paged through the
// List RPC (proto/service.proto ListRequest).
//
// Last use and size orders, and key order, are kilnd's: it sorts its
// usage records and sends only the entries shown, so the first 50 of
// 100,000 come back in milliseconds. Creation time and graph name, and key
// order reversed, need every entry's metadata: the listing pages through
// all of them in key order and sorts here. So does a listing without a
// limit (--limit=0), whatever its order, since it reads everything anyway
// and key-order pages are the cheapest.
#ifndef KILN_TOOLS_KILN_LS_H_
#define KILN_TOOLS_KILN_LS_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "client/client.h"

namespace kiln {

struct LsOptions {
  std::string sort = "last_use";  // last_use, size, created, name or key
  // last_use, created: newest first; size: largest first; name, key:
  // ascending. reverse turns it round (ties stay in key order).
  bool reverse = false;
  std::string graph;  // only entries whose graph name contains this
  int64_t limit = 0;  // at most this many; 0: all
  bool json = false;  // the full records (entries and uses) as JSON
};

// Prints the listing to `out` (a table, or JSON), and to `notes` a line
// saying how to see more when the limit cut a table short. InvalidArgument for
// an unknown sort or a negative limit.
absl::Status ListEntries(Client& client, const LsOptions& options, std::ostream& out,
                         std::ostream& notes);

}  // namespace kiln

#endif  // KILN_TOOLS_KILN_LS_H_
