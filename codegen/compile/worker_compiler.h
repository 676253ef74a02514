// Compiles in long-lived kiln-compile-worker processes (worker/worker_main.cc),
// which link clang and lld, so this process never links LLVM. A warm worker
// compiles and links a small kernel several times faster than a clang++
// subprocess (no process start, no LLVM initialisation) and yields the same
// bytes (same flags, same link arguments).
//
// Up to `jobs` workers are started lazily with posix_spawn and each runs one
// compile at a time (lld keeps process-wide state). The channel to a worker
// is a Unix socketpair on its stdin and stdout rather than two pipes: a send
// with MSG_NOSIGNAL cannot raise SIGPIPE in the daemon when a worker dies.
// A worker that outlives the time limit is killed (SIGKILL) and reaped, one
// that crashes is reaped; either way the next compile starts a fresh one.
// A compile whose worker crashed is retried once on a fresh worker: crashes
// are taken to be transient (the OOM killer, a stray kill). When that one
// crashes too, Compile is Unavailable, which FallbackCompiler answers with
// the clang++ subprocess.
//
// Limits: each compile has a time limit, and each worker an address-space
// limit (RLIMIT_AS, set by the worker on itself); a worker that runs out of
// memory exits with kWorkerOutOfMemoryExitCode. A worker that dies of
// SIGBUS on a nearly full disk (lld writes through a shared mapping) ran
// out of disk, not luck. Both are ResourceExhausted, never retried.
//
// Workers die with this process (PR_SET_PDEATHSIG); only if this process is
// itself killed are their kiln-worker* directories under temp_root left,
// and the next WorkerCompiler on that temp_root removes them.
//
// Thread-safe: Compile may be called from any number of threads and blocks
// while all `jobs` workers are busy.
#ifndef KILN_CODEGEN_COMPILE_WORKER_COMPILER_H_
#define KILN_CODEGEN_COMPILE_WORKER_COMPILER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codegen/compile/compiler.h"
#include "codegen/compile/resource_limits.h"

namespace kiln {

// The kiln-compile-worker binary for this process: first next to the running
// executable (an installed kilnd and its worker share a directory), then in
// the executable's Bazel runfiles at codegen/compile/worker/ (`bazel run`,
// `bazel test`, or a bazel-bin/ binary whose target has the worker in its
// `data`). NotFound lists the places it looked.
absl::StatusOr<std::string> FindCompileWorker();

// Tests only: ways to make a worker misbehave instead of compiling.
enum class WorkerFault {
  kNone,
  kCrash,         // die of SIGSEGV
  kHang,          // never answer
  kExceedMemory,  // allocate more than the memory limit
};

struct WorkerCompilerOptions {
  std::string worker_path;  // e.g. from FindCompileWorker()
  int jobs = 1;             // at most this many workers, hence compiles at once
  // Per compile, from sending the request until the response (a new
  // worker's LLVM initialisation included); waiting for a free worker is
  // not counted.
  absl::Duration timeout = absl::Seconds(60);
  int log_fd = -1;  // workers' stderr; -1 inherits ours
  // Each worker gets a private kiln-worker* directory here. The constructor
  // removes kiln-worker* entries left by a killed process: no other live
  // WorkerCompiler may use the same temp_root.
  std::string temp_root = "/tmp";
  // RLIMIT_AS of each worker (0: none).
  uint64_t memory_limit_bytes = kDefaultCompileMemoryBytes;

  // Tests only. Workers honour faults only when allow_fault_injection
  // starts them with --allow_fault_injection (otherwise a fault request
  // fails with an error). The first `injected_fault_count` requests sent to
  // workers carry `injected_fault`; `after_send`, when set, is called with
  // the worker's pid after each request was sent, before its answer is read.
  bool allow_fault_injection = false;
  WorkerFault injected_fault = WorkerFault::kNone;
  int injected_fault_count = 0;
  std::function<void(pid_t)> after_send;
};

class WorkerCompiler : public Compiler {
 public:
  explicit WorkerCompiler(WorkerCompilerOptions options);
  // Kills and reaps the workers and removes their directories. No Compile
  // may be running.
  ~WorkerCompiler() override;

  // Errors, besides those of Compiler::Compile: Unavailable when no worker
  // can be started, or when the worker crashed and so did the retry (a
  // caller may fall back to SubprocessCompiler); ResourceExhausted when the
  // disk under temp_root is full or the worker exceeded its memory limit.
  absl::StatusOr<CompiledObject> Compile(absl::string_view source,
                                         kiln::v1::Target target) override;
  // Starts every worker (options.jobs), each paying LLVM's initialisation
  // with a trivial compile, concurrently.
  absl::Status Warmup() override;
  const char* name() const override { return "worker"; }

  // Workers started so far, replacements included.
  int64_t workers_started() const;

 private:
  struct Worker {
    pid_t pid = -1;
    int socket = -1;  // our end of the worker's stdin/stdout
    std::string work_dir;
  };
  class Launcher;
  struct Attempt {
    absl::StatusOr<CompiledObject> result;
    bool worker_crashed = false;  // died of a signal or exited: worth a retry
  };

  Attempt CompileOnce(absl::string_view source, kiln::v1::Target target);
  // The result of a compile whose worker hung up or timed out; discards it.
  Attempt LostWorker(Worker worker, const absl::Status& exchange);

  absl::StatusOr<Worker> Acquire();
  void Release(Worker worker);
  // Kills and reaps the worker, removes its directory, frees its slot, and
  // returns its wait status.
  int Discard(Worker worker);
  absl::StatusOr<Worker> Start();
  bool CanAcquire() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const WorkerCompilerOptions options_;
  const int jobs_;
  std::atomic<int> injected_faults_left_;
  // posix_spawn runs on this one long-lived thread: PR_SET_PDEATHSIG fires
  // when the *thread* that spawned the worker exits (prctl(2)), so a worker
  // spawned from a short-lived caller thread would be killed with it.
  const std::unique_ptr<Launcher> launcher_;

  mutable absl::Mutex mutex_;
  std::vector<Worker> idle_ ABSL_GUARDED_BY(mutex_);
  // Slots in use: workers idle, busy or being started.
  int running_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t started_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace kiln

#endif  // KILN_CODEGEN_COMPILE_WORKER_COMPILER_H_
