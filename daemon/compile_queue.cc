#include "daemon/compile_queue.h"

#include <algorithm>
#include <tuple>

namespace kiln {

CompileQueue::CompileQueue(int threads) : CompileQueue(Options{threads}) {}

CompileQueue::CompileQueue(Options options)
    : options_(options), heavy_thread_limit_(std::max(1, options.threads - 1)) {
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { RunLoop(); });
}

CompileQueue::~CompileQueue() {
  Shutdown();
  for (std::thread& thread : threads_) thread.join();
}

void CompileQueue::Shutdown() {
  // Jobs not yet started are refused now, so that shutdown waits only for
  // the compiles already running.
  std::vector<Callback> refused;
  {
    absl::MutexLock lock(&mutex_);
    shutting_down_ = true;
    for (const std::string& key : queue_) {
      for (Callback& waiter : jobs_[key].waiters) refused.push_back(std::move(waiter));
      jobs_.erase(key);
    }
    queue_.clear();
  }
  for (Callback& waiter : refused) waiter(absl::UnavailableError("kilnd is shutting down"));
}

bool CompileQueue::Submit(const std::string& key, Work work, Callback done) {
  return Submit(key, std::move(work), std::move(done), JobOptions());
}

bool CompileQueue::Submit(const std::string& key, Work work, Callback done, JobOptions options) {
  return SubmitSteps(
      key, [work = std::move(work)]() -> std::variant<Result, absl::Duration> { return work(); },
      std::move(done), options);
}

bool CompileQueue::SubmitSteps(const std::string& key, Step step, Callback done,
                               JobOptions options) {
  {
    absl::MutexLock lock(&mutex_);
    if (!shutting_down_) {
      auto [it, inserted] = jobs_.try_emplace(key);
      Job& job = it->second;
      job.waiters.push_back(std::move(done));
      if (!inserted) {
        // An interactive miss must not wait behind the warmup it joined.
        if (!job.running) job.options.priority = std::max(job.options.priority, options.priority);
        return true;
      }
      job.step = std::move(step);
      job.options = options;
      job.sequence = next_sequence_++;
      queue_.push_back(key);
      return false;
    }
  }
  done(absl::UnavailableError("kilnd is shutting down"));
  return false;
}

int CompileQueue::busy() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int>(jobs_.size());
}

int CompileQueue::queued() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int>(queue_.size());
}

bool CompileQueue::IsHeavy(const Job& job) const {
  return job.options.cost > options_.small_job_cost || job.options.priority < kInteractive;
}

bool CompileQueue::IsRunnable(const Job& job) const {
  return job.next_step <= absl::Now() && (!IsHeavy(job) || heavy_running_ < heavy_thread_limit_);
}

bool CompileQueue::RunsBefore(const Job& a, const Job& b) const {
  // Higher priority, then light before heavy, then older.
  return std::make_tuple(-a.options.priority, IsHeavy(a), a.sequence) <
         std::make_tuple(-b.options.priority, IsHeavy(b), b.sequence);
}

int CompileQueue::NextJobIndex() const {
  // A linear scan: the queue holds tens of jobs, each worth milliseconds of
  // compiling, and priorities change in place when a request joins a job.
  int best = -1;
  for (int i = 0; i < static_cast<int>(queue_.size()); ++i) {
    const Job& job = jobs_.at(queue_[i]);
    if (!IsRunnable(job)) continue;
    if (best < 0 || RunsBefore(job, jobs_.at(queue_[best]))) best = i;
  }
  return best;
}

bool CompileQueue::HasRunnableJobOrStopping() const {
  return shutting_down_ || NextJobIndex() >= 0;
}

absl::Time CompileQueue::NextStepTime() const {
  const absl::Time now = absl::Now();
  absl::Time next = absl::InfiniteFuture();
  for (const std::string& key : queue_) {
    const absl::Time step = jobs_.at(key).next_step;
    if (step > now) next = std::min(next, step);
  }
  return next;
}

void CompileQueue::RunLoop() {
  while (true) {
    std::string key;
    Step step;
    bool heavy = false;
    {
      absl::MutexLock lock(&mutex_);
      while (!HasRunnableJobOrStopping()) {
        // Until a job is due, or another thread defers one (due sooner, maybe).
        const uint64_t deferred = steps_deferred_;
        auto woken = [this, deferred]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
          return steps_deferred_ != deferred || HasRunnableJobOrStopping();
        };
        mutex_.AwaitWithDeadline(absl::Condition(&woken), NextStepTime());
      }
      const int next = NextJobIndex();
      if (next < 0) return;  // shutting down (Shutdown emptied the queue)
      key = std::move(queue_[next]);
      queue_.erase(queue_.begin() + next);
      Job& job = jobs_.at(key);
      job.running = true;
      step = std::move(job.step);
      heavy = IsHeavy(job);
      if (heavy) ++heavy_running_;
    }
    std::variant<Result, absl::Duration> outcome = step();
    std::vector<Callback> waiters;
    {
      absl::MutexLock lock(&mutex_);
      if (heavy) --heavy_running_;
      Job& job = jobs_.at(key);
      if (const absl::Duration* delay = std::get_if<absl::Duration>(&outcome)) {
        if (!shutting_down_) {
          job.step = std::move(step);
          job.running = false;
          job.next_step = absl::Now() + *delay;
          queue_.push_back(key);
          ++steps_deferred_;
          continue;
        }
        outcome = Result(absl::UnavailableError("kilnd is shutting down"));
      }
      // Removing the job under the lock means a request arriving from now on
      // starts a new job, which will find the stored artifact.
      waiters = std::move(job.waiters);
      jobs_.erase(key);
    }
    const Result& result = std::get<Result>(outcome);
    for (Callback& waiter : waiters) waiter(result);
  }
}

}  // namespace kiln
