// A bounded pool of compile threads with single-flight by cache key: N
// identical concurrent misses run the pipeline once and all get its result.
//
// Callbacks run on a pool thread (a gRPC reactor must not block), except
// the Unavailable of a refused job, which runs on the caller of Submit or
// Shutdown; they must not block either. Thread-safe.
#ifndef KILN_DAEMON_COMPILE_QUEUE_H_
#define KILN_DAEMON_COMPILE_QUEUE_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/service.pb.h"

namespace kiln {

class CompileQueue {
 public:
  using Result = absl::StatusOr<kiln::v1::CompileResponse>;
  using Work = std::function<Result()>;
  using Callback = std::function<void(Result)>;

  explicit CompileQueue(int threads);
  // Shuts down, finishes running work, then joins the threads.
  ~CompileQueue();

  // Runs `work` for `key` unless a job for `key` is already queued or
  // running; either way `done` gets the job's result. Returns true when this
  // call joined a job already in flight (it was coalesced).
  // After Shutdown, `done` gets Unavailable at once.
  bool Submit(const std::string& key, Work work, Callback done);

  // Stops accepting work; jobs not yet started get Unavailable (running
  // ones finish). Idempotent.
  void Shutdown();

 private:
  struct Job {
    Work work;
    std::vector<Callback> waiters;
  };
  void RunLoop();

  absl::Mutex mutex_;
  bool shutting_down_ ABSL_GUARDED_BY(mutex_) = false;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, Job> jobs_ ABSL_GUARDED_BY(mutex_);  // queued or running
  std::vector<std::thread> threads_;
};

}  // namespace kiln

#endif  // KILN_DAEMON_COMPILE_QUEUE_H_
