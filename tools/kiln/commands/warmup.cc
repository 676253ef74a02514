// kiln warmup: compile every bucket of a warmup plan, or suggest a plan from
// recorded traffic (tools/kiln/warmup.h, docs/WARMUP.md).
#include "tools/kiln/warmup.h"

#include <unistd.h>

#include <iostream>

#include "absl/flags/flag.h"
#include "common/status_macros.h"
#include "tools/kiln/commands/command.h"

ABSL_FLAG(int, jobs, 8,
          "Compile requests in flight at once (kilnd's --compile_jobs bounds how many compile).");
ABSL_FLAG(bool, suggest, false,
          "Take a GRAPH.json and print a plan for it from the input sizes serving processes "
          "recorded (docs/WARMUP.md).");
ABSL_FLAG(double, share, 0.99, "--suggest: the share of recorded calls to cover.");
ABSL_FLAG(int, max_buckets, 24, "--suggest: the most buckets to suggest.");

namespace kiln {
namespace {

absl::Status Warmup(const Args& args) {
  if (absl::GetFlag(FLAGS_suggest)) {
    RETURN_IF_ERROR(NeedArgs(args, 1, "kiln warmup --suggest GRAPH.json"));
    ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
    SuggestOptions options;
    options.share = absl::GetFlag(FLAGS_share);
    options.max_buckets = absl::GetFlag(FLAGS_max_buckets);
    return SuggestWarmup(args[0], *client, options, std::cout, std::cerr);
  }
  RETURN_IF_ERROR(NeedArgs(args, 1, "kiln warmup PLAN.json"));
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  WarmupOptions options;
  options.jobs = absl::GetFlag(FLAGS_jobs);
  options.json = absl::GetFlag(FLAGS_json);
  options.terminal = isatty(STDERR_FILENO);
  return RunWarmup(args[0], *client, options, std::cout, std::cerr);
}

}  // namespace

const Command kWarmupCommand = {
    "warmup",
    "PLAN.json | --suggest GRAPH.json",
    "compile every bucket of a warmup plan ahead of traffic, or suggest a plan from recorded "
    "traffic (docs/WARMUP.md)",
    {{"jobs"},
     {"json", "print a summary object"},
     {"suggest"},
     {"share"},
     {"max_buckets"},
     kSocketFlag,
     kCacheDirFlag,
     kStartFlag},
    "kiln warmup examples/plans/warmup.json --jobs=4",
    Warmup};

}  // namespace kiln
