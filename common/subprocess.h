// Starting child processes with a fixed argv (no shell): in the background,
// or to completion with a time limit.
#ifndef KILN_COMMON_SUBPROCESS_H_
#define KILN_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kiln {

struct ProcessResult {
  int exit_code = -1;  // valid when exited normally
  int signal = 0;      // the signal that killed it, or 0
  std::string output;  // stdout and stderr, interleaved
};

// Environment changes for a child: name -> value, or nullopt to unset.
using EnvChanges = std::map<std::string, std::optional<std::string>>;

struct SpawnOptions {
  // Each {parent_fd, child_fd} is dup'ed into the child, in order; stdin is
  // /dev/null unless redirected.
  std::vector<std::pair<int, int>> redirects;
  EnvChanges env;  // applied to this process's environment
  // Its own session (POSIX_SPAWN_SETSID): no controlling terminal, no
  // signals meant for this process group; a daemon that outlives us.
  bool new_session = false;
  // Starts with no signal blocked, whatever the spawning thread blocks
  // (kilnd blocks its signals in every thread).
  bool clear_signal_mask = false;
  // Signals the child starts with at their default action even if this
  // process ignores them (handled ones are reset by exec anyway).
  std::vector<int> default_signals;
  // Closes every descriptor >= 3 in the child after the redirects, CLOEXEC
  // or not: nothing this process holds (listening sockets, pipes, files
  // opened by libraries without O_CLOEXEC) lives on in the child.
  bool close_other_fds = false;
  // How errors name the program; empty: argv[0].
  std::string name;
};

// posix_spawnp(argv) with `options`, not waited for; the child gets this
// process's environment with `options.env` applied. Unavailable "cannot
// start NAME: REASON" when it cannot be started.
absl::StatusOr<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                                   const SpawnOptions& options);
// The same with only redirects and environment changes.
absl::StatusOr<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                                   const std::vector<std::pair<int, int>>& redirects = {},
                                   const EnvChanges& env = {});

struct RunOptions {
  absl::Duration timeout = absl::InfiniteDuration();
  EnvChanges env;  // applied to this process's environment
  // The child's RLIMIT_AS in bytes (0: inherited); processes it starts
  // inherit it. Set, the child is started with fork and exec instead of
  // posix_spawn, which cannot set limits.
  uint64_t address_space_limit = 0;
};

// Starts argv with stdin from /dev/null, waits for it and collects its
// output. Kills it (SIGKILL) and returns DeadlineExceeded after the
// timeout. NotFound when argv[0] cannot be executed (with an address-space
// limit: exit code 127 and the reason in the output).
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const RunOptions& options);
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         absl::Duration timeout);

// Absolute path of the running executable ("" if /proc cannot say), and of
// its directory (".").
std::string ExecutablePath();
std::string ExecutableDirectory();

}  // namespace kiln

#endif  // KILN_COMMON_SUBPROCESS_H_
