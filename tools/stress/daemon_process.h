// A private kilnd for the stress campaigns: its own socket and cache
// directory under one temporary root, its log in <root>/kilnd.log, started,
// killed and restarted like a user would. The same job as the tests'
// DaemonFixture (tests/daemon_fixture.h), which is testonly and links
// gtest; this one adds what the campaigns need (a log file, a chosen cache
// directory, the compile workers, RSS).
#ifndef KILN_TOOLS_STRESS_DAEMON_PROCESS_H_
#define KILN_TOOLS_STRESS_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"

namespace kiln::stress {

class DaemonProcess {
 public:
  // `kilnd` is the binary to start. Creates a fresh root under /tmp; the
  // cache directory is <root>/cache unless `cache_dir` names another.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Create(std::string kilnd,
                                                               std::string cache_dir = "");
  ~DaemonProcess();  // SIGKILLs a running kilnd, removes the root

  // Starts kilnd and waits until it answers (or exits: Internal naming its
  // status and the log's tail).
  absl::Status Start(const std::vector<std::string>& extra_flags = {});
  // Sends `signal` and reaps kilnd; returns its exit status (128 + signal
  // when killed).
  int Kill(int signal);
  // Whether kilnd is still running (reaps it if it exited by itself, and
  // then remembers how: exit_status()).
  bool Alive();
  int exit_status() const { return exit_status_; }
  pid_t pid() const { return pid_; }

  // A client that never auto-starts a daemon.
  absl::StatusOr<std::unique_ptr<Client>> Connect() const;

  // Pids of kilnd's children named kiln-compile-worker (from /proc).
  std::vector<pid_t> CompileWorkers() const;
  // kilnd's resident set (VmRSS) in KiB, or -1.
  int64_t RssKib() const;
  // kilnd.log's bytes from `offset` on.
  std::string LogSince(size_t offset) const;
  size_t LogSize() const;

  const std::string& root() const { return root_; }
  const std::string& socket_path() const { return socket_path_; }
  const std::string& cache_dir() const { return cache_dir_; }

 private:
  DaemonProcess() = default;
  std::string kilnd_, root_, socket_path_, cache_dir_, log_path_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

// kilnd's path: `flag` if set, else daemon/kilnd below the working
// directory (Bazel runfiles, as `bazel run` and tests see them), else next
// to this executable's runfiles.
std::string FindKilnd(const std::string& flag);

}  // namespace kiln::stress

#endif  // KILN_TOOLS_STRESS_DAEMON_PROCESS_H_
