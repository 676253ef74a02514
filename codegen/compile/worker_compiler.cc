#include "codegen/compile/worker_compiler.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <thread>

#include "abi/target.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "codegen/compile/stale_files.h"
#include "codegen/compile/worker.pb.h"
#include "codegen/compile/worker_channel.h"
#include "codegen/compile/worker_frame.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace kiln {
namespace {

constexpr char kWorkerName[] = "kiln-compile-worker";
constexpr char kWorkerRunfilesPath[] = "kiln/codegen/compile/worker/kiln-compile-worker";
constexpr char kWorkerDirectoryPrefix[] = "kiln-worker";

std::string DescribeWaitStatus(int status) {
  if (WIFSIGNALED(status)) return absl::StrCat("signal ", WTERMSIG(status));
  if (WIFEXITED(status)) return absl::StrCat("exit code ", WEXITSTATUS(status));
  return absl::StrCat("wait status ", status);
}

worker::CompileRequest::Fault ToProto(WorkerFault fault) {
  switch (fault) {
    case WorkerFault::kCrash:
      return worker::CompileRequest::CRASH;
    case WorkerFault::kHang:
      return worker::CompileRequest::HANG;
    case WorkerFault::kExceedMemory:
      return worker::CompileRequest::EXCEED_MEMORY;
    case WorkerFault::kNone:
      break;
  }
  return worker::CompileRequest::NONE;
}

// The worker's error as a status: the worker says which code it is (only
// ResourceExhausted is distinguished; the rest are Kiln bugs, Internal).
absl::Status WorkerError(const worker::CompileResponse& response) {
  if (response.error_code() == static_cast<int>(absl::StatusCode::kResourceExhausted)) {
    return absl::ResourceExhaustedError(response.error());
  }
  return absl::InternalError(response.error());
}

}  // namespace

absl::StatusOr<std::string> FindCompileWorker() {
  std::vector<std::string> candidates = {absl::StrCat(ExecutableDirectory(), "/", kWorkerName)};
  if (const char* runfiles = getenv("RUNFILES_DIR"); runfiles != nullptr && *runfiles != '\0') {
    candidates.push_back(absl::StrCat(runfiles, "/", kWorkerRunfilesPath));
  }
  candidates.push_back(absl::StrCat(ExecutablePath(), ".runfiles/", kWorkerRunfilesPath));
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(
      absl::StrCat(kWorkerName, " not found; looked for ", absl::StrJoin(candidates, ", ")));
}

// Runs tasks, one at a time, on a thread that lives as long as the
// WorkerCompiler (see launcher_ in the header).
class WorkerCompiler::Launcher {
 public:
  Launcher() : thread_([this] { Loop(); }) {}

  ~Launcher() {
    {
      absl::MutexLock lock(&mutex_);
      stopping_ = true;
    }
    thread_.join();
  }

  // Runs `task` on the launcher thread and returns when it has finished.
  void Run(const std::function<void()>& task) {
    absl::Notification done;
    {
      absl::MutexLock lock(&mutex_);
      tasks_.push_back([&] {
        task();
        done.Notify();
      });
    }
    done.WaitForNotification();
  }

 private:
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return !tasks_.empty() || stopping_;
  }

  void Loop() {
    absl::MutexLock lock(&mutex_);
    while (true) {
      mutex_.Await(absl::Condition(this, &Launcher::HasWorkOrStopping));
      if (tasks_.empty()) return;
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      mutex_.Unlock();
      task();
      mutex_.Lock();
    }
  }

  absl::Mutex mutex_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;  // last: starts after the members above exist
};

WorkerCompiler::WorkerCompiler(WorkerCompilerOptions options)
    : options_(std::move(options)),
      jobs_(std::max(1, options_.jobs)),
      injected_faults_left_(options_.injected_fault_count),
      launcher_(std::make_unique<Launcher>()) {
  RemoveStaleEntries(options_.temp_root, kWorkerDirectoryPrefix);
}

WorkerCompiler::~WorkerCompiler() {
  std::vector<Worker> idle;
  {
    absl::MutexLock lock(&mutex_);
    idle.swap(idle_);
  }
  for (Worker& worker : idle) Discard(std::move(worker));
}

absl::Status WorkerCompiler::Warmup() {
  // Every worker at once: a miss that arrives while another compile runs
  // (a warmup's, say) must not pay a new worker's LLVM initialisation.
  std::vector<absl::Status> results(options_.jobs);
  std::vector<std::thread> threads;
  for (int i = 0; i < options_.jobs; ++i) {
    threads.emplace_back([this, &results, i] {
      results[i] =
          Compile("extern \"C\" void kiln_warmup(void) {}\n", kiln::v1::TARGET_NATIVE).status();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& result : results) RETURN_IF_ERROR(result);
  return absl::OkStatus();
}

absl::StatusOr<CompiledObject> WorkerCompiler::Compile(absl::string_view source,
                                                       kiln::v1::Target target) {
  if (!IsKnownTarget(target)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot compile for unknown ", TargetName(target)));
  }
  Attempt first = CompileOnce(source, target);
  if (!first.worker_crashed) return std::move(first.result);
  // Once on a fresh worker: a crash is more often the machine's (the OOM
  // killer, a stray kill) than the source's, and one that is the source's
  // crashes clang++ too, which then reports it.
  KILN_LOG(WARNING) << first.result.status().message() << "; retrying on a fresh worker";
  Attempt second = CompileOnce(source, target);
  if (!second.worker_crashed) return std::move(second.result);
  return absl::UnavailableError(absl::StrCat(second.result.status().message(),
                                             "; the compile was retried once on a fresh worker"));
}

WorkerCompiler::Attempt WorkerCompiler::CompileOnce(absl::string_view source,
                                                    kiln::v1::Target target) {
  absl::StatusOr<Worker> worker = Acquire();
  if (!worker.ok()) return {worker.status()};
  const absl::Time deadline = absl::Now() + options_.timeout;
  worker::CompileRequest request;
  request.set_source(std::string(source));
  request.set_target(target);
  if (injected_faults_left_.load() > 0 && injected_faults_left_.fetch_sub(1) > 0) {
    request.set_fault(ToProto(options_.injected_fault));
  }
  absl::Status sent = SendRequest(worker->socket, request, deadline);
  if (sent.ok() && options_.after_send) options_.after_send(worker->pid);
  absl::StatusOr<worker::CompileResponse> response =
      sent.ok() ? ReceiveResponse(worker->socket, deadline) : sent;
  if (!response.ok()) return LostWorker(*std::move(worker), response.status());

  if (response->worker_exiting()) {
    Discard(*std::move(worker));
  } else {
    Release(*std::move(worker));
  }
  if (!response->error().empty()) return {WorkerError(*response)};
  if (response->shared_object().empty()) {
    return {absl::InternalError("compile worker returned neither a .so nor an error")};
  }
  CompiledObject object;
  object.shared_object = std::move(*response->mutable_shared_object());
  object.compile_ms = response->compile_ms();
  object.compiler = name();
  return {std::move(object)};
}

WorkerCompiler::Attempt WorkerCompiler::LostWorker(Worker worker, const absl::Status& exchange) {
  // The worker is in an unknown state (mid-compile, dead, or out of step
  // with the framing): never reuse it. The disk is looked at before Discard
  // frees what the worker wrote.
  const pid_t pid = worker.pid;
  const bool disk_nearly_full = IsNearlyFull(options_.temp_root);
  const int wait_status = Discard(std::move(worker));
  if (absl::IsDeadlineExceeded(exchange)) {
    return {absl::DeadlineExceededError(absl::StrCat("compile did not finish within ",
                                                     absl::FormatDuration(options_.timeout),
                                                     "; compile worker ", pid, " was killed"))};
  }
  if (!absl::IsUnavailable(exchange)) return {exchange};
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == kWorkerOutOfMemoryExitCode) {
    return {MemoryLimitError(options_.memory_limit_bytes)};
  }
  if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGBUS && disk_nearly_full) {
    return {NoSpaceError(options_.temp_root)};
  }
  return {absl::InternalError(absl::StrCat(
              WIFSIGNALED(wait_status) ? "compile worker crashed (" : "compile worker exited (",
              DescribeWaitStatus(wait_status), "); its stderr is in the daemon's log")),
          /*worker_crashed=*/true};
}

int64_t WorkerCompiler::workers_started() const {
  absl::MutexLock lock(&mutex_);
  return started_;
}

bool WorkerCompiler::CanAcquire() const { return !idle_.empty() || running_ < jobs_; }

absl::StatusOr<WorkerCompiler::Worker> WorkerCompiler::Acquire() {
  std::optional<Worker> idle;
  {
    absl::MutexLock lock(&mutex_);
    mutex_.Await(absl::Condition(this, &WorkerCompiler::CanAcquire));
    if (!idle_.empty()) {
      idle = std::move(idle_.back());
      idle_.pop_back();
    } else {
      ++running_;  // claim a slot; Start() fills it
    }
  }
  if (idle.has_value()) {
    int status = 0;
    if (waitpid(idle->pid, &status, WNOHANG) == 0) return *std::move(idle);
    // It died while idle (OOM killer, a stray kill): replace it in its slot
    // rather than fail this compile.
    KILN_LOG(WARNING) << "compile worker " << idle->pid << " died while idle ("
                      << DescribeWaitStatus(status) << "); starting another";
    close(idle->socket);
    RemoveRecursively(idle->work_dir).IgnoreError();
  }
  absl::StatusOr<Worker> started = Start();
  if (!started.ok()) {
    absl::MutexLock lock(&mutex_);
    --running_;
  }
  return started;
}

void WorkerCompiler::Release(Worker worker) {
  absl::MutexLock lock(&mutex_);
  idle_.push_back(std::move(worker));
}

int WorkerCompiler::Discard(Worker worker) {
  // SIGKILL before waiting also when the worker is already dying: the kernel
  // keeps the first cause of death, so the status still names a crash.
  kill(worker.pid, SIGKILL);
  int status = 0;
  while (waitpid(worker.pid, &status, 0) < 0 && errno == EINTR) {
  }
  close(worker.socket);
  const absl::Status removed = RemoveRecursively(worker.work_dir);
  if (!removed.ok()) KILN_LOG(WARNING) << removed;
  absl::MutexLock lock(&mutex_);
  --running_;
  return status;
}

absl::StatusOr<WorkerCompiler::Worker> WorkerCompiler::Start() {
  Worker worker;
  ASSIGN_OR_RETURN(
      worker.work_dir,
      MakeTempDirectory(absl::StrCat(options_.temp_root, "/", kWorkerDirectoryPrefix, "XXXXXX")));
  // CLOEXEC, so that a worker started concurrently by another thread does
  // not inherit this one's channel (a crash would then never read as EOF).
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    RemoveRecursively(worker.work_dir).IgnoreError();
    return absl::UnavailableError(absl::StrCat("socketpair failed: ", strerror(errno)));
  }
  std::vector<std::string> argv = {options_.worker_path, absl::StrCat("--parent_pid=", getpid()),
                                   absl::StrCat("--work_dir=", worker.work_dir)};
  if (options_.memory_limit_bytes > 0) {
    argv.push_back(absl::StrCat("--memory_limit_bytes=", options_.memory_limit_bytes));
  }
  if (options_.allow_fault_injection) argv.push_back("--allow_fault_injection");
  SpawnOptions spawn;
  spawn.redirects = {{sockets[1], STDIN_FILENO}, {sockets[1], STDOUT_FILENO}};
  if (options_.log_fd >= 0) spawn.redirects.push_back({options_.log_fd, STDERR_FILENO});
  // The launcher thread inherits whatever signal mask its creator had; the
  // worker starts with no signal blocked.
  spawn.clear_signal_mask = true;
  spawn.name = absl::StrCat("the compile worker ", options_.worker_path);
  absl::StatusOr<pid_t> pid = absl::UnknownError("not started");
  launcher_->Run([&] { pid = SpawnProcess(argv, spawn); });
  close(sockets[1]);
  if (!pid.ok()) {
    close(sockets[0]);
    RemoveRecursively(worker.work_dir).IgnoreError();
    return pid.status();
  }
  worker.pid = *pid;
  worker.socket = sockets[0];
  fcntl(worker.socket, F_SETFL, fcntl(worker.socket, F_GETFL) | O_NONBLOCK);
  absl::MutexLock lock(&mutex_);
  ++started_;
  return worker;
}

}  // namespace kiln
