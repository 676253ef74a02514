// kiln ls: list cache entries, sorted, filtered by graph name and paged
// (tools/kiln/ls.h).
#include "tools/kiln/ls.h"

#include <unistd.h>

#include <iostream>

#include "absl/flags/flag.h"
#include "common/status_macros.h"
#include "tools/kiln/commands/command.h"

ABSL_FLAG(std::string, sort, "last_use",
          "last_use (newest first), size (largest first), created (newest first), name or key "
          "(A to Z).");
ABSL_FLAG(bool, reverse, false, "The other way round (oldest, smallest, Z to A first).");
ABSL_FLAG(int64_t, limit, -1,
          "At most this many entries; 0: all; default: 50 for a table on a terminal, else all.");

namespace kiln {
namespace {

absl::Status List(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln ls"));
  LsOptions options;
  options.sort = absl::GetFlag(FLAGS_sort);
  options.reverse = absl::GetFlag(FLAGS_reverse);
  options.graph = absl::GetFlag(FLAGS_graph);
  options.json = absl::GetFlag(FLAGS_json);
  options.limit = absl::GetFlag(FLAGS_limit);
  if (options.limit == -1) options.limit = !options.json && isatty(STDOUT_FILENO) ? 50 : 0;
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  return ListEntries(*client, options, std::cout, std::cerr);
}

}  // namespace

const Command kListCommand = {
    "ls",
    "",
    "list cache entries: sorted (last use by default), filtered by graph name, paged",
    {{"sort"},
     {"reverse"},
     {"graph", "only entries whose graph name contains this"},
     {"limit"},
     {"json"},
     kSocketFlag,
     kCacheDirFlag,
     kStartFlag},
    "kiln ls --sort=size --graph=mlp --limit=20",
    List};

}  // namespace kiln
