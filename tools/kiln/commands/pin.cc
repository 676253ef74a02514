// kiln pin and kiln unpin KEY|GRAPH.json: keep entries through every
// eviction, or let them go again.
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "tools/kiln/commands/command.h"

namespace kiln {
namespace {

absl::Status SetPinned(const Args& args, bool pinned) {
  RETURN_IF_ERROR(
      NeedArgs(args, 1, pinned ? "kiln pin KEY|GRAPH.json" : "kiln unpin KEY|GRAPH.json"));
  kiln::v1::PinRequest request;
  request.set_pinned(pinned);
  if (absl::EndsWith(args[0], ".json")) {
    // A graph: every entry compiled from it, its specializations included.
    ASSIGN_OR_RETURN(const kiln::v1::Graph graph, ReadGraphFile(args[0]));
    request.set_graph_digest(GraphDigest(graph));
  } else {
    request.set_key(args[0]);
  }
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  ASSIGN_OR_RETURN(const std::vector<std::string> keys, client->Pin(request));
  for (const std::string& key : keys)
    std::cout << (pinned ? "pinned " : "unpinned ") << key << "\n";
  return absl::OkStatus();
}

absl::Status Pin(const Args& args) { return SetPinned(args, true); }
absl::Status Unpin(const Args& args) { return SetPinned(args, false); }

}  // namespace

const Command kPinCommand = {
    "pin",
    "KEY|GRAPH.json",
    "keep through every eviction the entries whose keys start with KEY, or every entry compiled "
    "from GRAPH.json (its specializations and warmup buckets too)",
    {kSocketFlag, kCacheDirFlag, kStartFlag},
    "kiln pin models/layer.kiln/graph.json",
    Pin};

const Command kUnpinCommand = {"unpin",
                               "KEY|GRAPH.json",
                               "let them be evicted again",
                               {kSocketFlag, kCacheDirFlag, kStartFlag},
                               "kiln unpin 3f2a9c",
                               Unpin};

}  // namespace kiln
