// kiln status: is kilnd running (tools/kiln/lifecycle.h). Never starts one.
#include <iostream>

#include "absl/flags/flag.h"
#include "common/status_macros.h"
#include "tools/kiln/commands/command.h"
#include "tools/kiln/lifecycle.h"

namespace kiln {
namespace {

absl::Status Status(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln status"));
  return PrintDaemonStatus(DaemonOptionsFromFlags(), absl::GetFlag(FLAGS_json), std::cout);
}

}  // namespace

const Command kStatusCommand = {
    "status",
    "",
    "is kilnd running (never starts one): version, pid, socket, cache, uptime; exit 3 if not",
    {{"json"}, kSocketFlag},
    "kiln status --json",
    Status};

}  // namespace kiln
