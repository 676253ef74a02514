#include "daemon/admin/admin_pool.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(AdminPoolTest, AFullQueueRefusesWorkAndDropsItWithoutRunningIt) {
  absl::Notification release;
  std::atomic<int> ran{0};
  {
    AdminPool pool({/*threads=*/1, /*max_queued=*/2});
    absl::Notification started;
    ASSERT_TRUE(pool.Submit([&] {
      started.Notify();
      release.WaitForNotification();
      ++ran;
    }));
    started.WaitForNotification();  // the one thread is busy: the rest queue
    EXPECT_TRUE(pool.Submit([&] { ++ran; }));
    EXPECT_TRUE(pool.Submit([&] { ++ran; }));
    // The refused job is destroyed, not run: what it owns is released.
    auto owned = std::make_shared<int>(0);
    std::weak_ptr<int> watch = owned;
    EXPECT_FALSE(pool.Submit([&ran, owned = std::move(owned)] { ++ran; }));
    EXPECT_TRUE(watch.expired());
    release.Notify();
  }  // the destructor runs what is queued, then joins
  EXPECT_EQ(ran, 3);
}

}  // namespace
}  // namespace kiln
