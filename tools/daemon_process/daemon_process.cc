#include "tools/daemon_process/daemon_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/files.h"

namespace kiln {
namespace {

// The value of `field` ("PPid:", "VmRSS:") in /proc/PID/status.
std::string StatusField(pid_t pid, const std::string& field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, field)) {
      return std::string(absl::StripAsciiWhitespace(line.substr(field.size())));
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Create(Options options) {
  std::unique_ptr<DaemonProcess> daemon(new DaemonProcess());
  if (options.root.empty()) {
    absl::StatusOr<std::string> root = MakeTempDirectory("/tmp/kilnXXXXXX");
    if (!root.ok()) return root.status();
    daemon->root_ = *std::move(root);
  } else {
    if (absl::Status made = MakeDirectories(options.root, 0700); !made.ok()) return made;
    daemon->root_ = std::move(options.root);
  }
  daemon->kilnd_ = std::move(options.kilnd);
  daemon->socket_path_ = daemon->root_ + "/run/kilnd.sock";
  daemon->cache_dir_ =
      options.cache_dir.empty() ? daemon->root_ + "/cache" : std::move(options.cache_dir);
  daemon->log_path_ = daemon->root_ + "/kilnd.log";
  daemon->env_ = std::move(options.env);
  daemon->client_options_ = std::move(options.client);
  daemon->client_options_.socket_path = daemon->socket_path_;
  daemon->client_options_.auto_start = false;
  return daemon;
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) Kill(SIGKILL);
  RemoveRecursively(root_).IgnoreError();
}

absl::Status DaemonProcess::Start(const std::vector<std::string>& extra_flags) {
  if (pid_ > 0) return absl::FailedPreconditionError("kilnd is already running");
  std::vector<std::string> argv = {kilnd_, "--socket=" + socket_path_, "--cache_dir=" + cache_dir_,
                                   "--log_level=warning"};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  const int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) return absl::InternalError(absl::StrCat("cannot open ", log_path_));
  const absl::StatusOr<pid_t> pid =
      SpawnProcess(argv, {{log, STDOUT_FILENO}, {log, STDERR_FILENO}}, env_);
  close(log);
  if (!pid.ok()) return pid.status();
  pid_ = *pid;
  exit_status_ = -1;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    const absl::Status connected = Connect().status();
    if (connected.ok() || connected.code() == absl::StatusCode::kFailedPrecondition) {
      return absl::OkStatus();
    }
    if (!Alive()) {
      const std::string tail = LogSince(LogSize() > 2000 ? LogSize() - 2000 : 0);
      return absl::InternalError(absl::StrCat("kilnd exited at start with status ", exit_status_,
                                              "; its log ends: ", tail));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError("kilnd did not answer within 60 s");
}

void DaemonProcess::Reaped(int wait_status) {
  pid_ = -1;
  exit_status_ = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

int DaemonProcess::Kill(int signal) {
  if (pid_ <= 0) return exit_status_;
  kill(pid_, signal);
  return WaitForExit();
}

int DaemonProcess::Stop(absl::Duration grace) {
  if (pid_ <= 0) return exit_status_;
  kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  while (Alive()) {
    if (absl::Now() > deadline) return Kill(SIGKILL);
    absl::SleepFor(absl::Milliseconds(5));
  }
  return exit_status_;
}

int DaemonProcess::WaitForExit() {
  if (pid_ <= 0) return exit_status_;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  Reaped(status);
  return exit_status_;
}

bool DaemonProcess::Alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    Reaped(status);
    return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Client>> DaemonProcess::Connect() const {
  return Client::Connect(client_options_);
}

std::vector<pid_t> DaemonProcess::CompileWorkers() const {
  std::vector<pid_t> workers;
  if (pid_ <= 0) return workers;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return workers;
  while (const dirent* entry = readdir(proc)) {
    int pid;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    if (StatusField(pid, "PPid:") != absl::StrCat(pid_)) continue;
    std::ifstream comm(absl::StrCat("/proc/", pid, "/comm"));
    std::string name;
    std::getline(comm, name);
    // comm holds at most 15 characters: "kiln-compile-wo".
    if (absl::StartsWith(name, "kiln-compile")) workers.push_back(pid);
  }
  closedir(proc);
  return workers;
}

int64_t DaemonProcess::RssKib() const {
  if (pid_ <= 0) return -1;
  int64_t kib = -1;
  const std::string value = StatusField(pid_, "VmRSS:");  // "12345 kB"
  if (!absl::SimpleAtoi(value.substr(0, value.find(' ')), &kib)) return -1;
  return kib;
}

size_t DaemonProcess::LogSize() const {
  struct stat info;
  return stat(log_path_.c_str(), &info) == 0 ? static_cast<size_t>(info.st_size) : 0;
}

std::string DaemonProcess::LogSince(size_t offset) const {
  auto bytes = ReadFile(log_path_);
  if (!bytes.ok() || offset >= bytes->size()) return "";
  return bytes->substr(offset);
}

}  // namespace kiln
