// `kiln warmup` through a real kilnd: a plan warmed, then re-run as all
// hits; a warmed bucket is a local hit for a serving process; failures are
// listed with their reasons; progress on a terminal and the JSON summary.
#include <google/protobuf/util/json_util.h>

#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/compiled_graph.h"
#include "client/warmup_plan.h"
#include "codegen/retype.h"
#include "common/files.h"
#include "common/graph_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon_fixture.h"
#include "tools/kiln/warmup.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

// Static buckets s0 = 1, 2, 4, 8, and 16 and 32 served by the symbolic
// artifact: five compiles for six buckets.
constexpr char kPlan[] = R"({"graphs": [
    {"graph": "tail.json", "symbols": [{"symbol": "s0", "powersOfTwo": {"from": 1, "to": 8}}]},
    {"graph": "tail.json", "serve": "SERVE_SYMBOLIC",
     "symbols": [{"symbol": "s0", "sizes": ["16", "32"]}]}]})";

class WarmupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(daemon_.Start().ok());
    auto client = daemon_.Connect();
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    auto json = ReadFile("examples/tail_dynamic.json");
    ASSERT_TRUE(json.ok());
    ASSERT_TRUE(WriteFileAtomically(daemon_.root() + "/tail.json", *json, 0644).ok());
    plan_ = daemon_.root() + "/plan.json";
    ASSERT_TRUE(WriteFileAtomically(plan_, kPlan, 0644).ok());
  }

  absl::Status Warm(std::string& out, std::string& progress, bool terminal = false) {
    WarmupOptions options;
    options.jobs = 3;
    options.json = true;
    options.terminal = terminal;
    std::ostringstream out_stream, progress_stream;
    const absl::Status status = RunWarmup(plan_, *client_, options, out_stream, progress_stream);
    out = out_stream.str();
    progress = progress_stream.str();
    return status;
  }

  DaemonFixture daemon_;
  std::unique_ptr<Client> client_;
  std::string plan_;
};

TEST_F(WarmupTest, APlanWarmsOnceThenIsAllHits) {
  std::string out, progress;
  ASSERT_TRUE(Warm(out, progress, /*terminal=*/true).ok()) << out;
  EXPECT_THAT(out, HasSubstr("\"buckets\": 6, \"compiles\": 5, \"hits\": 0, \"compiled\": 5, "
                             "\"failed\": 0, \"cancelled\": 0"));
  EXPECT_THAT(progress, HasSubstr("[########################] warmup 5/5: 0 hits, 5 compiled"));
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->compiles(), 5);

  ASSERT_TRUE(Warm(out, progress).ok()) << out;
  EXPECT_THAT(out, HasSubstr("\"compiles\": 5, \"hits\": 5, \"compiled\": 0, \"failed\": 0"));
  stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->compiles(), 5) << "the re-run compiled nothing";
  EXPECT_EQ(stats->hits(), 5);
}

TEST_F(WarmupTest, AWarmedBucketIsALocalHitForAServingProcess) {
  std::string out, progress;
  ASSERT_TRUE(Warm(out, progress).ok()) << out;
  auto graph = ReadGraphFile("examples/tail_dynamic.json");
  ASSERT_TRUE(graph.ok());
  // A fresh serving process (its own lazy client, no daemon connection)
  // asking for bucket s0 = 4 as a static graph, and for the symbolic one.
  ClientOptions options;
  options.socket_path = daemon_.root() + "/no-kilnd.sock";
  options.cache_dir = daemon_.cache_dir();
  options.auto_start = false;
  std::unique_ptr<Client> serving = Client::Open(options);
  for (const kiln::v1::Graph& wanted : {Specialize(*graph, {{"s0", 4}}), *graph}) {
    CompiledGraph compiled(serving.get(), wanted);
    auto prepared = compiled.Prepare();
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    EXPECT_TRUE(prepared->local) << "found in the local index, with no kilnd to ask";
  }
}

TEST_F(WarmupTest, FailuresAreListedWithTheirReasons) {
  auto graph = ReadGraphFile("examples/tail_dynamic.json");
  ASSERT_TRUE(graph.ok());
  graph->mutable_nodes(0)->set_op("aten.no_such_op.default");
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(*graph, &json).ok());
  ASSERT_TRUE(WriteFileAtomically(daemon_.root() + "/broken.json", json, 0644).ok());
  ASSERT_TRUE(WriteFileAtomically(plan_, R"({"graphs": [
      {"graph": "tail.json", "symbols": [{"symbol": "s0", "sizes": ["2"]}]},
      {"graph": "broken.json", "symbols": [{"symbol": "s0", "sizes": ["2"]}]}]})",
                                  0644)
                  .ok());
  std::string out, progress;
  const absl::Status status = Warm(out, progress);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(status.message(), HasSubstr("1 of 2 compiles failed:\n  graphs[1] broken.json s0=2: "));
  EXPECT_THAT(status.message(), HasSubstr("aten.no_such_op.default"));
  EXPECT_THAT(out, HasSubstr("\"compiled\": 1, \"failed\": 1"));
}

TEST_F(WarmupTest, TheCommandLineSaysWhatItDid) {
  auto cli = daemon_.RunTool({kKilnCliPath, "warmup", plan_, "--start=false"});
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_EQ(cli->exit_code, 0) << cli->output;
  EXPECT_THAT(cli->output,
              HasSubstr("warmed 6 buckets with 5 compiles: 0 hits, 5 compiled, 0 failed in "));
  cli = daemon_.RunTool({kKilnCliPath, "warmup", daemon_.root() + "/missing.json", "--start=false"});
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_EQ(cli->exit_code, 1);
  EXPECT_THAT(cli->output, HasSubstr("kiln warmup: cannot open " + daemon_.root() + "/missing.json"));
}

}  // namespace
}  // namespace kiln
