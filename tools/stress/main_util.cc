#include "tools/stress/main_util.h"

#include <unistd.h>

#include "absl/flags/flag.h"
#include "common/subprocess.h"

ABSL_FLAG(uint32_t, seed, 1, "Seed of every random choice (graphs, timings, bytes).");
ABSL_FLAG(bool, json, false, "Print the summary as one JSON object.");
ABSL_FLAG(bool, verbose, false, "A line per round, trial or batch on stderr.");
ABSL_FLAG(std::string, kilnd, "",
          "The kilnd binary (default: daemon/kilnd in the runfiles, as `bazel run` sees them).");
ABSL_FLAG(std::string, examples, "examples", "Directory of the example graphs (*.json).");

namespace kiln::stress {
namespace {

// kilnd's path: `flag` if set, else daemon/kilnd below the working
// directory (Bazel runfiles, as `bazel run` and tests see them), else next
// to this executable's runfiles.
std::string FindKilnd(const std::string& flag) {
  if (!flag.empty()) return flag;
  for (const std::string& candidate :
       {std::string("daemon/kilnd"), ExecutablePath() + ".runfiles/kiln/daemon/kilnd"}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "daemon/kilnd";
}

}  // namespace

CommonOptions CommonOptionsFromFlags() {
  CommonOptions options;
  options.kilnd = FindKilnd(absl::GetFlag(FLAGS_kilnd));
  options.examples_dir = absl::GetFlag(FLAGS_examples);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.verbose = absl::GetFlag(FLAGS_verbose);
  return options;
}

}  // namespace kiln::stress
