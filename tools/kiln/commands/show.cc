// kiln show KEY: one entry's metadata, as JSON.
#include <iostream>

#include "absl/flags/flag.h"
#include "common/status_macros.h"
#include "tools/kiln/commands/command.h"

namespace kiln {
namespace {

absl::Status Show(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 1, "kiln show KEY"));
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  ASSIGN_OR_RETURN(auto artifact, client->Show(args[0]));
  std::cout << ToJson(artifact) << "\n";  // the metadata is structured: JSON either way
  return absl::OkStatus();
}

}  // namespace

const Command kShowCommand = {"show",
                              "KEY",
                              "one entry's metadata (a unique key prefix will do)",
                              {kSocketFlag, kCacheDirFlag, kStartFlag},
                              "kiln show 3f2a9c",
                              Show};

}  // namespace kiln
