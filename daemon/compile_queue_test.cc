#include "daemon/compile_queue.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(CompileQueueTest, ShutdownRefusesQueuedJobsAndFinishesRunningOnes) {
  absl::Notification started, release;
  std::atomic<int> finished{0}, refused{0};
  CompileQueue queue(1);
  queue.Submit("running", [&]() -> CompileQueue::Result {
    started.Notify();
    release.WaitForNotification();
    return kiln::v1::CompileResponse();
  }, [&](CompileQueue::Result result) { finished += result.ok(); });
  started.WaitForNotification();
  queue.Submit("queued", [] { return CompileQueue::Result(kiln::v1::CompileResponse()); },
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
  queue.Submit("k", [] { return CompileQueue::Result(absl::InternalError("boom")); },
               [&](CompileQueue::Result result) {
                 EXPECT_EQ(result.status(), absl::InternalError("boom"));
                 finished.Notify();
               });
  finished.WaitForNotification();
  queue.Shutdown();
  bool refused = false;
  queue.Submit("k2", [] { return CompileQueue::Result(kiln::v1::CompileResponse()); },
               [&](CompileQueue::Result result) {
                 refused = result.status().code() == absl::StatusCode::kUnavailable;
               });
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace kiln
