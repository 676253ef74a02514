// A fork-join pool for parallel loops: the runtime owns every thread that
// generated kernels and GEMM use, so the cores are never oversubscribed.
//
// ParallelFor may be called from any thread, including from inside a loop
// body (nested calls run inline). Thread-safe. Survives fork(): a child
// starts workers of its own on its first parallel loop.
//
// In a process with PyTorch, the loops run on torch's intra-op threads
// instead (RunOn, client/python/module.cc): one set of threads serves eager
// ops and Kiln's kernels, so neither spins on a core the other needs where
// a partitioned graph hands work back and forth, and torch.set_num_threads
// governs both.
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

  int threads() const {
    const Loops* loops = loops_.load(std::memory_order_acquire);
    return loops != nullptr ? loops->threads() : threads_;
  }

  // Not owning and never allocating (std::function would, for most
  // lambdas): ParallelFor returns only when every chunk is done.
  using Body = absl::FunctionRef<void(int64_t, int64_t)>;

  // Another pool's parallel loop, with ParallelFor's contract, and its
  // current thread count (the calling thread included).
  struct Loops {
    int (*threads)();
    void (*parallel_for)(int64_t n, int64_t grain, Body body);
  };
  // Runs every later loop on `loops` (not owned; it must outlive the pool)
  // and starts no thread of its own; nullptr returns to this pool's threads.
  void RunOn(const Loops* loops) { loops_.store(loops, std::memory_order_release); }

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
  std::atomic<const Loops*> loops_{nullptr};
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(call_mutex_);
};

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_THREAD_POOL_H_
