#include "tests/daemon_fixture.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/subprocess.h"

namespace kiln {

DaemonFixture::DaemonFixture() {
  root_ = *MakeTempDirectory("/tmp/kilnXXXXXX");
  socket_path_ = root_ + "/run/kilnd.sock";
  cache_dir_ = root_ + "/cache";
}

DaemonFixture::~DaemonFixture() {
  if (running()) Kill(SIGKILL);
  RemoveRecursively(root_).IgnoreError();
}

absl::Status DaemonFixture::Start(const std::vector<std::string>& extra_flags) {
  std::vector<std::string> argv = {kKilndPath, "--socket=" + socket_path_,
                                   "--cache_dir=" + cache_dir_, "--log_level=warning"};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  const absl::StatusOr<pid_t> pid = SpawnProcess(argv);
  if (!pid.ok()) return pid.status();
  pid_ = *pid;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    // Answering, if perhaps with other versions (tests start such daemons).
    const absl::Status connected = Connect().status();
    if (connected.ok() || connected.code() == absl::StatusCode::kFailedPrecondition) {
      return absl::OkStatus();
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat("kilnd exited at start with status ", status));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError("kilnd did not answer within 30 s");
}

void DaemonFixture::Kill(int signal) {
  if (!running()) return;
  kill(pid_, signal);
  WaitForExit();
}

int DaemonFixture::WaitForExit() {
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

absl::StatusOr<std::unique_ptr<Client>> DaemonFixture::Connect() const {
  ClientOptions options;
  options.socket_path = socket_path_;
  options.auto_start = false;
  options.client_name = "e2e-test";
  return Client::Connect(options);
}

absl::StatusOr<ProcessResult> DaemonFixture::RunTool(std::vector<std::string> argv) const {
  setenv("KILN_SOCKET", socket_path_.c_str(), 1);
  setenv("KILN_CACHE_DIR", cache_dir_.c_str(), 1);
  return RunProcess(argv, absl::Minutes(2));
}

}  // namespace kiln
