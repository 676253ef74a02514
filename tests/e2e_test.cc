// End to end: a real kilnd, real client processes, real artifacts.
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cache/local_index.h"
#include "cache/object_dir.h"
#include "client/compiled_graph.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/artifact.pb.h"
#include "proto/graph_file.h"
#include "proto/service.grpc.pb.h"
#include "tests/daemon_fixture.h"

namespace kiln {
namespace {

// A Run error for inputs the guards refuse: FailedPrecondition, marked as a
// guard miss (what the Python package's GuardError is made from).
absl::Status GuardMiss(absl::string_view message) {
  absl::Status status = absl::FailedPreconditionError(message);
  status.SetPayload(kGuardMissPayload, absl::Cord());
  return status;
}

using ::testing::HasSubstr;
using ::testing::Not;

kiln::v1::Graph Example(const std::string& name) {
  auto graph = ReadGraphFile("examples/" + name + ".json");
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *graph;
}

kiln::v1::TensorType Vector(int64_t n) {
  kiln::v1::TensorType type;
  type.set_dtype(kiln::v1::FLOAT32);
  type.add_sizes()->set_constant(n);
  return type;
}

// relu(x + 1.0) over n floats, or relu(x) when `add_one` is false.
kiln::v1::Graph PointwiseGraph(int64_t n, bool add_one) {
  kiln::v1::Graph graph;
  graph.set_name(add_one ? "relu_add" : "relu");
  auto* input = graph.add_inputs();
  input->set_value(0);
  input->set_name("x");
  *input->mutable_type() = Vector(n);
  int64_t last = 0;
  if (add_one) {
    auto* add = graph.add_nodes();
    add->set_op("aten.add.Tensor");
    add->add_inputs(0);
    auto* other = add->add_args();
    other->set_name("other");
    other->set_float_value(1.0);
    add->add_outputs(1);
    *add->add_output_types() = Vector(n);
    last = 1;
  }
  auto* relu = graph.add_nodes();
  relu->set_op("aten.relu.default");
  relu->add_inputs(last);
  relu->add_outputs(last + 1);
  *relu->add_output_types() = Vector(n);
  graph.add_outputs(last + 1);
  return graph;
}

uint32_t Bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

std::vector<float> RunVector(Client* client, const kiln::v1::Graph& graph,
                             std::vector<float> values) {
  CompiledGraph compiled(client, graph);
  const std::vector<int64_t> sizes = {static_cast<int64_t>(values.size())}, strides = {1};
  TensorView input{values.data(), kiln::v1::FLOAT32, sizes, strides};
  auto outputs = compiled.Run({input});
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  if (!outputs.ok()) return {};
  const float* data = (*outputs)[0].data<float>();
  return std::vector<float>(data, data + values.size());
}

class EndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.Start().ok()); }

  kiln::v1::StatsResponse Stats() {
    auto client = daemon_.Connect();
    EXPECT_TRUE(client.ok()) << client.status();
    auto stats = (*client)->Stats();
    EXPECT_TRUE(stats.ok());
    return *stats;
  }

  DaemonFixture daemon_;
};

TEST_F(EndToEndTest, ColdCompileInOneProcessThenAHitInAFreshProcess) {
  auto first =
      daemon_.RunTool({kKilnCliPath, "run", "examples/f.json", "--check", "--start=false"});
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->exit_code, 0) << first->output;
  EXPECT_THAT(first->output, HasSubstr("(compiled)"));
  EXPECT_THAT(first->output, HasSubstr("check    output 0 matches the reference"));
  EXPECT_EQ(Stats().compiles(), 1);

  auto second =
      daemon_.RunTool({kKilnCliPath, "run", "examples/f.json", "--check", "--start=false"});
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->exit_code, 0) << second->output;
  EXPECT_THAT(second->output, HasSubstr("(cache hit, local index)"));
  EXPECT_THAT(second->output, HasSubstr("check    output 0 matches the reference"));
  const kiln::v1::StatsResponse stats = Stats();
  EXPECT_EQ(stats.compiles(), 1) << "the fresh process must not compile";
  EXPECT_EQ(stats.hits(), 0) << "a same-host hit comes from the local index, not the daemon";
  EXPECT_EQ(stats.entries(), 1);
}

TEST_F(EndToEndTest, KeepProductAndTailMatchTheReference) {
  for (const char* name : {"keep_product", "tail"}) {
    auto run = daemon_.RunTool({kKilnCliPath, "run", absl::StrCat("examples/", name, ".json"),
                                "--check", "--repeat=2", "--start=false"});
    ASSERT_TRUE(run.ok());
    EXPECT_EQ(run->exit_code, 0) << run->output;
    EXPECT_THAT(run->output, HasSubstr("check    output 0 matches the reference"));
  }
}

TEST_F(EndToEndTest, EdgeValuesMatchEagerBitForBit) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  const float inf = INFINITY, nan = NAN;
  const std::vector<float> got =
      RunVector(client->get(), PointwiseGraph(8, true), {-inf, -2, -1, -0.0f, 0, 1, inf, nan});
  const std::vector<float> want = {0, 0, 0, 1, 1, 2, inf, nan};
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(Bits(got[i]), Bits(want[i])) << i;

  // Eager keeps the sign of -0.0 and propagates NaN: neither x > 0 ? x : 0
  // nor fmaxf(x, 0) does both.
  const std::vector<float> relu =
      RunVector(client->get(), PointwiseGraph(3, false), {-0.0f, nan, -inf});
  ASSERT_EQ(relu.size(), 3u);
  EXPECT_EQ(Bits(relu[0]), Bits(-0.0f));
  EXPECT_TRUE(std::isnan(relu[1]));
  EXPECT_EQ(Bits(relu[2]), Bits(0.0f));
}

// relu, relu, ... over n floats: `length` nodes.
kiln::v1::Graph ReluChain(int64_t n, int length) {
  kiln::v1::Graph graph;
  graph.set_name("relu_chain");
  auto* input = graph.add_inputs();
  input->set_value(0);
  input->set_name("x");
  *input->mutable_type() = Vector(n);
  for (int i = 0; i < length; ++i) {
    auto* relu = graph.add_nodes();
    relu->set_op("aten.relu.default");
    relu->add_inputs(i);
    relu->add_outputs(i + 1);
    *relu->add_output_types() = Vector(n);
  }
  graph.add_outputs(length);
  return graph;
}

TEST_F(EndToEndTest, AGraphOverTheNodeBudgetIsRefusedAtOnceAndKilndKeepsServing) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = ReluChain(64, 100000);
  const absl::Time start = absl::Now();
  EXPECT_EQ((*client)->Compile(request).status(),
            absl::InvalidArgumentError("the graph has 100000 nodes, over the limit "
                                       "max_graph_nodes = 50000 (kilnd --max_graph_nodes)"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "refused before any codegen";
  EXPECT_EQ(Stats().compiles(), 0);
  EXPECT_EQ(Stats().failures_by_kind().at("resource_limit"), 1);
  EXPECT_EQ(RunVector(client->get(), PointwiseGraph(3, true), {-2, 0.5, 1}),
            (std::vector<float>{0, 1.5, 2}));
  EXPECT_TRUE(daemon_.Alive());
}

TEST(NodeBudgetTest, KilndsFlagSetsTheBudgetAndAChainAtItRuns) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.Start({"--max_graph_nodes=1000"}).ok());
  auto client = daemon.Connect();
  ASSERT_TRUE(client.ok());
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = ReluChain(4, 1001);
  EXPECT_EQ((*client)->Compile(request).status(),
            absl::InvalidArgumentError("the graph has 1001 nodes, over the limit "
                                       "max_graph_nodes = 1000 (kilnd --max_graph_nodes)"));
  EXPECT_EQ(RunVector(client->get(), ReluChain(4, 1000), {-2, 0.5, -0.0f, 3}),
            (std::vector<float>{0, 0.5, 0, 3}));
}

TEST_F(EndToEndTest, BadInputGetsASpecificErrorAndTheDaemonKeepsServing) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  auto compile = [&](const kiln::v1::Graph& graph) {
    kiln::v1::CompileRequest request;
    *request.mutable_graph() = graph;
    return (*client)->Compile(request).status();
  };
  kiln::v1::Graph unknown = Example("f");
  unknown.mutable_nodes(3)->set_op("aten.frobnicate.default");
  EXPECT_EQ(compile(unknown), absl::UnimplementedError(
                                  "node 3 'relu' (aten.frobnicate.default): op "
                                  "'aten.frobnicate.default' is not supported (see docs/OPS.md)"));
  kiln::v1::Graph mismatch = Example("f");
  mismatch.mutable_inputs(0)->mutable_type()->mutable_sizes(1)->set_constant(32);
  EXPECT_EQ(compile(mismatch).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(compile(mismatch).message()),
              HasSubstr("node 0 'permute' (aten.permute.default): result 0 is declared"));
  kiln::v1::Graph cycle = Example("f");
  cycle.mutable_nodes(1)->set_inputs(1, 4);
  EXPECT_THAT(std::string(compile(cycle).message()), HasSubstr("(a cycle, or nodes not in"));

  // Malformed JSON never reaches the daemon: the CLI names the file.
  ASSERT_TRUE(WriteFileAtomically(daemon_.root() + "/bad.json", "{\"nodes\": [", 0600).ok());
  auto bad =
      daemon_.RunTool({kKilnCliPath, "compile", daemon_.root() + "/bad.json", "--start=false"});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->exit_code, 1);
  EXPECT_THAT(bad->output, HasSubstr("kiln compile: " + daemon_.root() +
                                     "/bad.json: not a Kiln graph (protobuf JSON)"));

  EXPECT_TRUE(compile(Example("f")).ok()) << "the daemon keeps serving";
  EXPECT_EQ(Stats().compile_failures(), 0) << "bad input is refused before compiling";
}

TEST_F(EndToEndTest, IdenticalConcurrentMissesCompileOnce) {
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = Example("f");
  request.mutable_options()->set_salt("single-flight");
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto client = daemon_.Connect();
      if (client.ok() && (*client)->Compile(request).ok()) ++ok;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ok, 8);
  const kiln::v1::StatsResponse stats = Stats();
  EXPECT_EQ(stats.compiles(), 1);
  EXPECT_EQ(stats.entries(), 1);
}

// x[s] expanded to [s, s]: a small input whose output's size is the
// symbol's square.
kiln::v1::Graph SquareOfASymbol() {
  kiln::v1::Graph graph;
  graph.set_name("square");
  auto* input = graph.add_inputs();
  input->set_value(0);
  input->set_name("x");
  input->mutable_type()->set_dtype(kiln::v1::FLOAT32);
  input->mutable_type()->add_sizes()->set_symbol("s");
  auto* expand = graph.add_nodes();
  expand->set_op("aten.expand.default");
  expand->add_inputs(0);
  auto* size = expand->add_args();
  size->set_name("size");
  for (int d = 0; d < 2; ++d) {
    auto* term = size->mutable_sym_int_list()->add_values()->add_terms();
    term->set_coefficient(1);
    term->add_symbols("s");
  }
  expand->add_outputs(1);
  kiln::v1::TensorType square = input->type();
  *square.add_sizes() = input->type().sizes(0);
  *expand->add_output_types() = square;
  graph.add_outputs(1);
  return graph;
}

TEST_F(EndToEndTest, SizesFromSymbolsPastTheLimitsAreRefusedBeforeTheKernelRuns) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  CompiledGraph compiled(client->get(), SquareOfASymbol());
  std::vector<float> small(1000, 1.0f);
  const std::vector<int64_t> small_sizes = {1000}, strides = {1};
  auto fine = compiled.Run({TensorView{small.data(), kiln::v1::FLOAT32, small_sizes, strides}});
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ((*fine)[0].sizes(), (std::vector<int64_t>{1000, 1000}));
  // kilnd records the value up to which no call needs the full check,
  // 4 * s0^2 bytes <= 2^40, and the symbolic tensors and limits the client
  // checks calls above it against, with no graph of its own.
  absl::StatusOr<kiln::v1::ArtifactMetadata> metadata = compiled.artifact();
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_EQ(metadata->safe_symbol_value(), int64_t{1} << 19);
  const kiln::v1::RunTimeSizes& sizes = metadata->run_time_sizes();
  EXPECT_EQ(sizes.max_tensor_elements(), int64_t{1} << 40);
  EXPECT_EQ(sizes.max_tensor_bytes(), int64_t{1} << 40);
  ASSERT_EQ(sizes.tensors_size(), 2);
  EXPECT_EQ(sizes.tensors(0).where(), "input 0 'x'");
  EXPECT_EQ(sizes.tensors(0).shape(), "float32[s0]");
  EXPECT_EQ(sizes.tensors(0).element_bytes(), 4);
  EXPECT_EQ(sizes.tensors(0).sizes(0).ShortDebugString(), "multiplier: 1 symbols: 0");
  EXPECT_EQ(sizes.tensors(1).shape(), "float32[s0, s0]");

  // 4 MiB in; 2^40 + 2^21 + 1 elements out.
  const int64_t n = (int64_t{1} << 20) + 1;
  std::vector<float> large(n, 1.0f);
  const std::vector<int64_t> large_sizes = {n};
  auto refused = compiled.Run({TensorView{large.data(), kiln::v1::FLOAT32, large_sizes, strides}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("float32[s0, s0] at s0 = 1048577 has 1099513724929 elements, over the "
                        "limit kMaxTensorElements"));
}

TEST_F(EndToEndTest, GcKeepsPinnedEntriesAndALoadedObjectKeepsRunningAfterItsEviction) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  CompiledGraph f(client->get(), Example("f"));
  Tensor x(kiln::v1::FLOAT32, {64, 64}), small(kiln::v1::FLOAT32, {32, 32});
  ASSERT_TRUE(f.Run({x.view()}).ok());
  const std::string f_key = f.artifact()->key();
  ASSERT_TRUE(f.Run({small.view()}).ok());  // a specialization of the same graph
  auto tail = daemon_.RunTool({kKilnCliPath, "run", "examples/tail.json", "--start=false"});
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->exit_code, 0) << tail->output;
  ASSERT_EQ(Stats().entries(), 3);

  // By key prefix, then by graph file: f and its specialization.
  auto pin = daemon_.RunTool({kKilnCliPath, "pin", f_key.substr(0, 12), "--start=false"});
  ASSERT_TRUE(pin.ok());
  EXPECT_EQ(pin->output, "pinned " + f_key + "\n");
  pin = daemon_.RunTool({kKilnCliPath, "pin", "examples/f.json", "--start=false"});
  ASSERT_EQ(pin->exit_code, 0) << pin->output;
  EXPECT_EQ(std::count(pin->output.begin(), pin->output.end(), '\n'), 2) << pin->output;
  EXPECT_THAT(pin->output, HasSubstr("pinned " + f_key + "\n"));
  auto gc = daemon_.RunTool({kKilnCliPath, "gc", "--max_bytes=1", "--start=false"});
  ASSERT_TRUE(gc.ok());
  ASSERT_EQ(gc->exit_code, 0) << gc->output;
  EXPECT_THAT(gc->output, HasSubstr("evicted 1 entries"));
  EXPECT_EQ(Stats().entries(), 2) << "f and its specialization are pinned";
  EXPECT_EQ(Stats().evictions(), 1);

  ASSERT_EQ(daemon_.RunTool({kKilnCliPath, "unpin", "examples/f.json", "--start=false"})->exit_code,
            0);
  gc = daemon_.RunTool({kKilnCliPath, "gc", "--max_bytes=1", "--start=false"});
  EXPECT_THAT(gc->output, HasSubstr("evicted " + f_key.substr(0, 16)));
  EXPECT_THAT(gc->output, HasSubstr("evicted 2 entries"));
  EXPECT_EQ(Stats().entries(), 0);
  // This process still has f's object mapped: it keeps running.
  EXPECT_TRUE(f.Run({x.view()}).ok());
  // A fresh process misses and compiles again.
  CompiledGraph fresh(client->get(), Example("f"));
  ASSERT_TRUE(fresh.Run({x.view()}).ok());
  EXPECT_EQ(Stats().compiles(), 4);

  auto bad = daemon_.RunTool({kKilnCliPath, "gc", "--max_bytes=lots", "--start=false"});
  EXPECT_EQ(bad->exit_code, 1);
  EXPECT_THAT(bad->output,
              HasSubstr("'lots' is not a size: give bytes, or a number with K, M, G or T"));
}

TEST_F(EndToEndTest, VerifyFindsAFlippedByteAndRepairRestoresIt) {
  auto compiled = daemon_.RunTool({kKilnCliPath, "run", "examples/f.json", "--start=false"});
  ASSERT_TRUE(compiled.ok());
  ASSERT_EQ(compiled->exit_code, 0) << compiled->output;
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  auto list = (*client)->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->entries_size(), 1);
  const kiln::v1::ArtifactMetadata entry = list->entries(0);
  auto clean = daemon_.RunTool({kKilnCliPath, "verify", "--start=false"});
  ASSERT_EQ(clean->exit_code, 0) << clean->output;
  EXPECT_THAT(clean->output, HasSubstr("checked 1 entries: 0 bad entries, 0 bad blobs, 0 bad "
                                       "object files, 0 bad index records"));

  // One flipped byte in the object file clients load, and a damaged index record.
  const std::string object =
      daemon_.cache_dir() + "/" + ObjectDirectory::RelativePathFor(entry.digest());
  auto bytes = ReadFile(object);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() / 2] ^= 1;
  ASSERT_EQ(chmod(object.c_str(), 0644), 0);
  ASSERT_TRUE(WriteFileAtomically(object, *bytes, 0444).ok());
  const std::string record = LocalIndex(daemon_.cache_dir()).PathFor(entry.key());
  ASSERT_TRUE(WriteFileAtomically(record, "kiln-index 1 3 0000\nabc", 0444).ok());

  auto found = daemon_.RunTool({kKilnCliPath, "verify", "--start=false"});
  EXPECT_EQ(found->exit_code, 1);
  EXPECT_THAT(found->output, HasSubstr("bad " + entry.key().substr(0, 16) +
                                       ": object file does not match its digest"));
  EXPECT_THAT(found->output, HasSubstr("2 damaged items; `kiln verify --repair` repairs them"));
  auto repaired = daemon_.RunTool({kKilnCliPath, "verify", "--repair", "--start=false"});
  EXPECT_EQ(repaired->exit_code, 1) << "damage was found, even if repaired";
  EXPECT_THAT(repaired->output, HasSubstr("; 2 repaired"));
  auto after = daemon_.RunTool({kKilnCliPath, "verify", "--start=false"});
  EXPECT_EQ(after->exit_code, 0) << after->output;
  EXPECT_EQ(Sha256Hex(*ReadFile(object)), entry.digest());
  // A fresh process hits the repaired entry without a compile.
  auto hit = daemon_.RunTool({kKilnCliPath, "run", "examples/f.json", "--start=false"});
  EXPECT_EQ(hit->exit_code, 0) << hit->output;
  EXPECT_EQ(Stats().compiles(), 1);
}

TEST_F(EndToEndTest, WhyNamesThePartOfTheKeyThatDiffers) {
  auto compiled = daemon_.RunTool({kKilnCliPath, "run", "examples/f.json", "--start=false"});
  ASSERT_EQ(compiled->exit_code, 0) << compiled->output;
  auto stored = daemon_.RunTool({kKilnCliPath, "why", "examples/f.json", "--start=false"});
  ASSERT_EQ(stored->exit_code, 0) << stored->output;
  EXPECT_THAT(stored->output, HasSubstr("stored: a request for it hits"));

  // The same graph with its relu made a sigmoid: it parts at that node.
  auto text = ReadFile("examples/f.json");
  ASSERT_TRUE(text.ok());
  const std::string sigmoid_path = daemon_.cache_dir() + "/../sigmoid.json";
  ASSERT_TRUE(WriteFileAtomically(
                  sigmoid_path,
                  absl::StrReplaceAll(*text, {{"aten.relu.default", "aten.sigmoid.default"}}), 0600)
                  .ok());
  auto graph = daemon_.RunTool({kKilnCliPath, "why", sigmoid_path, "--start=false"});
  ASSERT_EQ(graph->exit_code, 0) << graph->output;
  EXPECT_THAT(graph->output, HasSubstr("graph: node 3 'relu' (aten.sigmoid.default) differs"));

  // A salted request misses: `why --last` explains it after the fact.
  auto salted =
      daemon_.RunTool({kKilnCliPath, "run", "examples/f.json", "--salt=canary", "--start=false"});
  ASSERT_EQ(salted->exit_code, 0) << salted->output;
  auto last = daemon_.RunTool({kKilnCliPath, "why", "--last=1", "--start=false"});
  ASSERT_EQ(last->exit_code, 0) << last->output;
  EXPECT_THAT(last->output, HasSubstr("stored since (that miss compiled it); before it:"));
  EXPECT_THAT(last->output, HasSubstr("options: the salt differs"));
}

// `kiln why GRAPH.json --inputs SIZES` explains the request a process
// makes when it calls the graph at those sizes: f compiled at 64x64 is
// stored at 64x64; at 64x32 the client asks for f re-typed with the width
// symbolic, which differs from the stored entry in input 0's dim 1; once a
// process has run f at 64x32, that symbolic entry also serves 64x48.
TEST_F(EndToEndTest, WhyInputsExplainsTheRequestForThoseSizes) {
  auto compiled = daemon_.RunTool({kKilnCliPath, "run", "examples/f.json", "--start=false"});
  ASSERT_EQ(compiled->exit_code, 0) << compiled->output;
  auto why = [&](const std::string& sizes) {
    return *daemon_.RunTool(
        {kKilnCliPath, "why", "examples/f.json", "--inputs=" + sizes, "--start=false"});
  };

  const ProcessResult same = why("64x64");
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_THAT(same.output, HasSubstr("inputs 64x64: the graph as given takes them\n"));
  EXPECT_THAT(same.output, HasSubstr("  stored: a request for it hits\n"));
  EXPECT_THAT(same.output, HasSubstr("a call at these sizes hits: the first request is stored\n"));

  const ProcessResult narrower = why("64x32");
  ASSERT_EQ(narrower.exit_code, 0) << narrower.output;
  EXPECT_THAT(narrower.output,
              HasSubstr("inputs 64x32: the graph as given does not take them (input 0 'x' dim 1 "
                        "is 32; the graph has 64)"));
  EXPECT_THAT(narrower.output, HasSubstr("1. re-typed, changed dims symbolic (d64_32)\n"));
  EXPECT_THAT(narrower.output, HasSubstr("2. re-typed for the exact sizes\n"));
  EXPECT_THAT(narrower.output, HasSubstr("guard: input 0 dim 1 size s0 here, 64 stored"));
  EXPECT_THAT(narrower.output, HasSubstr("guard: input 0 dim 1 size 32 here, 64 stored"));
  EXPECT_THAT(narrower.output,
              HasSubstr("a call at these sizes compiles: the first request is not stored\n"));

  // A process runs f at 64x32: the symbolic width is compiled, and serves 64x48.
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  CompiledGraph f(client->get(), Example("f"));
  Tensor x(kiln::v1::FLOAT32, {64, 32});
  ASSERT_TRUE(f.Run({x.view()}).ok());
  const ProcessResult wider = why("64x48");
  ASSERT_EQ(wider.exit_code, 0) << wider.output;
  EXPECT_THAT(wider.output, HasSubstr("1. re-typed, changed dims symbolic (d64_48)\n"
                                      "request "));
  EXPECT_THAT(wider.output, HasSubstr("  stored: a request for it hits\n"));
  EXPECT_THAT(wider.output, HasSubstr("a call at these sizes hits: the first request is stored\n"));

  const ProcessResult rank = why("64");
  EXPECT_EQ(rank.exit_code, 1);
  EXPECT_THAT(rank.output, HasSubstr("kiln why: input 0 'x' has 2 dims; the sizes give 1 (64)"));
  const ProcessResult symbol = why("B=4");
  EXPECT_EQ(symbol.exit_code, 1);
  EXPECT_THAT(symbol.output,
              HasSubstr("kiln why: the graph's inputs have no symbol B (they have none)"));
  const ProcessResult count = why("64x64,3");
  EXPECT_EQ(count.exit_code, 1);
  EXPECT_THAT(count.output, HasSubstr("kiln why: the graph has 1 inputs; '64x64,3' gives 2"));
}

TEST_F(EndToEndTest, StaticGuardsAndOutputBuffersAreChecked) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  CompiledGraph f(client->get(), Example("f"));
  Tensor x(kiln::v1::FLOAT32, {64, 64}), wrong_rank(kiln::v1::FLOAT32, {64});
  ASSERT_TRUE(f.Run({x.view()}).ok());
  EXPECT_EQ(f.Run({wrong_rank.view()}).status(),
            GuardMiss("input 0 'x' has rank 1; the graph expects 2"));
  Tensor out(kiln::v1::FLOAT32, {64, 64});
  EXPECT_TRUE(f.Run({x.view()}, {out.view()}).ok());
  EXPECT_EQ(f.Run({x.view()}, {x.view()}),
            absl::InvalidArgumentError("output 0 overlaps input 0 'x'; use separate memory"));
}

// cache += x with output 0 the new value of input 0 (the cache).
kiln::v1::Graph AccumulateIntoCache() {
  kiln::v1::Graph graph;
  graph.set_name("accumulate");
  for (const char* name : {"cache", "x"}) {
    kiln::v1::Input* input = graph.add_inputs();
    input->set_value(graph.inputs_size() - 1);
    input->set_name(name);
    *input->mutable_type() = Vector(8);
  }
  kiln::v1::Node* add = graph.add_nodes();
  add->set_op("aten.add.Tensor");
  add->add_inputs(0);
  add->add_inputs(1);
  add->add_outputs(2);
  *add->add_output_types() = Vector(8);
  graph.add_outputs(2);
  kiln::v1::OutputAlias* alias = graph.add_output_aliases();
  alias->set_output(0);
  alias->set_input(0);
  return graph;
}

TEST_F(EndToEndTest, AnAliasedOutputIsTheInputsStorageAndNothingIsCopied) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  CompiledGraph graph(client->get(), AccumulateIntoCache());
  graph.set_stride_miss(CompiledGraph::StrideMiss::kCopyToTracedLayout);
  std::vector<float> cache(8, 1.0f), x(8, 2.0f);
  const std::vector<int64_t> sizes = {8}, strides = {1};
  const TensorView cache_view{cache.data(), kiln::v1::FLOAT32, sizes, strides};
  const TensorView x_view{x.data(), kiln::v1::FLOAT32, sizes, strides};
  int allocated = 0;
  ASSERT_TRUE(graph
                  .Run({cache_view, x_view},
                       [&](int, DType, absl::Span<const int64_t>) -> absl::StatusOr<TensorView> {
                         ++allocated;
                         return absl::InternalError("an aliased output was allocated");
                       })
                  .ok());
  EXPECT_EQ(allocated, 0);
  EXPECT_EQ(cache, std::vector<float>(8, 3.0f)) << "written in the cache's own storage";
  auto metadata = graph.ArtifactFor({cache_view, x_view});
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  ASSERT_EQ(metadata->signature().output_aliases_size(), 1);
  EXPECT_EQ(metadata->signature().output_aliases(0).input(), 0);

  // Run(inputs) returns an empty tensor for it; into caller-given outputs,
  // the input itself may be passed.
  auto outputs = graph.Run({cache_view, x_view});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);
  EXPECT_EQ((*outputs)[0].data<float>(), nullptr);
  EXPECT_EQ(cache, std::vector<float>(8, 5.0f));
  ASSERT_TRUE(graph.Run({cache_view, x_view}, {cache_view}).ok());
  EXPECT_EQ(cache, std::vector<float>(8, 7.0f));

  // A cache in another layout is copied into the artifact's, and back.
  std::vector<float> spread(16, -1.0f);
  for (int i = 0; i < 8; ++i) spread[2 * i] = 1.0f;
  const std::vector<int64_t> every_other = {2};
  ASSERT_TRUE(graph.Run({{spread.data(), kiln::v1::FLOAT32, sizes, every_other}, x_view}).ok());
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(spread[2 * i], 3.0f) << i;
    EXPECT_EQ(spread[2 * i + 1], -1.0f) << i;
  }
  // A cache that other inputs can see is refused before the kernel runs.
  EXPECT_EQ(
      graph.Run({cache_view, cache_view}).status(),
      absl::InvalidArgumentError(
          "input 0 is written in place (output 0) and overlaps input 1; use separate memory"));
  EXPECT_EQ(Stats().compiles(), 1);
}

TEST_F(EndToEndTest, NewSizesGetASpecializationAndChangedDimsTurnSymbolic) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  // f = relu(x @ x.T + 1) at [64, 64]: a new width makes the GEMM's inner
  // dim symbolic, a new row count the rows (and the output's both dims):
  // one artifact each, whatever sizes follow.
  CompiledGraph f(client->get(), Example("f"));
  for (auto [rows, columns, compiles] : std::vector<std::array<int64_t, 3>>{
           {64, 64, 1}, {64, 32, 2}, {64, 48, 2}, {100, 64, 3}, {300, 64, 3}}) {
    Tensor x(kiln::v1::FLOAT32, {rows, columns});
    for (int64_t i = 0; i < rows * columns; ++i) x.data<float>()[i] = (i % 7) * 0.25f - 0.5f;
    auto out = f.Run({x.view()});
    ASSERT_TRUE(out.ok()) << rows << "x" << columns << ": " << out.status();
    ASSERT_EQ((*out)[0].sizes(), (std::vector<int64_t>{rows, rows}));
    // Row 0 of x . x^T + 1, through relu, at column 1.
    float dot = 0;
    for (int64_t k = 0; k < columns; ++k) dot += x.data<float>()[k] * x.data<float>()[columns + k];
    EXPECT_NEAR((*out)[0].data<float>()[1], std::max(dot + 1.0f, 0.0f), 1e-4);
    EXPECT_EQ(Stats().compiles(), compiles) << rows << "x" << columns;
  }

  // tail = relu(x + 1) at 2048 x 2048: another row count makes the leading
  // dim symbolic, and from then on no size recompiles.
  CompiledGraph tail(client->get(), Example("tail"));
  for (int64_t rows : {2048, 100, 300, 7}) {
    Tensor input(kiln::v1::FLOAT32, {rows, 2048});
    input.data<float>()[0] = -3;
    auto output = tail.Run({input.view()});
    ASSERT_TRUE(output.ok()) << rows << ": " << output.status();
    EXPECT_EQ((*output)[0].data<float>()[0], 0.0f);
    EXPECT_EQ((*output)[0].data<float>()[1], 1.0f);
  }
  EXPECT_EQ(Stats().compiles(), 5) << "tail at 2048, then one symbolic artifact for all rows";
}

// relu(x.view(-1, 12)) traced at x: [2, 6, 4], then called at [5, 9, 4]:
// with both changed dims symbolic the view's -1 would be 4*a*b/12, not a
// size; so the first changed dim turns symbolic and the second stays
// exact (36*a/12 = 3*a), and later sizes of the first reuse that artifact.
TEST_F(EndToEndTest, TwoChangedDimsThatCannotBothBeSymbolicKeepOne) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  kiln::v1::Graph graph;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(R"({"name": "flat", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32",
       "sizes": [{"constant": 2}, {"constant": 6}, {"constant": 4}]}}],
    "nodes": [
      {"name": "view", "op": "aten.view.default", "inputs": [0], "outputs": [1],
       "args": [{"name": "size", "intList": {"values": ["-1", "12"]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 12}]}]},
      {"name": "relu", "op": "aten.relu.default", "inputs": [1], "outputs": [2],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 12}]}]}],
    "outputs": [2]})",
                                                          &graph)
                  .ok());
  CompiledGraph flat(client->get(), graph);
  for (auto [a, b, compiles] : std::vector<std::array<int64_t, 3>>{
           {2, 6, 1}, {5, 9, 2}, {7, 9, 2}, {11, 9, 2}, {5, 3, 3}}) {
    Tensor x(kiln::v1::FLOAT32, {a, b, 4});
    for (int64_t i = 0; i < a * b * 4; ++i) x.data<float>()[i] = (i % 5) - 2.0f;
    auto out = flat.Run({x.view()});
    ASSERT_TRUE(out.ok()) << a << "x" << b << ": " << out.status();
    ASSERT_EQ((*out)[0].sizes(), (std::vector<int64_t>{a * b * 4 / 12, 12}));
    for (int64_t i = 0; i < a * b * 4; ++i) {
      ASSERT_EQ((*out)[0].data<float>()[i], std::max(x.data<float>()[i], 0.0f)) << i;
    }
    EXPECT_EQ(Stats().compiles(), compiles) << a << "x" << b;
  }
}

// (x * 2).sum(1) over x: float64 [3, 5], traced as the transpose of a
// [5, 3] tensor (strides [1, 3]), as the tracer writes it.
kiln::v1::Graph TransposedSumGraph() {
  kiln::v1::Graph graph;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(R"({"name": "transposed_sum",
    "inputs": [{"value": 0, "name": "x", "type": {"dtype": "FLOAT64",
       "sizes": [{"constant": 3}, {"constant": 5}], "strides": [{"constant": 1}, {"constant": 3}]}}],
    "nodes": [
      {"name": "mul", "op": "aten.mul.Tensor", "inputs": [0], "outputs": [1],
       "args": [{"name": "other", "floatValue": 2}],
       "outputTypes": [{"dtype": "FLOAT64", "sizes": [{"constant": 3}, {"constant": 5}],
                        "strides": [{"constant": 1}, {"constant": 3}]}]},
      {"name": "sum", "op": "aten.sum.dim_IntList", "inputs": [1], "outputs": [2],
       "args": [{"name": "dim", "intList": {"values": ["1"]}}],
       "outputTypes": [{"dtype": "FLOAT64", "sizes": [{"constant": 3}],
                        "strides": [{"constant": 1}]}]}],
    "outputs": [2]})",
                                                          &graph)
                  .ok());
  return graph;
}

// A [3, 5] float64 view of its own storage: element (i, j) is 10 * i + j.
class StridedInput {
 public:
  StridedInput(std::vector<int64_t> strides, int64_t storage)
      : strides_(std::move(strides)), storage_(storage, -1000.0) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 5; ++j) storage_[i * strides_[0] + j * strides_[1]] = 10.0 * i + j;
    }
    // An expanded (stride 0) row holds row 2's values: the rows agree.
    if (strides_[0] == 0) {
      for (int64_t j = 0; j < 5; ++j) expected_[0] += storage_[j * strides_[1]];
      expected_[1] = expected_[2] = expected_[0];
    } else {
      for (int64_t i = 0; i < 3; ++i) expected_[i] = 50.0 * i + 10.0;  // (5 * 10i + 0+..+4)
    }
    for (double& sum : expected_) sum *= 2;
  }
  StridedInput(const StridedInput&) = delete;  // the view points into this object
  TensorView view() const {
    return TensorView{const_cast<double*>(storage_.data()), kiln::v1::FLOAT64, sizes_, strides_};
  }
  // (x * 2).sum(1) of the view.
  const std::array<double, 3>& expected() const { return expected_; }

 private:
  const std::vector<int64_t> sizes_ = {3, 5};
  std::vector<int64_t> strides_;
  std::vector<double> storage_;
  std::array<double, 3> expected_ = {0, 0, 0};
};

// The issue this fixes: a graph traced with a transposed input, called with
// a contiguous one, compiled the traced layout again under another key (a
// duplicate that could not run the call) and refused it. Each stride
// pattern now compiles once, laid out as seen, and hits from then on.
TEST_F(EndToEndTest, AStrideMissCompilesOncePerStridePatternAndThenHits) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  CompiledGraph graph(client->get(), TransposedSumGraph());
  const StridedInput transposed({1, 3}, 15), contiguous({5, 1}, 15), sliced({10, 1}, 30),
      expanded({0, 1}, 5);
  std::set<std::string> keys, guards;
  struct Call {
    const StridedInput* input;
    int compiles;
  };
  for (const Call& call : std::vector<Call>{{&transposed, 1},
                                            {&contiguous, 2},
                                            {&contiguous, 2},
                                            {&sliced, 3},
                                            {&sliced, 3},
                                            {&expanded, 4},
                                            {&expanded, 4},
                                            {&transposed, 4},
                                            {&contiguous, 4}}) {
    const TensorView view = call.input->view();
    auto out = graph.Run({view});
    ASSERT_TRUE(out.ok()) << "strides " << view.strides[0] << "," << view.strides[1] << ": "
                          << out.status();
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ((*out)[0].data<double>()[i], call.input->expected()[i])
          << "strides " << view.strides[0] << "," << view.strides[1] << " row " << i;
    }
    EXPECT_EQ(Stats().compiles(), call.compiles)
        << "strides " << view.strides[0] << "," << view.strides[1];
    auto artifact = graph.ArtifactFor({view});
    ASSERT_TRUE(artifact.ok()) << artifact.status();
    keys.insert(artifact->key());
    guards.insert(artifact->guards().SerializeAsString());
  }
  // Four patterns, four entries: each with guards of its own.
  EXPECT_EQ(graph.open_entries(), 4);
  EXPECT_EQ(keys.size(), 4u);
  EXPECT_EQ(guards.size(), 4u);
  EXPECT_EQ(Stats().entries(), 4);
  // A fresh process makes the same requests: all hits.
  CompiledGraph again(client->get(), TransposedSumGraph());
  for (const StridedInput* input : {&contiguous, &sliced, &expanded, &transposed}) {
    ASSERT_TRUE(again.Run({input->view()}).ok());
  }
  EXPECT_EQ(Stats().compiles(), 4);
}

// StrideMiss::kCopyToTracedLayout: the same calls copy into the traced
// layout and run the one artifact. A layout no copy can fill (an input
// traced expanded) still gets an entry of its own.
TEST_F(EndToEndTest, CopyingToTheTracedLayoutRunsOtherStridesWithoutACompile) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  CompiledGraph graph(client->get(), TransposedSumGraph());
  graph.set_stride_miss(CompiledGraph::StrideMiss::kCopyToTracedLayout);
  const StridedInput transposed({1, 3}, 15), contiguous({5, 1}, 15), sliced({10, 1}, 30),
      expanded({0, 1}, 5);
  for (const StridedInput* input : {&contiguous, &sliced, &expanded, &transposed, &contiguous}) {
    const TensorView view = input->view();
    auto out = graph.Run({view});
    ASSERT_TRUE(out.ok()) << "strides " << view.strides[0] << "," << view.strides[1] << ": "
                          << out.status();
    for (int i = 0; i < 3; ++i) EXPECT_EQ((*out)[0].data<double>()[i], input->expected()[i]);
    // Into preallocated outputs too.
    Tensor output(kiln::v1::FLOAT64, {3});
    ASSERT_TRUE(graph.Run({view}, {output.view()}).ok());
    for (int i = 0; i < 3; ++i) EXPECT_EQ(output.data<double>()[i], input->expected()[i]);
  }
  EXPECT_EQ(Stats().compiles(), 1) << "only the graph as given";
  EXPECT_EQ(graph.open_entries(), 1);

  // Traced with x expanded along its rows ([3, 5] at strides [0, 5]): three
  // different rows cannot be copied into one.
  kiln::v1::Graph broadcast = TransposedSumGraph();
  broadcast.mutable_inputs(0)->mutable_type()->mutable_strides(0)->set_constant(0);
  broadcast.mutable_inputs(0)->mutable_type()->mutable_strides(1)->set_constant(1);
  CompiledGraph expanded_graph(client->get(), broadcast);
  expanded_graph.set_stride_miss(CompiledGraph::StrideMiss::kCopyToTracedLayout);
  ASSERT_TRUE(expanded_graph.Run({expanded.view()}).ok());
  EXPECT_EQ(Stats().compiles(), 2);
  auto out = expanded_graph.Run({contiguous.view()});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*out)[0].data<double>()[i], contiguous.expected()[i]);
  EXPECT_EQ(Stats().compiles(), 3) << "specialized for the contiguous layout";
}

TEST_F(EndToEndTest, SocketIsPrivateAndVersionsAreChecked) {
  struct stat info;
  ASSERT_EQ(stat(daemon_.socket_path().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600);
  ASSERT_EQ(stat(Dirname(daemon_.socket_path()).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700);

  // Hello answers any client with the daemon's own versions; every other
  // call must carry matching ones, Hello or not.
  auto channel =
      grpc::CreateChannel("unix:" + daemon_.socket_path(), grpc::InsecureChannelCredentials());
  auto stub = kiln::v1::Kiln::NewStub(channel);
  {
    grpc::ClientContext context;
    kiln::v1::HelloRequest request;
    request.set_protocol_version(999);
    request.set_abi_version(1);
    kiln::v1::HelloResponse response;
    ASSERT_TRUE(stub->Hello(&context, request, &response).ok());
    EXPECT_EQ(response.protocol_version(), kProtocolVersion);
    EXPECT_EQ(response.cache_dir(), daemon_.cache_dir());
    EXPECT_FALSE(response.auto_started());
  }
  for (const std::string protocol : {"", "999"}) {
    grpc::ClientContext context;
    if (!protocol.empty()) {
      context.AddMetadata(kProtocolMetadataKey, protocol);
      context.AddMetadata(kAbiMetadataKey, absl::StrCat(KILN_ABI_VERSION));
    }
    kiln::v1::CompileRequest request;
    *request.mutable_graph() = Example("f");
    kiln::v1::CompileResponse response;
    const grpc::Status status = stub->Compile(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(),
                HasSubstr(absl::StrCat("version mismatch: the call carries protocol ",
                                       protocol.empty() ? "none" : protocol)));
  }
  EXPECT_EQ(Stats().misses(), 0) << "a refused call reaches nothing";
}

TEST_F(EndToEndTest, KillDuringACompileLeavesAStoreThatServesAgain) {
  std::thread compile([&] {
    auto client = daemon_.Connect();
    if (!client.ok()) return;
    kiln::v1::CompileRequest request;
    *request.mutable_graph() = Example("f");
    request.mutable_options()->set_salt("killed");
    (void)(*client)->Compile(request);  // fails: the daemon dies under it
  });
  absl::SleepFor(absl::Milliseconds(30));  // the compile is under way
  daemon_.Kill(SIGKILL);
  compile.join();

  ASSERT_TRUE(daemon_.Start().ok()) << "the store reopens after SIGKILL";
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  auto list = (*client)->List();
  ASSERT_TRUE(list.ok()) << list.status();
  for (const auto& entry : list->entries()) {  // whatever made it in is whole
    auto loaded = OpenObject(daemon_.cache_dir(), entry, {geteuid()});
    EXPECT_TRUE(loaded.ok()) << loaded.status();
  }
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = Example("f");
  request.mutable_options()->set_salt("killed");
  auto again = (*client)->Compile(request);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Stats().corrupt_blobs(), 0);
}

TEST_F(EndToEndTest, SameHostHitsNeedNoDaemonAndEvictionReachesThem) {
  ASSERT_EQ(
      daemon_.RunTool({kKilnCliPath, "compile", "examples/tail.json", "--start=false"})->exit_code,
      0);
  daemon_.Kill(SIGTERM);
  auto hit = daemon_.RunTool(
      {kKilnCliPath, "run", "examples/tail.json", "--check", "--repeat=1", "--start=false"});
  ASSERT_EQ(hit->exit_code, 0) << hit->output;
  EXPECT_THAT(hit->output, HasSubstr("(cache hit, local index)"));

  ASSERT_TRUE(daemon_.Start().ok());
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Evict((*client)->List()->entries(0).key()).ok());
  auto miss =
      daemon_.RunTool({kKilnCliPath, "run", "examples/tail.json", "--repeat=1", "--start=false"});
  EXPECT_THAT(miss->output, HasSubstr("(compiled)")) << "an evicted entry is not found locally";
}

TEST_F(EndToEndTest, ADamagedObjectFileIsRepairedFromTheStore) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = Example("tail");
  auto compiled = (*client)->Compile(request);
  ASSERT_TRUE(compiled.ok());
  const std::string path = compiled->object_path();
  chmod(path.c_str(), 0644);
  ASSERT_TRUE(WriteFileAtomically(path, "not an ELF file", 0444).ok());

  CompiledGraph graph(client->get(), Example("tail"));
  auto prepared = graph.Prepare();
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_FALSE(prepared->local) << "the damaged file fails its digest check";
  EXPECT_EQ(Stats().compiles(), 1) << "repaired from the blob, not recompiled";
  EXPECT_NE(*ReadFile(path), "not an ELF file");
}

TEST_F(EndToEndTest, OneSymbolicArtifactServesEverySize) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  // relu(x + 1) / sum(relu(x + 1), dim 1) over x: [s0, 64].
  CompiledGraph graph(client->get(), Example("tail_dynamic"));
  for (int64_t rows : {2, 3, 257, 1024, 1, 5}) {
    Tensor x(kiln::v1::FLOAT32, {rows, 64});
    for (int64_t i = 0; i < rows * 64; ++i) x.data<float>()[i] = static_cast<float>(i % 7) - 2.5f;
    auto outputs = graph.Run({x.view()});
    ASSERT_TRUE(outputs.ok()) << rows << ": " << outputs.status();
    ASSERT_EQ((*outputs)[0].sizes(), (std::vector<int64_t>{rows, 64}));
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int c = 0; c < 64; ++c) sum += std::max(0.0f, x.data<float>()[r * 64 + c] + 1);
      for (int c = 0; c < 64; ++c) {
        const double want = std::max(0.0f, x.data<float>()[r * 64 + c] + 1) / sum;
        ASSERT_NEAR((*outputs)[0].data<float>()[r * 64 + c], want, 1e-6) << rows << " " << r;
      }
    }
  }
  // One artifact for every size >= 2, and the size-1 specialization.
  EXPECT_EQ(Stats().compiles(), 2);
  Tensor wrong(kiln::v1::FLOAT64, {4, 64});
  EXPECT_EQ(graph.Run({wrong.view()}).status(),
            GuardMiss("input 0 'x' has dtype FLOAT64; the graph was compiled for FLOAT32"));
}

TEST_F(EndToEndTest, RelationsAreCheckedInProcessAndABreachGetsItsOwnSpecialization) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  // tail_dynamic (x: [s0, 64]) promising 2 <= s0 <= 64 and s0 % 4 == 0.
  kiln::v1::Graph promised = Example("tail_dynamic");
  auto* range = promised.add_relations()->mutable_range();
  range->set_symbol("s0");
  range->set_max(64);
  promised.add_relations()->mutable_divisible()->set_divisor(4);
  promised.mutable_relations(1)->mutable_divisible()->set_symbol("s0");
  CompiledGraph graph(client->get(), promised);
  auto run = [&](int64_t rows) -> absl::Status {
    Tensor x(kiln::v1::FLOAT32, {rows, 64});
    for (int64_t i = 0; i < rows * 64; ++i) x.data<float>()[i] = static_cast<float>(i % 5) - 1.5f;
    auto outputs = graph.Run({x.view()});
    if (!outputs.ok()) return outputs.status();
    EXPECT_EQ((*outputs)[0].sizes(), (std::vector<int64_t>{rows, 64}));
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int c = 0; c < 64; ++c) sum += std::max(0.0f, x.data<float>()[r * 64 + c] + 1);
      const double want = std::max(0.0f, x.data<float>()[r * 64] + 1) / sum;
      EXPECT_NEAR((*outputs)[0].data<float>()[r * 64], want, 1e-6) << rows << " " << r;
    }
    return absl::OkStatus();
  };
  for (int64_t rows : {8, 12, 64}) ASSERT_TRUE(run(rows).ok()) << rows;
  EXPECT_EQ(Stats().compiles(), 1) << "one artifact for every size the relations admit";
  auto metadata = graph.artifact();
  ASSERT_TRUE(metadata.ok());
  EXPECT_EQ(metadata->guards().relations_size(), 2);
  // Each breach (not a multiple of 4, or above 64) gets an exact version,
  // up to the specialization limit; then the error names the relation.
  for (int64_t rows : {10, 128, 14, 18, 22, 26, 30}) ASSERT_TRUE(run(rows).ok()) << rows;
  EXPECT_EQ(Stats().compiles(), 8);
  EXPECT_EQ(run(34),
            GuardMiss("input 0 'x': dim 0 has size 34, so s0 = 34; the graph's relations "
                      "require 2 <= s0 <= 64 and s0 % 4 == 0; and the specialization limit "
                      "(8) is reached: add these sizes as a bucket of a warmup plan "
                      "(docs/WARMUP.md) or raise the limit "
                      "(CompiledGraph::set_specialization_limit)"));
  ASSERT_TRUE(run(16).ok()) << "sizes within the relations still run";
}

TEST_F(EndToEndTest, AClientReconnectsWhenTheDaemonRestarts) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Stats().ok());
  daemon_.Kill(SIGTERM);
  ASSERT_TRUE(daemon_.Start().ok());
  auto stats = (*client)->Stats();
  EXPECT_TRUE(stats.ok()) << "the old channel's Unavailable triggers one reconnect: "
                          << stats.status();
}

TEST_F(EndToEndTest, TheLocalIndexOfAnotherHostIsIgnored) {
  ASSERT_EQ(
      daemon_.RunTool({kKilnCliPath, "compile", "examples/tail.json", "--start=false"})->exit_code,
      0);
  // As if the cache directory were shared (NFS) with a kilnd on another
  // machine: its artifacts may be for another CPU.
  const std::string path = daemon_.cache_dir() + "/descriptor";
  const LocalIndex index(daemon_.cache_dir());
  auto descriptor = index.ReadDescriptor();
  ASSERT_TRUE(descriptor.ok() && descriptor->has_value()) << descriptor.status();
  (*descriptor)->set_machine_id("another-host");
  chmod(path.c_str(), 0644);
  ASSERT_TRUE(index.WriteDescriptor(**descriptor).ok());
  auto run =
      daemon_.RunTool({kKilnCliPath, "run", "examples/tail.json", "--repeat=1", "--start=false"});
  ASSERT_EQ(run->exit_code, 0) << run->output;
  EXPECT_THAT(run->output, HasSubstr("(cache hit)")) << "through kilnd, not the index";
}

TEST_F(EndToEndTest, SigtermShutsDownCleanly) {
  daemon_.Kill(SIGTERM);
  struct stat info;
  EXPECT_NE(stat(daemon_.socket_path().c_str(), &info), 0) << "socket removed";
  auto client = daemon_.Connect();
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(EndToEndTest, EachCommandsHelpListsItsFlagsDefaultsEnvironmentAndAnExample) {
  auto run = daemon_.RunTool({kKilnCliPath, "run", "--help"});
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->exit_code, 0);
  EXPECT_THAT(run->output, HasSubstr("Usage: kiln run GRAPH.json [FLAGS]"));
  EXPECT_THAT(run->output, HasSubstr("--repeat (default: 100)"));
  EXPECT_THAT(run->output, HasSubstr("KILN_NUM_THREADS"));
  EXPECT_THAT(run->output, HasSubstr("Example:\n  kiln run examples/f.json"));
  EXPECT_THAT(run->output, Not(HasSubstr("--asm"))) << "explain's flag is not run's";
  auto top = daemon_.RunTool({kKilnCliPath, "--help"});
  EXPECT_EQ(top->exit_code, 0);
  EXPECT_THAT(top->output, HasSubstr("  explain GRAPH.json  print each codegen stage"));
  // Arguments longer than their column put the summary on a line of its own.
  EXPECT_THAT(top->output, HasSubstr("  pin     KEY|GRAPH.json\n                      keep"));
  EXPECT_THAT(top->output, HasSubstr("KILN_CACHE_DIR"));
  auto daemon = daemon_.RunTool({kKilndPath, "--help"});
  EXPECT_THAT(daemon->output,
              HasSubstr("--compile_jobs (Compiles that may run at once.); default: 2"));
  EXPECT_THAT(daemon->output, Not(HasSubstr("No flags matched")));
}

TEST_F(EndToEndTest, EachCommandAcceptsAndListsOnlyItsOwnFlags) {
  auto gc = daemon_.RunTool({kKilnCliPath, "gc", "--help"});
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->exit_code, 0);
  EXPECT_THAT(gc->output, HasSubstr("Usage: kiln gc [FLAGS]"));
  EXPECT_THAT(gc->output, HasSubstr("--older_than (default: \"\")\n      Evict entries unused"));
  EXPECT_THAT(gc->output, HasSubstr("--dry_run (default: false)\n      List what would be removed; "
                                    "remove nothing.\n"));
  EXPECT_THAT(gc->output, Not(HasSubstr("--sort"))) << "ls's flag is not gc's";
  EXPECT_THAT(gc->output, Not(HasSubstr("prune"))) << "no other command's help";
  auto ls = daemon_.RunTool({kKilnCliPath, "ls", "--help"});
  EXPECT_THAT(ls->output, HasSubstr("--graph (default: \"\")\n      only entries whose graph name "
                                    "contains this\n"));

  auto refused = daemon_.RunTool({kKilnCliPath, "ls", "--older_than=1d", "--start=false"});
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->exit_code, 2);
  EXPECT_EQ(refused->output,
            "kiln ls: --older_than is a flag of kiln gc, not of kiln ls; `kiln ls --help` lists "
            "its flags\n");
  auto shared = daemon_.RunTool({kKilnCliPath, "status", "--nodry_run"});
  EXPECT_EQ(shared->exit_code, 2);
  EXPECT_EQ(shared->output,
            "kiln status: --dry_run is a flag of kiln gc, kiln prune, not of kiln status; `kiln "
            "status --help` lists its flags\n");
  auto unknown = daemon_.RunTool({kKilnCliPath, "gc", "--max_age", "1d"});
  EXPECT_EQ(unknown->exit_code, 2);
  EXPECT_EQ(unknown->output, "kiln gc: unknown flag --max_age; `kiln gc --help` lists its flags\n");
}

TEST_F(EndToEndTest, CliAdminCommandsListShowAndEvict) {
  ASSERT_EQ(
      daemon_.RunTool({kKilnCliPath, "compile", "examples/f.json", "--start=false"})->exit_code, 0);
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  const std::string key = (*client)->List()->entries(0).key();

  auto ls = daemon_.RunTool({kKilnCliPath, "ls", "--start=false"});
  EXPECT_THAT(ls->output, HasSubstr(key.substr(0, 16) + "  f "));
  auto ls_json = daemon_.RunTool({kKilnCliPath, "ls", "--json", "--start=false"});
  EXPECT_THAT(ls_json->output, HasSubstr("\"key\": \"" + key + "\""));
  auto show = daemon_.RunTool({kKilnCliPath, "show", key.substr(0, 10), "--start=false"});
  EXPECT_EQ(show->exit_code, 0) << show->output;
  EXPECT_THAT(show->output, HasSubstr("\"digest\": "));
  EXPECT_THAT(show->output, HasSubstr("\"compiler\": \"worker\""));
  auto stats = daemon_.RunTool({kKilnCliPath, "stats", "--json", "--start=false"});
  EXPECT_THAT(stats->output, HasSubstr("\"compiles\": \"1\""));

  auto short_key = daemon_.RunTool({kKilnCliPath, "show", "abc", "--start=false"});
  EXPECT_EQ(short_key->exit_code, 1);
  EXPECT_THAT(short_key->output,
              HasSubstr("kiln show: key 'abc' is too short: give at least 6 hex digits"));
  auto evict = daemon_.RunTool({kKilnCliPath, "evict", key.substr(0, 12), "--start=false"});
  EXPECT_EQ(evict->exit_code, 0) << evict->output;
  EXPECT_THAT(evict->output, HasSubstr("evicted " + key));
  auto gone = daemon_.RunTool({kKilnCliPath, "show", key, "--start=false"});
  EXPECT_EQ(gone->exit_code, 1);
  EXPECT_THAT(gone->output, HasSubstr("no entry with key " + key));
  EXPECT_EQ(Stats().entries(), 0);

  auto unknown = daemon_.RunTool({kKilnCliPath, "frobnicate"});
  EXPECT_EQ(unknown->exit_code, 2);
  EXPECT_THAT(unknown->output, HasSubstr("kiln: unknown command 'frobnicate'"));
  auto help = daemon_.RunTool({kKilnCliPath, "--help"});
  EXPECT_THAT(help->output, HasSubstr("explain"));
}

TEST_F(EndToEndTest, GeneratedSourceIsIdenticalAcrossProcesses) {
  auto first = daemon_.RunTool({kKilnCliPath, "explain", "examples/keep_product.json"});
  auto second = daemon_.RunTool({kKilnCliPath, "explain", "examples/keep_product.json"});
  ASSERT_EQ(first->exit_code, 0) << first->output;
  EXPECT_THAT(first->output, HasSubstr("== C++ =="));
  EXPECT_EQ(first->output, second->output);
}

TEST_F(EndToEndTest, RunIsSafeFromManyThreads) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok());
  CompiledGraph f(client->get(), Example("f"));
  Tensor x(kiln::v1::FLOAT32, {64, 64});
  for (int i = 0; i < 64 * 64; ++i) x.data<float>()[i] = static_cast<float>(i % 7) - 3;
  auto expected = f.Run({x.view()});
  ASSERT_TRUE(expected.ok());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      Tensor out(kiln::v1::FLOAT32, {64, 64});
      for (int r = 0; r < 200; ++r) {
        if (!f.Run({x.view()}, {out.view()}).ok() ||
            memcmp(out.data<float>(), (*expected)[0].data<float>(), out.NumBytes()) != 0) {
          ++mismatches;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(Stats().compiles(), 1);
}

TEST(DaemonLifecycleTest, RacingClientsAutoStartOneDaemonThatExitsWhenIdle) {
  DaemonFixture dirs;  // directories only; the clients start kilnd
  ClientOptions options;
  options.socket_path = dirs.socket_path();
  options.cache_dir = dirs.cache_dir();
  options.daemon_path = kKilndPath;
  options.daemon_idle_timeout = absl::Seconds(2);
  std::vector<int64_t> pids(4, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto client = Client::Connect(options);
      ASSERT_TRUE(client.ok()) << client.status();
      pids[i] = (*client)->daemon()->pid();
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_GT(pids[0], 0);
  for (int64_t pid : pids) EXPECT_EQ(pid, pids[0]) << "one daemon for all";

  // Idle for 2 s, it exits on its own (it is not our child: poll its pid).
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  while (kill(pids[0], 0) == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(100));
  EXPECT_NE(kill(pids[0], 0), 0) << "kilnd outlived its idle timeout";
}

}  // namespace
}  // namespace kiln
