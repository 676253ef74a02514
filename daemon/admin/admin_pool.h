// The threads kilnd's admin calls (import, export, verify, gc, prune,
// listings) run on, apart from gRPC's callback threads and the compile
// pool: however long an import takes, a compile or a hit is answered.
//
// A fixed number of threads and a bounded queue: Submit refuses work past
// it rather than let admin calls pile up. Queued work runs even after
// Shutdown (each job finishes an RPC), then the threads exit. Thread-safe.
#ifndef KILN_DAEMON_ADMIN_ADMIN_POOL_H_
#define KILN_DAEMON_ADMIN_ADMIN_POOL_H_

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace kiln {

class AdminPool {
 public:
  struct Options {
    int threads = 1;
    // Jobs that may wait for a thread; Submit refuses more.
    int max_queued = 16;
  };
  explicit AdminPool(Options options);
  // Runs the queued jobs, then joins the threads.
  ~AdminPool();
  AdminPool(const AdminPool&) = delete;
  AdminPool& operator=(const AdminPool&) = delete;

  // Queues `job` for a pool thread; false (and `job` is dropped, not run)
  // when max_queued jobs are already waiting.
  bool Submit(absl::AnyInvocable<void() &&> job);

  const Options& options() const { return options_; }

 private:
  void RunLoop();

  const Options options_;
  absl::Mutex mutex_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::thread> threads_;  // last: they use the members above
};

}  // namespace kiln

#endif  // KILN_DAEMON_ADMIN_ADMIN_POOL_H_
