// A bounded pool of compile threads with single-flight by cache key: N
// identical concurrent misses run the pipeline once and all get its result.
//
// Scheduling. A job carries an estimated cost (the graph's node count) and
// a priority. A job is "light" when its cost is at most
// Options::small_job_cost and its priority is at least kInteractive; every
// other job is "heavy". With two or more threads, heavy jobs may occupy at
// most threads - 1 of them, so one thread is always left for light jobs: a
// 20 ms miss never waits behind two multi-second compiles, and a warmup
// (low priority) never takes the last thread from an interactive miss. A
// free thread takes the runnable queued job with the highest priority, then
// the light before the heavy, then the oldest. With one thread nothing can
// be reserved; the order alone favours interactive and small work. A
// request that joins a queued job lifts the job to its own priority.
//
// A job may also be a sequence of steps (SubmitSteps): one that waits on
// something outside kilnd (another machine's compile, daemon/artifact_cache.h)
// runs a short step, says when to run the next, and holds no thread in
// between; requests for its key join it meanwhile, as any job.
//
// Callbacks run on a pool thread (a gRPC reactor must not block), except
// the Unavailable of a refused job, which runs on the caller of Submit or
// Shutdown; they must not block either. Thread-safe.
#ifndef KILN_DAEMON_COMPILE_QUEUE_H_
#define KILN_DAEMON_COMPILE_QUEUE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/service.pb.h"

namespace kiln {

class CompileQueue {
 public:
  using Result = absl::StatusOr<kiln::v1::CompileResponse>;
  using Work = std::function<Result()>;
  using Callback = std::function<void(Result)>;
  // A step's outcome: the job's result, or how long to wait before the
  // job's next step.
  using Step = std::function<std::variant<Result, absl::Duration>()>;

  // Priorities: higher runs first. A request someone is waiting on is
  // kInteractive; ahead-of-time work (warmup) should pass kBackground.
  static constexpr int kInteractive = 0;
  static constexpr int kBackground = -1;

  struct Options {
    int threads = 1;
    // Jobs costing at most this (graph nodes) may use the thread kept for
    // light work. A few dozen nodes compile in tens of milliseconds.
    int64_t small_job_cost = 64;
  };

  // Per request; the defaults make a job light and interactive, so callers
  // that pass nothing get first-come, first-served on every thread.
  struct JobOptions {
    int64_t cost = 0;  // estimate of the compile's size: the graph's node count
    int priority = kInteractive;
  };

  explicit CompileQueue(int threads);
  explicit CompileQueue(Options options);
  // Shuts down, finishes running work, then joins the threads.
  ~CompileQueue();

  // Runs `work` for `key` unless a job for `key` is already queued or
  // running; either way `done` gets the job's result. Returns true when this
  // call joined a job already in flight (it was coalesced); a joined job
  // that is still queued takes the higher of the two priorities.
  // After Shutdown, `done` gets Unavailable at once.
  bool Submit(const std::string& key, Work work, Callback done, JobOptions options);
  bool Submit(const std::string& key, Work work, Callback done);  // default JobOptions
  // The same for a job of steps: `step` runs again, on any pool thread and
  // never two at once, each time it returns a delay, once the delay has
  // passed; queued behind the jobs that were runnable first.
  bool SubmitSteps(const std::string& key, Step step, Callback done, JobOptions options);

  // Stops accepting work; jobs not yet started get Unavailable (running
  // ones finish). Idempotent.
  void Shutdown();

  // Jobs queued or running (coalesced requests count once). Zero means the
  // daemon is idle.
  int busy() const;
  // Jobs waiting for a thread (not running; coalesced requests count once).
  int queued() const;

 private:
  struct Job {
    Step step;
    std::vector<Callback> waiters;
    JobOptions options;
    uint64_t sequence = 0;  // submission order, for first-come, first-served
    bool running = false;
    absl::Time next_step = absl::InfinitePast();  // not runnable before
  };

  bool IsHeavy(const Job& job) const;
  bool IsRunnable(const Job& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether `a` should start before `b`.
  bool RunsBefore(const Job& a, const Job& b) const;
  // The index in queue_ of the job to start next, or -1 when none may.
  int NextJobIndex() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool HasRunnableJobOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // When the first queued job now waiting between steps may run again
  // (InfiniteFuture: none is).
  absl::Time NextStepTime() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void RunLoop();

  const Options options_;
  // Threads heavy jobs may occupy at once: all but one, when there are two
  // or more.
  const int heavy_thread_limit_;

  mutable absl::Mutex mutex_;
  bool shutting_down_ ABSL_GUARDED_BY(mutex_) = false;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t steps_deferred_ ABSL_GUARDED_BY(mutex_) = 0;  // wakes threads to see a new NextStepTime
  int heavy_running_ ABSL_GUARDED_BY(mutex_) = 0;
  // Keys of queued jobs, in no particular order (NextJobIndex picks).
  std::vector<std::string> queue_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, Job> jobs_ ABSL_GUARDED_BY(mutex_);  // queued or running
  std::vector<std::thread> threads_;  // last: they use the members above
};

}  // namespace kiln

#endif  // KILN_DAEMON_COMPILE_QUEUE_H_
