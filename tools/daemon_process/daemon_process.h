// A private kilnd: its own socket and cache directory under one root
// directory, its output in <root>/kilnd.log, started, killed and restarted
// like a user would. The one launcher behind the end-to-end tests
// (tests/daemon_fixture.h), the stress campaigns (tools/stress) and the
// benches (tools/bench). Not thread-safe: one thread drives it (Connect's
// clients may be used from any thread).
#ifndef KILN_TOOLS_DAEMON_PROCESS_DAEMON_PROCESS_H_
#define KILN_TOOLS_DAEMON_PROCESS_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "common/subprocess.h"

namespace kiln {

class DaemonProcess {
 public:
  struct Options {
    std::string kilnd = "daemon/kilnd";  // the binary; this one is runfiles-relative
    // Holds run/kilnd.sock and kilnd.log; created if missing. Empty: a fresh
    // directory under /tmp, short because Unix socket paths are limited to
    // 108 bytes. Either way it is removed, with everything in it, when this
    // goes.
    std::string root;
    std::string cache_dir;  // empty: <root>/cache
    EnvChanges env;         // for kilnd's environment (RUNFILES_DIR, say)
    // What Connect uses; its socket_path is this daemon's and auto_start is
    // always false.
    ClientOptions client;
  };

  // Creates the root; does not start kilnd.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Create(Options options);
  ~DaemonProcess();  // SIGKILLs a running kilnd, removes the root

  // Starts kilnd with `extra_flags` after --socket, --cache_dir and
  // --log_level=warning, and waits until it answers Connect. A
  // FailedPrecondition answer (another version, another user) counts: kilnd
  // is listening, and tests start such daemons on purpose. Internal naming
  // its exit status and the log's tail if it exits first; DeadlineExceeded
  // after 60 s; FailedPrecondition if it is already running.
  absl::Status Start(const std::vector<std::string>& extra_flags = {});
  // Sends `signal` and reaps kilnd; returns its exit status (128 + signal
  // when killed), or the last one when it is not running.
  int Kill(int signal);
  // SIGTERM, as a user would stop it; SIGKILL if kilnd has not exited after
  // `grace`. Returns the exit status, as Kill.
  int Stop(absl::Duration grace);
  // Blocks until kilnd exits (whoever signalled it); the exit status, as Kill.
  int WaitForExit();
  // Whether kilnd is still running (reaps it if it exited by itself, and
  // then remembers how: exit_status()).
  bool Alive();
  int exit_status() const { return exit_status_; }
  pid_t pid() const { return pid_; }  // -1 when not running

  // A client of this kilnd that never auto-starts a daemon.
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
  const std::string& log_path() const { return log_path_; }

 private:
  DaemonProcess() = default;
  void Reaped(int wait_status);

  std::string kilnd_, root_, socket_path_, cache_dir_, log_path_;
  EnvChanges env_;
  ClientOptions client_options_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

}  // namespace kiln

#endif  // KILN_TOOLS_DAEMON_PROCESS_DAEMON_PROCESS_H_
