#include "common/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/files.h"

extern char** environ;

namespace kiln {

namespace {

// This process's environment with `env` applied (names in `env` dropped,
// then the ones with a value added back).
std::vector<std::string> ChildEnvironment(const EnvChanges& env) {
  std::vector<std::string> variables;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const absl::string_view variable(*entry);
    if (env.count(std::string(variable.substr(0, variable.find('=')))) == 0) {
      variables.emplace_back(variable);
    }
  }
  for (const auto& [name, value] : env) {
    if (value.has_value()) variables.push_back(absl::StrCat(name, "=", *value));
  }
  return variables;
}

// NULL-terminated pointers into `strings`, for exec.
std::vector<char*> PointerArray(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& string : strings) pointers.push_back(string.data());
  pointers.push_back(nullptr);
  return pointers;
}

// fork + setrlimit(RLIMIT_AS) + exec, with stdout and stderr on `output_fd`
// and stdin on /dev/null. Between fork and exec the child of a threaded
// process may call only async-signal-safe functions: everything it needs
// is built before the fork.
absl::StatusOr<pid_t> SpawnWithAddressSpaceLimit(std::vector<std::string> argv,
                                                 const EnvChanges& env, int output_fd,
                                                 uint64_t limit) {
  std::vector<std::string> variables = ChildEnvironment(env);
  const std::vector<char*> args = PointerArray(argv);
  const std::vector<char*> envp = PointerArray(variables);
  const rlimit address_space = {limit, limit};
  sigset_t no_signals;
  sigemptyset(&no_signals);
  static constexpr char kExecFailed[] = "exec failed\n";
  const pid_t pid = fork();
  if (pid < 0) return absl::UnavailableError(absl::StrCat("fork failed: ", strerror(errno)));
  if (pid == 0) {
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 || dup2(output_fd, STDOUT_FILENO) < 0 ||
        dup2(output_fd, STDERR_FILENO) < 0 || setrlimit(RLIMIT_AS, &address_space) != 0) {
      _exit(127);
    }
    // kilnd blocks its signals in every thread; a child starts with none
    // blocked, as posix_spawn's POSIX_SPAWN_SETSIGMASK would give it.
    sigprocmask(SIG_SETMASK, &no_signals, nullptr);
    execvpe(args[0], args.data(), envp.data());
    if (write(STDERR_FILENO, kExecFailed, sizeof(kExecFailed) - 1) < 0) _exit(127);
    _exit(127);
  }
  return pid;
}

}  // namespace

absl::StatusOr<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                                   const SpawnOptions& options) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const bool stdin_redirected = std::any_of(
      options.redirects.begin(), options.redirects.end(),
      [](const std::pair<int, int>& redirect) { return redirect.second == STDIN_FILENO; });
  if (!stdin_redirected) {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  for (const auto& [from, to] : options.redirects) {
    posix_spawn_file_actions_adddup2(&actions, from, to);
  }
  if (options.close_other_fds) {
    posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  short flags = 0;
  if (options.new_session) flags |= POSIX_SPAWN_SETSID;
  sigset_t no_signals, defaults;
  sigemptyset(&no_signals);
  if (options.clear_signal_mask) {
    posix_spawnattr_setsigmask(&attributes, &no_signals);
    flags |= POSIX_SPAWN_SETSIGMASK;
  }
  if (!options.default_signals.empty()) {
    sigemptyset(&defaults);
    for (int signal : options.default_signals) sigaddset(&defaults, signal);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    flags |= POSIX_SPAWN_SETSIGDEF;
  }
  posix_spawnattr_setflags(&attributes, flags);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> variables = ChildEnvironment(options.env);
  std::vector<char*> envp = PointerArray(variables);
  pid_t pid;
  const int error = posix_spawnp(&pid, args[0], &actions, &attributes, args.data(),
                                 options.env.empty() ? environ : envp.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot start ", options.name.empty() ? argv[0] : options.name, ": ", strerror(error)));
  }
  return pid;
}

absl::StatusOr<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                                   const std::vector<std::pair<int, int>>& redirects,
                                   const EnvChanges& env) {
  SpawnOptions options;
  options.redirects = redirects;
  options.env = env;
  return SpawnProcess(argv, options);
}

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         absl::Duration timeout) {
  RunOptions options;
  options.timeout = timeout;
  return RunProcess(argv, options);
}

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const RunOptions& options) {
  const absl::Duration timeout = options.timeout;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  const absl::StatusOr<pid_t> spawned =
      options.address_space_limit > 0
          ? SpawnWithAddressSpaceLimit(argv, options.env, pipe_fds[1], options.address_space_limit)
          : SpawnProcess(argv, {{pipe_fds[1], STDOUT_FILENO}, {pipe_fds[1], STDERR_FILENO}},
                         options.env);
  close(pipe_fds[1]);
  if (!spawned.ok()) {
    close(pipe_fds[0]);
    return absl::NotFoundError(spawned.status().message());
  }
  const pid_t pid = *spawned;

  ProcessResult result;
  const absl::Time deadline = absl::Now() + timeout;
  bool timed_out = false;
  char buffer[8192];
  while (true) {
    const int64_t remaining_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (remaining_ms <= 0) {
      timed_out = true;
      break;
    }
    pollfd poll_fd = {pipe_fds[0], POLLIN, 0};
    const int ready = poll(&poll_fd, 1, static_cast<int>(std::min<int64_t>(remaining_ms, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child closed its output
    result.output.append(buffer, n);
  }
  close(pipe_fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(argv[0], " did not finish within ",
                                                    absl::FormatDuration(timeout), "; killed"));
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

std::string ExecutablePath() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, n) : std::string();
}

std::string ExecutableDirectory() {
  const std::string path = ExecutablePath();
  return path.empty() ? "." : Dirname(path);
}

}  // namespace kiln
