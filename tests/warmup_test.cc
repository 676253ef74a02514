// `kiln warmup` through a real kilnd: a plan warmed, then re-run as all
// hits; a warmed bucket is a local hit for a serving process; failures are
// listed with their reasons; progress on a terminal and the JSON summary.
#include "tools/kiln/warmup.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "client/client.h"
#include "client/compiled_graph.h"
#include "client/runtime/fastest_of.h"
#include "client/tensor.h"
#include "client/traffic.h"
#include "client/warmup_plan.h"
#include "codegen/retype.h"
#include "common/files.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/graph_file.h"
#include "tests/daemon_fixture.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

// relu(x + 1) normalized by its row sum: what tail computes, in double.
void ExpectTailOf(const Tensor& x, const Tensor& out) {
  const int64_t rows = x.sizes()[0];
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{rows, 64}));
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int c = 0; c < 64; ++c) sum += std::max(0.0f, x.data<float>()[r * 64 + c] + 1);
    for (int c = 0; c < 64; ++c) {
      const double want = std::max(0.0f, x.data<float>()[r * 64 + c] + 1) / sum;
      ASSERT_NEAR(out.data<float>()[r * 64 + c], want, 1e-6) << "row " << r << " column " << c;
    }
  }
}

Tensor TailInput(int64_t rows) {
  Tensor x(kiln::v1::FLOAT32, {rows, 64});
  for (int64_t i = 0; i < rows * 64; ++i) x.data<float>()[i] = static_cast<float>(i % 7) - 2.5f;
  return x;
}

// Objects of the cache directory `cache_dir` this process has mapped.
int MappedObjects(const std::string& cache_dir) {
  const std::string maps = ReadFile("/proc/self/maps").value_or("");
  std::set<std::string> objects;
  for (absl::string_view line : absl::StrSplit(maps, '\n')) {
    const size_t at = line.find(cache_dir + "/objects/");
    if (at != absl::string_view::npos) objects.insert(std::string(line.substr(at)));
  }
  return static_cast<int>(objects.size());
}

// Static buckets s0 = 1, 2, 4, 8, and 16 and 32 served by the symbolic
// artifact: five compiles for six buckets.
constexpr char kPlan[] = R"({"graphs": [
    {"graph": "tail.json", "symbols": [{"symbol": "s0", "powers_of_two": {"from": 1, "to": 8}}]},
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

  // A kilnd started afresh with `flags`, and the long plan below.
  void RestartWithLongPlan(const std::vector<std::string>& flags) {
    daemon_.Kill(SIGKILL);
    ASSERT_TRUE(daemon_.Start(flags).ok());
    auto client = daemon_.Connect();
    ASSERT_TRUE(client.ok());
    client_ = *std::move(client);
    ASSERT_TRUE(WriteFileAtomically(plan_, kLongPlan, 0644).ok());
  }

  // Until kilnd has started `count` compiles.
  void WaitForCompiles(Client& client, int64_t count) {
    while (true) {
      auto stats = client.Stats();
      ASSERT_TRUE(stats.ok()) << stats.status();
      if (stats->compiles() >= count) return;
      absl::SleepFor(absl::Milliseconds(1));
    }
  }

  // Sixteen static buckets of a graph whose compiles take a while each.
  static constexpr char kLongPlan[] = R"({"graphs": [{"graph": "tail.json",
      "symbols": [{"symbol": "s0", "multiples": {"of": 3, "up_to": 48}}]}]})";

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

TEST_F(WarmupTest, AServingProcessWarmsItsBucketsAndRunsExactOnesBeforeTheSymbolic) {
  std::string out, progress;
  ASSERT_TRUE(Warm(out, progress).ok()) << out;
  daemon_.Kill(SIGKILL);  // every bucket is in the local index: no kilnd needed
  auto graph = ReadGraphFile("examples/tail_dynamic.json");
  ASSERT_TRUE(graph.ok());
  ClientOptions options;
  options.socket_path = daemon_.socket_path();
  options.cache_dir = daemon_.cache_dir();
  options.auto_start = false;
  std::unique_ptr<Client> serving = Client::Open(options);
  CompiledGraph compiled(serving.get(), *graph);
  ASSERT_TRUE(compiled.Prepare().ok());  // the symbolic artifact
  auto plan = ReadWarmupPlan(plan_);
  ASSERT_TRUE(plan.ok());
  std::vector<std::string> progress_lines;
  auto warmed = compiled.Warmup(  // static s0 = 1, 2, 4, 8
      plan->graphs(0), [&](int done, int total, const std::string& name) {
        progress_lines.push_back(absl::StrCat(done, "/", total, " ", name));
      });
  ASSERT_TRUE(warmed.ok()) << warmed.status();
  EXPECT_EQ(warmed->buckets, 4);
  EXPECT_EQ(warmed->runs, 4) << "no GEMM, nothing to time: each bucket runs once";
  EXPECT_EQ(warmed->entries, 4);
  EXPECT_EQ(warmed->local, 4);
  EXPECT_THAT(progress_lines,
              ::testing::ElementsAre("1/4 tail_dynamic s0=1", "2/4 tail_dynamic s0=2",
                                     "3/4 tail_dynamic s0=4", "4/4 tail_dynamic s0=8"));
  warmed = compiled.Warmup(plan->graphs(1));  // s0 = 16, 32 on the symbolic artifact
  ASSERT_TRUE(warmed.ok()) << warmed.status();
  EXPECT_EQ(warmed->buckets, 2);
  EXPECT_EQ(warmed->entries, 0) << "Prepare loaded it";
  // The whole plan (both entries name this graph's file): all loaded.
  warmed = compiled.Warmup(*plan, daemon_.root());
  ASSERT_TRUE(warmed.ok()) << warmed.status();
  EXPECT_EQ(warmed->buckets, 6);
  EXPECT_EQ(warmed->entries, 0);
  CompiledGraph other(serving.get(), Specialize(*graph, {{"s0", 3}}));
  EXPECT_EQ(other.Warmup(*plan, daemon_.root()).status().code(), absl::StatusCode::kNotFound);
  // s0 = 4 has a static bucket: its own artifact runs, though the symbolic
  // one passes too; s0 = 16 and 5 run the symbolic one.
  auto key_at = [&](int64_t rows) -> std::string {
    Tensor x(kiln::v1::FLOAT32, {rows, 64});
    const TensorView inputs[] = {x.view()};
    EXPECT_TRUE(compiled.Run(inputs).ok());
    auto artifact = compiled.ArtifactFor(inputs);
    EXPECT_TRUE(artifact.ok()) << artifact.status();
    return artifact.ok() ? artifact->key() : "";
  };
  const std::string symbolic = compiled.artifact()->key();
  EXPECT_EQ(key_at(16), symbolic);
  EXPECT_EQ(key_at(5), symbolic);
  EXPECT_NE(key_at(4), symbolic);
  EXPECT_NE(key_at(4), key_at(8));
}

// x @ w at s0 = 32 and 64 rows: products of 2^21 multiply-adds and more,
// which OpenBLAS and oneDNN both run (client/runtime/gemm_ways.h).
constexpr char kProduct[] = R"({"name": "product", "inputs": [
    {"value": 0, "name": "x",
     "type": {"dtype": "FLOAT32", "sizes": [{"symbol": "s0"}, {"constant": 256}]}},
    {"value": 1, "name": "w",
     "type": {"dtype": "FLOAT32", "sizes": [{"constant": 256}, {"constant": 256}]}}],
  "nodes": [{"name": "mm", "op": "aten.mm.default", "inputs": [0, 1], "outputs": [2],
             "outputTypes": [{"dtype": "FLOAT32",
                              "sizes": [{"symbol": "s0"}, {"constant": 256}]}]}],
  "outputs": [2]})";

TEST_F(WarmupTest, ABucketRunsUntilItsGemmWaysAreChosenSoTrafficTimesNone) {
  kiln::v1::Graph graph;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(kProduct, &graph).ok());
  kiln::v1::WarmupGraph buckets;
  auto* sizes = buckets.add_symbols();
  sizes->set_symbol("s0");
  for (int64_t size : {32, 64}) sizes->add_sizes(size);
  CompiledGraph compiled(client_.get(), graph);
  auto warmed = compiled.Warmup(buckets);
  ASSERT_TRUE(warmed.ok()) << warmed.status();
  EXPECT_EQ(warmed->buckets, 2);
  EXPECT_GT(warmed->runs, 2 * (1 + FastestOf<int>::kTrials)) << "the trials ran in the warmup";
  EXPECT_LE(warmed->runs, 2 * (2 + FastestOf<int>::kMaxWays * FastestOf<int>::kTrials));

  const int64_t before = CallsBeforeAChoice();
  for (int64_t rows : {32, 64, 32, 64}) {
    Tensor x(kiln::v1::FLOAT32, {rows, 256}), w(kiln::v1::FLOAT32, {256, 256});
    for (int64_t i = 0; i < rows * 256; ++i) x.data<float>()[i] = static_cast<float>(i % 5);
    for (int64_t i = 0; i < 256 * 256; ++i) w.data<float>()[i] = i % 256 == i / 256 ? 2.0f : 0.0f;
    const TensorView inputs[] = {x.view(), w.view()};
    auto out = compiled.Run(inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].sizes(), (std::vector<int64_t>{rows, 256}));
    for (int64_t i = 0; i < rows * 256; ++i) {
      ASSERT_EQ((*out)[0].data<float>()[i], 2.0f * x.data<float>()[i]) << "element " << i;
    }
  }
  EXPECT_EQ(CallsBeforeAChoice(), before) << "a call after the warmup was a trial";
}

TEST_F(WarmupTest, TheSpecializationLimitIsAnOptionAndWarmedBucketsDoNotCount) {
  // s0 <= 64: a larger size needs a specialization of its own.
  auto graph = ReadGraphFile("examples/tail_dynamic.json");
  ASSERT_TRUE(graph.ok());
  auto* range = graph->add_relations()->mutable_range();
  range->set_symbol("s0");
  range->set_min(2);
  range->set_max(64);
  kiln::v1::WarmupGraph buckets;
  auto* sizes = buckets.add_symbols();
  sizes->set_symbol("s0");
  for (int64_t size : {2, 4, 8}) sizes->add_sizes(size);
  auto run_at = [](CompiledGraph& compiled, int64_t rows) {
    Tensor x(kiln::v1::FLOAT32, {rows, 64});
    const TensorView inputs[] = {x.view()};
    return compiled.Run(inputs).status();
  };

  CompiledGraph limited(client_.get(), *graph);
  limited.set_specialization_limit(1);
  ASSERT_TRUE(run_at(limited, 16).ok());
  const absl::Status refused = run_at(limited, 128);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("input 0 'x': dim 0 has size 128"));
  EXPECT_THAT(refused.message(),
              HasSubstr("the specialization limit (1) is reached: add these sizes as a bucket of "
                        "a warmup plan (docs/WARMUP.md) or raise the limit"));

  CompiledGraph warmed(client_.get(), *graph);
  warmed.set_specialization_limit(2);
  ASSERT_TRUE(warmed.Prepare().ok());
  auto result = warmed.Warmup(buckets);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->entries, 3);
  EXPECT_TRUE(run_at(warmed, 128).ok()) << "three warmed buckets, and room for one more";
}

TEST_F(WarmupTest, FailuresAreListedWithTheirReasons) {
  auto graph = ReadGraphFile("examples/tail_dynamic.json");
  ASSERT_TRUE(graph.ok());
  graph->mutable_nodes(0)->set_op("aten.no_such_op.default");
  ASSERT_TRUE(
      WriteFileAtomically(daemon_.root() + "/broken.json", PrintJsonMessage(*graph), 0644).ok());
  ASSERT_TRUE(WriteFileAtomically(plan_, R"({"graphs": [
      {"graph": "tail.json", "symbols": [{"symbol": "s0", "sizes": ["2"]}]},
      {"graph": "broken.json", "symbols": [{"symbol": "s0", "sizes": ["2"]}]}]})",
                                  0644)
                  .ok());
  std::string out, progress;
  const absl::Status status = Warm(out, progress);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(status.message(),
              HasSubstr("1 of 2 compiles failed:\n  graphs[1] broken.json s0=2: "));
  EXPECT_THAT(status.message(), HasSubstr("aten.no_such_op.default"));
  EXPECT_THAT(out, HasSubstr("\"compiled\": 1, \"failed\": 1"));
}

TEST_F(WarmupTest, AnInteractiveMissIsServedWhileAWarmupRuns) {
  RestartWithLongPlan({"--compile_jobs=2"});
  absl::Notification warmed;
  std::string out, progress;
  absl::Status warmup = absl::UnknownError("not run");
  std::thread thread([&] {
    warmup = Warm(out, progress);
    warmed.Notify();
  });
  // Once the warmup has compiles queued, an interactive miss: warmup jobs
  // may hold one of the two threads at most, so it runs at once.
  WaitForCompiles(*client_, 1);
  auto graph = ReadGraphFile("examples/f.json");
  ASSERT_TRUE(graph.ok());
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = *graph;
  request.mutable_options()->set_salt("interactive");
  auto miss = client_->Compile(request);
  const bool warmup_still_running = !warmed.HasBeenNotified();
  thread.join();
  ASSERT_TRUE(miss.ok()) << miss.status();
  EXPECT_FALSE(miss->cache_hit());
  EXPECT_TRUE(warmup_still_running) << "the miss waited for the whole warmup";
  EXPECT_TRUE(warmup.ok()) << warmup;
  EXPECT_THAT(out, HasSubstr("\"compiled\": 16, \"failed\": 0"));
}

TEST_F(WarmupTest, AWarmupFinishesAcrossADaemonRestart) {
  RestartWithLongPlan({"--compile_jobs=1"});
  const pid_t old_pid = daemon_.pid();
  ClientOptions options;  // as a user's CLI: starts kilnd when none answers
  options.socket_path = daemon_.socket_path();
  options.cache_dir = daemon_.cache_dir();
  options.daemon_path = kKilndPath;
  client_ = Client::Open(options);
  std::string out, progress;
  absl::Status warmup = absl::UnknownError("not run");
  std::thread thread([&] { warmup = Warm(out, progress); });
  WaitForCompiles(*client_, 1);
  kill(old_pid, SIGTERM);  // an upgrade, say: queued compiles are refused
  thread.join();
  EXPECT_EQ(daemon_.WaitForExit(), 0);
  auto hello = client_->daemon();
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_NE(hello->pid(), old_pid);
  kill(hello->pid(), SIGKILL);  // nobody's child: stopped here
  EXPECT_TRUE(warmup.ok()) << warmup;
  EXPECT_THAT(out, HasSubstr("\"failed\": 0, \"cancelled\": 0"));
}

TEST_F(WarmupTest, CtrlCStopsSendingAndKeepsWhatFinished) {
  RestartWithLongPlan({"--compile_jobs=1"});
  const std::string log = daemon_.root() + "/cli.log";
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(log_fd, 0);
  auto cli = SpawnProcess({kKilnCliPath, "warmup", plan_, "--jobs=1", "--start=false",
                           "--socket=" + daemon_.socket_path()},
                          {{log_fd, STDOUT_FILENO}, {log_fd, STDERR_FILENO}});
  close(log_fd);
  ASSERT_TRUE(cli.ok()) << cli.status();
  WaitForCompiles(*client_, 1);
  kill(*cli, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(*cli, &status, 0), *cli);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string output = ReadFile(log).value_or("");
  EXPECT_THAT(output, HasSubstr("compiles not sent"));
  EXPECT_THAT(output, HasSubstr("cancelled"));
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  const int64_t finished = stats->compiles();
  EXPECT_GE(finished, 1);
  EXPECT_LT(finished, 16) << "the interrupt came too late to cancel anything";
  // What finished stays cached: the full run compiles only the rest.
  std::string out, progress;
  ASSERT_TRUE(Warm(out, progress).ok()) << out;
  EXPECT_THAT(out,
              HasSubstr(absl::StrCat("\"hits\": ", finished, ", \"compiled\": ", 16 - finished)));
}

TEST_F(WarmupTest, TheCommandLineSaysWhatItDid) {
  auto cli = daemon_.RunTool({kKilnCliPath, "warmup", plan_, "--start=false"});
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_EQ(cli->exit_code, 0) << cli->output;
  EXPECT_THAT(cli->output,
              HasSubstr("warmed 6 buckets with 5 compiles: 0 hits, 5 compiled, 0 failed in "));
  EXPECT_EQ(cli->output.find('\r'), std::string::npos) << "no bar redrawn off a terminal";
  // On a pseudo-terminal (script(1)): the bar, redrawn in place.
  cli = daemon_.RunTool({"/usr/bin/script", "-qec",
                         absl::StrCat(kKilnCliPath, " warmup ", plan_, " --start=false"),
                         "/dev/null"});
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_EQ(cli->exit_code, 0) << cli->output;
  EXPECT_THAT(cli->output,
              HasSubstr("\r[########################] warmup 5/5: 5 hits, 0 compiled"));
  cli =
      daemon_.RunTool({kKilnCliPath, "warmup", daemon_.root() + "/missing.json", "--start=false"});
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_EQ(cli->exit_code, 1);
  EXPECT_THAT(cli->output,
              HasSubstr("kiln warmup: cannot open " + daemon_.root() + "/missing.json"));
}

TEST_F(WarmupTest, AMissTheSymbolicArtifactServesRunsItWhileTheExactOneCompiles) {
  auto graph = ReadGraphFile("examples/tail_dynamic.json");
  ASSERT_TRUE(graph.ok());
  CompiledGraph compiled(client_.get(), *graph);
  compiled.set_background_specialization(true);
  ASSERT_TRUE(compiled.Prepare().ok());
  const std::string symbolic = compiled.artifact()->key();
  // kilnd stopped: a call that waited for a compile would never return.
  ASSERT_EQ(kill(daemon_.pid(), SIGSTOP), 0);
  const Tensor x = TailInput(5);
  const TensorView inputs[] = {x.view()};
  auto out = compiled.Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTailOf(x, (*out)[0]);
  auto serving = compiled.ArtifactFor(inputs);
  ASSERT_TRUE(serving.ok());
  EXPECT_EQ(serving->key(), symbolic);
  ASSERT_EQ(kill(daemon_.pid(), SIGCONT), 0);

  // The exact specialization (the one a warmup bucket s0 = 5 gets) takes
  // over once loaded.
  CompiledGraph bucket(client_.get(), Specialize(*graph, {{"s0", 5}}));
  ASSERT_TRUE(bucket.Prepare().ok());
  const std::string exact = bucket.artifact()->key();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (compiled.ArtifactFor(inputs)->key() != exact && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(compiled.ArtifactFor(inputs)->key(), exact);
  out = compiled.Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTailOf(x, (*out)[0]);
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->compiles(), 2) << "the symbolic artifact and s0 = 5, once";
}

TEST_F(WarmupTest, ABatchBetweenBucketsRunsTheNextBucketPadded) {
  auto graph = ReadGraphFile("examples/tail_dynamic.json");
  ASSERT_TRUE(graph.ok());
  kiln::v1::WarmupGraph buckets;
  auto* sizes = buckets.add_symbols();
  sizes->set_symbol("s0");
  sizes->set_paddable(true);
  for (int64_t size : {2, 4, 8}) sizes->add_sizes(size);
  CompiledGraph compiled(client_.get(), *graph);
  auto warmed = compiled.Warmup(buckets);
  ASSERT_TRUE(warmed.ok()) << warmed.status();
  EXPECT_EQ(warmed->padded_symbols, std::vector<std::string>{"s0"});
  ASSERT_TRUE(client_->Stats().ok());
  const int64_t compiles = client_->Stats()->compiles();
  // 3 and 5 run the buckets 4 and 8, into outputs Run allocates or the
  // caller's; nothing compiles.
  for (int64_t rows : {3, 5, 7}) {
    const Tensor x = TailInput(rows);
    const TensorView inputs[] = {x.view()};
    auto out = compiled.Run(inputs);
    ASSERT_TRUE(out.ok()) << rows << ": " << out.status();
    ExpectTailOf(x, (*out)[0]);
    Tensor into(kiln::v1::FLOAT32, {rows, 64});
    const TensorView outputs[] = {into.view()};
    ASSERT_TRUE(compiled.Run(inputs, outputs).ok());
    ExpectTailOf(x, into);
    Tensor wrong(kiln::v1::FLOAT32, {8, 64});
    const TensorView wrong_outputs[] = {wrong.view()};
    EXPECT_EQ(compiled.Run(inputs, wrong_outputs).code(), absl::StatusCode::kInvalidArgument);
    // The right sizes, transposed in memory: refused, not written past.
    Tensor storage(kiln::v1::FLOAT32, {64, rows});
    const int64_t sizes[] = {rows, 64}, strides[] = {1, rows};
    const TensorView transposed[] = {
        TensorView{storage.view().data, kiln::v1::FLOAT32, sizes, strides}};
    EXPECT_EQ(compiled.Run(inputs, transposed).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(client_->Stats()->compiles(), compiles);
  // Past the largest bucket: no padding, the graph's own specialization.
  const Tensor x = TailInput(9);
  const TensorView inputs[] = {x.view()};
  auto out = compiled.Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTailOf(x, (*out)[0]);
  EXPECT_EQ(client_->Stats()->compiles(), compiles + 1);
}

TEST_F(WarmupTest, IdleEntriesAreUnloadedAndLoadAgain) {
  auto graph = ReadGraphFile("examples/tail_dynamic.json");
  ASSERT_TRUE(graph.ok());
  kiln::v1::WarmupGraph buckets;
  auto* sizes = buckets.add_symbols();
  sizes->set_symbol("s0");
  for (int64_t size : {2, 4, 8}) sizes->add_sizes(size);
  const int mapped_before = MappedObjects(daemon_.cache_dir());
  {
    CompiledGraph compiled(client_.get(), *graph);
    ASSERT_TRUE(compiled.Warmup(buckets).ok());
    ASSERT_EQ(compiled.open_entries(), 3);
    EXPECT_EQ(MappedObjects(daemon_.cache_dir()), mapped_before + 3);
    EXPECT_EQ(compiled.CloseIdle(), 0) << "every entry was used since it was loaded";
    const Tensor four = TailInput(4);
    const TensorView at_four[] = {four.view()};
    ASSERT_TRUE(compiled.Run(at_four).ok());
    EXPECT_EQ(compiled.CloseIdle(), 2) << "2 and 8 were not used since";
    EXPECT_EQ(compiled.open_entries(), 1);
    EXPECT_EQ(MappedObjects(daemon_.cache_dir()), mapped_before + 1) << "dlclosed";
    // A call at 8 loads its bucket again, from the local index: no compile,
    // and 8 is still a warmed bucket (not counted against the limit).
    const Tensor eight = TailInput(8);
    const TensorView at_eight[] = {eight.view()};
    auto out = compiled.Run(at_eight);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectTailOf(eight, (*out)[0]);
    EXPECT_EQ(compiled.open_entries(), 2);
    EXPECT_EQ(client_->Stats()->compiles(), 3);

    // Calls racing the unloading: each finds an entry, or loads it again.
    compiled.set_close_after(absl::Milliseconds(1));
    std::atomic<bool> stop{false};
    std::thread caller([&] {
      while (!stop) {
        auto ran = compiled.Run(at_eight);
        ASSERT_TRUE(ran.ok()) << ran.status();
        ExpectTailOf(eight, (*ran)[0]);
      }
    });
    absl::SleepFor(absl::Milliseconds(300));
    stop = true;
    caller.join();
  }
  EXPECT_EQ(MappedObjects(daemon_.cache_dir()), mapped_before);
}

TEST_F(WarmupTest, RecordedTrafficSuggestsAPlan) {
  ASSERT_TRUE(WriteFileAtomically(daemon_.root() + "/tail.json",
                                  ReadFile("examples/tail_dynamic.json").value_or(""), 0644)
                  .ok());
  auto graph = ReadGraphFile(daemon_.root() + "/tail.json");
  ASSERT_TRUE(graph.ok());
  auto run_at = [](CompiledGraph& compiled, int64_t rows, int calls) {
    const Tensor x = TailInput(rows);
    const TensorView inputs[] = {x.view()};
    for (int i = 0; i < calls; ++i) ASSERT_TRUE(compiled.Run(inputs).ok());
  };
  {
    // A serving process connected to kilnd: its counts go when the
    // CompiledGraph does.
    CompiledGraph compiled(client_.get(), *graph);
    run_at(compiled, 4, 100);
    run_at(compiled, 8, 50);
    run_at(compiled, 16, 5);
    run_at(compiled, 3, 1);
  }
  auto traffic = client_->Traffic(GraphDigest(*graph));
  ASSERT_TRUE(traffic.ok()) << traffic.status();
  ASSERT_EQ(traffic->rows_size(), 4);
  {
    // One that only hits locally never connects, so sends nothing.
    ClientOptions options;
    options.socket_path = daemon_.socket_path();
    options.cache_dir = daemon_.cache_dir();
    options.auto_start = false;
    std::unique_ptr<Client> local = Client::Open(options);
    CompiledGraph compiled(local.get(), *graph);
    run_at(compiled, 4, 1000);
  }
  {
    // A long-lived one sends every traffic_report_interval.
    ClientOptions options;
    options.socket_path = daemon_.socket_path();
    options.auto_start = false;
    options.traffic_report_interval = absl::Milliseconds(20);
    auto connected = Client::Connect(options);
    ASSERT_TRUE(connected.ok());
    CompiledGraph compiled(connected->get(), *graph);
    run_at(compiled, 4, 10);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    int64_t at_four = 0;
    while (at_four != 110 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
      traffic = client_->Traffic(GraphDigest(*graph));
      ASSERT_TRUE(traffic.ok());
      for (const auto& row : traffic->rows()) {
        if (row.sizes(0) == 4) at_four = row.calls();
      }
    }
    EXPECT_EQ(at_four, 110) << "100 + 10: the local-only process sent nothing";
  }

  // 4 and 8 cover 160 of 166 calls (96.4%); with 16, 165 (99.4%).
  auto cli = daemon_.RunTool({kKilnCliPath, "warmup", "--suggest", daemon_.root() + "/tail.json",
                              "--share=0.9", "--start=false"});
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_EQ(cli->exit_code, 0) << cli->output;
  EXPECT_THAT(cli->output, HasSubstr("2 buckets cover 96.4% of 166 recorded calls"));
  const size_t plan_start = cli->output.find('{');
  ASSERT_NE(plan_start, std::string::npos) << cli->output;
  kiln::v1::WarmupPlan plan;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  cli->output.substr(plan_start, cli->output.rfind('}') + 1 - plan_start), &plan)
                  .ok())
      << cli->output;
  ASSERT_EQ(plan.graphs_size(), 1);
  EXPECT_EQ(plan.graphs(0).graph(), daemon_.root() + "/tail.json");
  ASSERT_EQ(plan.graphs(0).symbols_size(), 1);
  EXPECT_EQ(plan.graphs(0).symbols(0).symbol(), "s0");
  EXPECT_THAT(std::vector<int64_t>(plan.graphs(0).symbols(0).sizes().begin(),
                                   plan.graphs(0).symbols(0).sizes().end()),
              ::testing::ElementsAre(4, 8));

  cli = daemon_.RunTool({kKilnCliPath, "warmup", "--suggest", daemon_.root() + "/tail.json",
                         "--share=0.999", "--max_buckets=3", "--start=false"});
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_THAT(cli->output, HasSubstr("3 buckets cover 99.4% of 166 recorded calls (99.9% wanted: "
                                     "allow more than 3 buckets with --max_buckets)"));
  cli = daemon_.RunTool({kKilnCliPath, "warmup", "--suggest", "examples/f.json", "--start=false"});
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_EQ(cli->exit_code, 1);
  EXPECT_THAT(cli->output, HasSubstr("kilnd has no recorded traffic for examples/f.json"));
}

}  // namespace
}  // namespace kiln
