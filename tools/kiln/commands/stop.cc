// kiln stop: drain kilnd and wait for it to exit (tools/kiln/lifecycle.h).
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "tools/kiln/commands/command.h"
#include "tools/kiln/lifecycle.h"

ABSL_FLAG(absl::Duration, wait, absl::Seconds(30),
          "How long to wait for kilnd to finish draining and exit.");

namespace kiln {
namespace {

absl::Status Stop(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln stop"));
  return StopDaemon(DaemonOptionsFromFlags(), absl::GetFlag(FLAGS_wait), std::cout);
}

}  // namespace

const Command kStopCommand = {"stop",
                              "",
                              "drain kilnd and wait for it to exit (exit code 3 when none runs)",
                              {{"wait"}, kSocketFlag},
                              "kiln stop --wait=1m",
                              Stop};

}  // namespace kiln
