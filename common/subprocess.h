// Running a child process with a fixed argv (no shell), with a time limit.
#ifndef KILN_COMMON_SUBPROCESS_H_
#define KILN_COMMON_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kiln {

struct ProcessResult {
  int exit_code = -1;    // valid when exited normally
  int signal = 0;        // the signal that killed it, or 0
  std::string output;    // stdout and stderr, interleaved
};

// posix_spawn(argv) with stdin from /dev/null, waits for it and collects its
// output. Kills it (SIGKILL) and returns DeadlineExceeded after `timeout`.
// NotFound when argv[0] cannot be executed.
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         absl::Duration timeout);

// Absolute path of the running executable ("" if /proc cannot say), and of
// its directory (".").
std::string ExecutablePath();
std::string ExecutableDirectory();

}  // namespace kiln

#endif  // KILN_COMMON_SUBPROCESS_H_
