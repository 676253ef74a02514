#include "daemon/compile_queue.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(CompileQueueTest, ShutdownRefusesQueuedJobsAndFinishesRunningOnes) {
  absl::Notification started, release;
  std::atomic<int> finished{0}, refused{0};
  CompileQueue queue(1);
  queue.Submit(
      "running",
      [&]() -> CompileQueue::Result {
        started.Notify();
        release.WaitForNotification();
        return kiln::v1::CompileResponse();
      },
      [&](CompileQueue::Result result) { finished += result.ok(); });
  started.WaitForNotification();
  queue.Submit(
      "queued", [] { return CompileQueue::Result(kiln::v1::CompileResponse()); },
      [&](CompileQueue::Result result) {
        refused += result.status().code() == absl::StatusCode::kUnavailable;
      });
  queue.Shutdown();
  EXPECT_EQ(refused, 1);
  release.Notify();
  while (finished == 0) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(finished, 1);
}

TEST(CompileQueueTest, IdenticalConcurrentKeysRunOnce) {
  std::atomic<int> runs{0}, answers{0};
  absl::Notification release;
  {
    CompileQueue queue(2);
    auto work = [&]() -> CompileQueue::Result {
      ++runs;
      release.WaitForNotification();
      kiln::v1::CompileResponse response;
      response.set_object_path("/x.so");
      return response;
    };
    auto done = [&](CompileQueue::Result result) {
      ASSERT_TRUE(result.ok());
      EXPECT_EQ(result->object_path(), "/x.so");
      ++answers;
    };
    EXPECT_FALSE(queue.Submit("k", work, done));
    int joined = 0;
    for (int i = 0; i < 7; ++i) joined += queue.Submit("k", work, done);
    EXPECT_EQ(joined, 7);
    EXPECT_FALSE(queue.Submit("other", work, done));
    release.Notify();
    while (answers < 9) absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(answers, 9);
}

TEST(CompileQueueTest, ErrorsReachEveryWaiterAndShutdownRefusesNewWork) {
  CompileQueue queue(1);
  absl::Notification finished;
  queue.Submit(
      "k", [] { return CompileQueue::Result(absl::InternalError("boom")); },
      [&](CompileQueue::Result result) {
        EXPECT_EQ(result.status(), absl::InternalError("boom"));
        finished.Notify();
      });
  finished.WaitForNotification();
  queue.Shutdown();
  bool refused = false;
  queue.Submit(
      "k2", [] { return CompileQueue::Result(kiln::v1::CompileResponse()); },
      [&](CompileQueue::Result result) {
        refused = result.status().code() == absl::StatusCode::kUnavailable;
      });
  EXPECT_TRUE(refused);
}

// Records the order in which jobs start; each job can be held until released.
class JobLog {
 public:
  CompileQueue::Work Job(const std::string& name, absl::Notification* release = nullptr) {
    return [this, name, release]() -> CompileQueue::Result {
      {
        absl::MutexLock lock(&mutex_);
        started_.push_back(name);
        ++started_count_;
      }
      if (release != nullptr) release->WaitForNotification();
      return kiln::v1::CompileResponse();
    };
  }
  CompileQueue::Callback Done() {
    return [this](CompileQueue::Result) {
      absl::MutexLock lock(&mutex_);
      ++finished_;
    };
  }
  // Block until at least `count` jobs have started or finished.
  void AwaitStarted(int count) { Await(&started_count_, count); }
  void AwaitFinished(int count) { Await(&finished_, count); }
  std::string started() {
    absl::MutexLock lock(&mutex_);
    return absl::StrJoin(started_, " ");
  }

 private:
  struct AtLeast {
    const int* counter;
    int count;
    bool Reached() const { return *counter >= count; }
  };
  void Await(const int* counter, int count) {
    absl::MutexLock lock(&mutex_);
    const AtLeast at_least{counter, count};
    mutex_.Await(absl::Condition(&at_least, &AtLeast::Reached));
  }

  absl::Mutex mutex_;
  std::vector<std::string> started_ ABSL_GUARDED_BY(mutex_);
  int started_count_ ABSL_GUARDED_BY(mutex_) = 0;
  int finished_ ABSL_GUARDED_BY(mutex_) = 0;
};

constexpr int64_t kSmall = 8;
constexpr int64_t kLarge = 500;

CompileQueue::Options TestOptions(int threads) {
  CompileQueue::Options options;
  options.threads = threads;
  options.small_job_cost = 64;
  return options;
}

// The case: two slow compiles held every thread and a 20 ms miss
// waited for them. The small job must finish while both are still held.
TEST(CompileQueueTest, SmallJobRunsWhileTwoLargeJobsHoldThePool) {
  for (int threads : {2, 3}) {
    SCOPED_TRACE(threads);
    JobLog log;
    absl::Notification release_large;
    CompileQueue queue(TestOptions(threads));
    queue.Submit("large1", log.Job("large1", &release_large), log.Done(), {kLarge});
    log.AwaitStarted(1);  // so that the log's order is known
    queue.Submit("large2", log.Job("large2", &release_large), log.Done(), {kLarge});
    // With 3 threads both large jobs run; with 2, the second waits so
    // that one thread stays free for small ones.
    log.AwaitStarted(threads - 1);
    absl::Notification small_done;
    queue.Submit("small", log.Job("small"), [&](CompileQueue::Result) { small_done.Notify(); },
                 {kSmall});
    small_done.WaitForNotification();  // hangs (test timeout) if small is stuck
    EXPECT_EQ(log.started(), threads == 2 ? "large1 small" : "large1 large2 small");
    release_large.Notify();
    log.AwaitFinished(2);
    EXPECT_EQ(queue.busy(), 0);
  }
}

TEST(CompileQueueTest, BackgroundJobsLeaveAThreadForInteractiveOnes) {
  JobLog log;
  absl::Notification release_warmup;
  CompileQueue queue(TestOptions(2));
  const CompileQueue::JobOptions background = {kSmall, CompileQueue::kBackground};
  queue.Submit("warm1", log.Job("warm1", &release_warmup), log.Done(), background);
  queue.Submit("warm2", log.Job("warm2", &release_warmup), log.Done(), background);
  log.AwaitStarted(1);
  absl::Notification miss_done;
  queue.Submit("miss", log.Job("miss"), [&](CompileQueue::Result) { miss_done.Notify(); });
  miss_done.WaitForNotification();
  EXPECT_EQ(log.started(), "warm1 miss");
  release_warmup.Notify();
  log.AwaitFinished(2);
  EXPECT_EQ(log.started(), "warm1 miss warm2");
}

// One thread cannot keep a lane free; the order favours interactive, then
// small, then older work.
TEST(CompileQueueTest, OneThreadRunsInteractiveThenSmallThenOlderFirst) {
  JobLog log;
  absl::Notification release;
  CompileQueue queue(TestOptions(1));
  queue.Submit("blocker", log.Job("blocker", &release), log.Done());
  log.AwaitStarted(1);
  queue.Submit("warm", log.Job("warm"), log.Done(), {kSmall, CompileQueue::kBackground});
  queue.Submit("large1", log.Job("large1"), log.Done(), {kLarge});
  queue.Submit("large2", log.Job("large2"), log.Done(), {kLarge});
  queue.Submit("small", log.Job("small"), log.Done(), {kSmall});
  EXPECT_EQ(queue.busy(), 5);
  release.Notify();
  log.AwaitFinished(5);
  EXPECT_EQ(log.started(), "blocker small large1 large2 warm");
  EXPECT_EQ(queue.busy(), 0);
}

TEST(CompileQueueTest, AMissJoiningAQueuedWarmupLiftsIt) {
  JobLog log;
  absl::Notification release;
  CompileQueue queue(TestOptions(1));
  queue.Submit("blocker", log.Job("blocker", &release), log.Done());
  log.AwaitStarted(1);
  const CompileQueue::JobOptions background = {kSmall, CompileQueue::kBackground};
  queue.Submit("warm1", log.Job("warm1"), log.Done(), background);
  queue.Submit("warm2", log.Job("warm2"), log.Done(), background);
  EXPECT_TRUE(queue.Submit("warm2", log.Job("unused"), log.Done(), {kSmall}));
  EXPECT_EQ(queue.busy(), 3) << "the joined request counts once";
  release.Notify();
  log.AwaitFinished(4);
  EXPECT_EQ(log.started(), "blocker warm2 warm1");
}

// A job waiting between steps (a fleet job on another machine's lease)
// holds no thread: with one thread, other work runs meanwhile, and
// requests for its key join it.
TEST(CompileQueueTest, AJobWaitingBetweenStepsHoldsNoThread) {
  CompileQueue queue(1);
  std::atomic<bool> ready{false};
  std::atomic<int> steps{0};
  absl::Mutex mutex;
  std::vector<std::string> answers;
  auto answer = [&](CompileQueue::Result result) {
    absl::MutexLock lock(&mutex);
    answers.push_back(result.ok() ? result->object_path() : result.status().ToString());
  };
  auto step = [&]() -> std::variant<CompileQueue::Result, absl::Duration> {
    ++steps;
    if (!ready) return absl::Milliseconds(10);
    kiln::v1::CompileResponse response;
    response.set_object_path("/waited.so");
    return response;
  };
  EXPECT_FALSE(queue.SubmitSteps("waiting", step, answer, {}));
  while (steps < 2) absl::SleepFor(absl::Milliseconds(1));

  absl::Notification other_done;
  queue.Submit(
      "other",
      [] {
        kiln::v1::CompileResponse response;
        response.set_object_path("/other.so");
        return CompileQueue::Result(response);
      },
      [&](CompileQueue::Result result) {
        answer(std::move(result));
        other_done.Notify();
      });
  other_done.WaitForNotification();  // hangs (test timeout) if the waiting job holds the thread
  EXPECT_TRUE(queue.SubmitSteps("waiting", step, answer, {})) << "joins the waiting job";
  EXPECT_EQ(queue.busy(), 1);
  ready = true;
  while (queue.busy() > 0) absl::SleepFor(absl::Milliseconds(1));
  absl::MutexLock lock(&mutex);
  EXPECT_EQ(absl::StrJoin(answers, " "), "/other.so /waited.so /waited.so");
}

TEST(CompileQueueTest, ShutdownRefusesAJobWaitingBetweenSteps) {
  CompileQueue queue(1);
  std::atomic<int> steps{0};
  absl::Notification refused;
  queue.SubmitSteps(
      "waiting",
      [&]() -> std::variant<CompileQueue::Result, absl::Duration> {
        ++steps;
        return absl::Milliseconds(10);
      },
      [&](CompileQueue::Result result) {
        EXPECT_EQ(result.status(), absl::UnavailableError("kilnd is shutting down"));
        refused.Notify();
      },
      {});
  while (steps < 2) absl::SleepFor(absl::Milliseconds(1));
  queue.Shutdown();
  refused.WaitForNotification();
  EXPECT_EQ(queue.busy(), 0);
}

}  // namespace
}  // namespace kiln
