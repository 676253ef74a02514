// A fork-join pool for parallel loops: the runtime owns every thread that
// generated kernels and GEMM use, so the cores are never oversubscribed.
//
// ParallelFor may be called from any thread, including from inside a loop
// body (nested calls run inline). Thread-safe. Survives fork(): a child
// starts workers of its own on its first parallel loop.
#ifndef KILN_CLIENT_RUNTIME_THREAD_POOL_H_
#define KILN_CLIENT_RUNTIME_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "client/fork_aware.h"

namespace kiln {

class ThreadPool final : private ForkAware {
 public:
  // `threads` counts the calling thread: ThreadPool(1) runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();

  int threads() const { return threads_; }

  // Not owning and never allocating (std::function would, for most
  // lambdas): ParallelFor returns only when every chunk is done.
  using Body = absl::FunctionRef<void(int64_t, int64_t)>;

  // Calls body(begin, end) over chunks covering [0, n), each at least
  // `grain` long (but the last), and returns when all are done.
  void ParallelFor(int64_t n, int64_t grain, Body body);

 private:
  void BeforeFork() override;
  void AfterForkInParent() override;
  void AfterForkInChild() override;
  void WorkerLoop();
  // Starts the worker threads on the first loop that needs them: a process
  // that only runs small kernels never pays for thread creation.
  void StartWorkers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mutex_);

  struct Batch {
    const Body* body = nullptr;
    int64_t n = 0, chunk = 0, next = 0, chunks = 0, finished = 0;
  };

  // How long an idle worker spins on `published_` before it sleeps.
  static constexpr int64_t kSpinNanoseconds = 100'000;

  absl::Mutex call_mutex_;  // one parallel loop at a time across caller threads
  absl::Mutex mutex_;
  Batch batch_ ABSL_GUARDED_BY(mutex_);
  uint64_t generation_ ABSL_GUARDED_BY(mutex_) = 0;
  std::atomic<uint64_t> published_{0};  // generation_, readable without the lock
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  const int threads_;
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(call_mutex_);
};

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_THREAD_POOL_H_
