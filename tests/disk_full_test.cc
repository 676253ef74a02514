// kilnd on a full disk: hits keep working, a miss is ResourceExhausted
// naming the directory, and compiles work again once there is room.
#include <sys/stat.h>

#include "client/client.h"
#include "common/files.h"
#include "common/testing/tiny_filesystem.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/graph_file.h"
#include "tests/daemon_fixture.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

kiln::v1::CompileRequest Request(const std::string& salt) {
  auto graph = ReadGraphFile("examples/tail.json");
  EXPECT_TRUE(graph.ok());
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = *graph;
  request.mutable_options()->set_salt(salt);
  return request;
}

TEST(DiskFullTest, HitsKeepWorkingAndMissesSayNoSpaceLeft) {
  DaemonFixture daemon;
  ASSERT_TRUE(MakeDirectories(daemon.cache_dir(), 0700).ok());
  auto disk = TinyFilesystem::Mount(daemon.cache_dir(), 16 << 20);
  if (!disk.ok()) GTEST_SKIP() << "cannot mount a small file system: " << disk.status();
  ASSERT_TRUE(daemon.Start().ok());
  auto client = daemon.Connect();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Compile(Request("before")).ok());

  ASSERT_TRUE((*disk)->FillLeaving(0).ok());
  auto hit = (*client)->Compile(Request("before"));
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_TRUE(hit->cache_hit());
  auto miss = (*client)->Compile(Request("while full"));
  EXPECT_EQ(miss.status().code(), absl::StatusCode::kResourceExhausted) << miss.status();
  EXPECT_THAT(miss.status().message(),
              HasSubstr("no space left on device in " + daemon.cache_dir()));
  // Not remembered as the graph's failure: with room again, it compiles.
  ASSERT_TRUE((*disk)->Empty().ok());
  auto after = (*client)->Compile(Request("while full"));
  EXPECT_TRUE(after.ok()) << after.status();
  auto stats = (*client)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->remembered_failures(), 0);
}

}  // namespace
}  // namespace kiln
