// kiln evict KEY: remove an entry, or forget its remembered compile failure.
#include <iostream>

#include "absl/flags/flag.h"
#include "common/status_macros.h"
#include "tools/kiln/commands/command.h"

namespace kiln {
namespace {

absl::Status Evict(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 1, "kiln evict KEY"));
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  // kilnd removes the entry and forgets a compile failure remembered for the
  // key: either makes the next request compile afresh.
  ASSIGN_OR_RETURN(const std::string key, client->Evict(args[0]));
  std::cout << "evicted " << key << "\n";
  return absl::OkStatus();
}

}  // namespace

const Command kEvictCommand = {"evict",
                               "KEY",
                               "remove an entry, or forget its remembered compile failure",
                               {kSocketFlag, kCacheDirFlag, kStartFlag},
                               "kiln evict 3f2a9c",
                               Evict};

}  // namespace kiln
