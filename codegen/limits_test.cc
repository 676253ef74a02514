// No graph can crash or exhaust codegen: long chains go through the whole
// pipeline without recursion that grows with them, and every limit of
// limits.h is refused by name and value.
#include "codegen/limits.h"

#include <dlfcn.h>
#include <pthread.h>

#include <functional>
#include <string>
#include <vector>

#include "abi/kiln_abi.h"
#include "absl/strings/str_cat.h"
#include "codegen/compile/subprocess_compiler.h"
#include "codegen/passes/schedule.h"
#include "codegen/pipeline.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

kiln::v1::TensorType Type(const std::vector<int64_t>& sizes,
                          kiln::v1::DType dtype = kiln::v1::FLOAT32) {
  kiln::v1::TensorType type;
  type.set_dtype(dtype);
  for (int64_t size : sizes) type.add_sizes()->set_constant(size);
  return type;
}

// Builds graphs in order; value ids are 0, 1, 2, ...
class GraphMaker {
 public:
  int Input(const kiln::v1::TensorType& type, const std::string& name = "x") {
    kiln::v1::Input* input = graph_.add_inputs();
    input->set_value(next_);
    input->set_name(name);
    *input->mutable_type() = type;
    return next_++;
  }
  // A node of one result; returns its value id.
  int Node(const std::string& op, const std::vector<int>& inputs, const kiln::v1::TensorType& type,
           const std::vector<kiln::v1::Argument>& args = {}) {
    kiln::v1::Node* node = graph_.add_nodes();
    node->set_op(op);
    node->set_name(absl::StrCat("n", graph_.nodes_size() - 1));
    for (int input : inputs) node->add_inputs(input);
    for (const kiln::v1::Argument& arg : args) *node->add_args() = arg;
    node->add_outputs(next_);
    *node->add_output_types() = type;
    return next_++;
  }
  kiln::v1::Graph Finish(int output) {
    graph_.add_outputs(output);
    return graph_;
  }

 private:
  kiln::v1::Graph graph_;
  int next_ = 0;
};

kiln::v1::Argument IntList(const std::string& name, const std::vector<int64_t>& values) {
  kiln::v1::Argument arg;
  arg.set_name(name);
  for (int64_t value : values) arg.mutable_int_list()->add_values(value);
  return arg;
}

// relu, neg, relu, ... over a [8, 16] input: one fused loop.
kiln::v1::Graph PointwiseChain(int length) {
  GraphMaker maker;
  int value = maker.Input(Type({8, 16}));
  for (int n = 0; n < length; ++n) {
    value = maker.Node(n % 2 ? "aten.neg.default" : "aten.relu.default", {value}, Type({8, 16}));
  }
  return maker.Finish(value);
}

// t, t, t, ... (views: composed affine maps), then one relu.
kiln::v1::Graph TransposeChain(int length) {
  GraphMaker maker;
  int value = maker.Input(Type({8, 16}));
  for (int n = 0; n < length; ++n) {
    value = maker.Node("aten.t.default", {value}, n % 2 ? Type({8, 16}) : Type({16, 8}));
  }
  const kiln::v1::TensorType last = length % 2 ? Type({16, 8}) : Type({8, 16});
  return maker.Finish(maker.Node("aten.relu.default", {value}, last));
}

// Reshapes back and forth (aliases of aliases), then one relu.
kiln::v1::Graph ReshapeChain(int length) {
  GraphMaker maker;
  int value = maker.Input(Type({8, 16}));
  for (int n = 0; n < length; ++n) {
    const std::vector<int64_t> sizes =
        n % 2 ? std::vector<int64_t>{8, 16} : std::vector<int64_t>{128};
    value = maker.Node("aten.view.default", {value}, Type(sizes), {IntList("size", sizes)});
  }
  const kiln::v1::TensorType last = length % 2 ? Type({128}) : Type({8, 16});
  return maker.Finish(maker.Node("aten.relu.default", {value}, last));
}

absl::StatusOr<GeneratedCode> PrepareAndGenerate(const kiln::v1::Graph& graph) {
  auto prepared = PrepareGraph(graph);
  if (!prepared.ok()) return prepared.status();
  CodegenInputs inputs;
  inputs.graph = *std::move(prepared);
  return GenerateCode(inputs);
}

// Runs `fn` on a thread with a `stack_bytes` stack: a recursion as deep as
// a long chain would overflow it.
void RunWithStack(size_t stack_bytes, std::function<void()> fn) {
  pthread_attr_t attributes;
  ASSERT_EQ(pthread_attr_init(&attributes), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attributes, stack_bytes), 0);
  pthread_t thread;
  auto run = [](void* arg) -> void* {
    (*static_cast<std::function<void()>*>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attributes, run, &fn), 0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  pthread_attr_destroy(&attributes);
}

TEST(LongChainsTest, PointwiseChainsAreSplitIntoFunctionsOfAtMostKMaxFusedCalls) {
  for (int length : {5000, 100000}) {
    auto code = PrepareAndGenerate(PointwiseChain(length));
    ASSERT_TRUE(code.ok()) << code.status();
    // A kernel of kMaxFusedCalls nodes per function, each node a named
    // temporary: no nested expression.
    const int64_t functions = (length + kMaxFusedCalls - 1) / kMaxFusedCalls;
    EXPECT_NE(code->source.find(absl::StrCat("static void kiln_group_", functions - 1, "(")),
              std::string::npos);
    EXPECT_EQ(code->source.find(absl::StrCat("static void kiln_group_", functions, "(")),
              std::string::npos);
    EXPECT_NE(code->source.find(
                  absl::StrCat(" float v", kMaxFusedCalls, " = (-v", kMaxFusedCalls - 1, ");")),
              std::string::npos);
    EXPECT_EQ(code->source.find(absl::StrCat(" float v", kMaxFusedCalls + 1, " =")),
              std::string::npos);
  }
}

TEST(LongChainsTest, ChainsNeedNoStackThatGrowsWithThem) {
  // 256 KB: a few hundred bytes per level of a recursion would need
  // megabytes for 5,000 levels.
  for (auto make : {PointwiseChain, TransposeChain, ReshapeChain}) {
    RunWithStack(256 << 10, [&] {
      auto code = PrepareAndGenerate(make(5000));
      EXPECT_TRUE(code.ok()) << code.status();
    });
  }
}

TEST(LongChainsTest, AChainOfSelfAddsIsExpandedOncePerLevel) {
  // y = x + x, 64 times: expanding each operand separately is 2^64 work.
  GraphMaker maker;
  int value = maker.Input(Type({8, 16}));
  for (int n = 0; n < 64; ++n) value = maker.Node("aten.add.Tensor", {value, value}, Type({8, 16}));
  auto code = PrepareAndGenerate(maker.Finish(value));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_NE(code->source.find("float v64 = (v63 + v63);"), std::string::npos);
}

TEST(LongChainsTest, ARealizedChainInOneKernelGroupIsPlannedInLinearTime) {
  // x = x * relu(x), 20,000 times: every x is read twice, so realized, and
  // every kernel is row-local, so groups as long as kMaxFusedCalls allows.
  // Checking each kernel against the whole group was ~n^3 in its length.
  GraphMaker maker;
  int value = maker.Input(Type({8, 16}));
  for (int n = 0; n < 20000; ++n) {
    const int relu = maker.Node("aten.relu.default", {value}, Type({8, 16}));
    value = maker.Node("aten.mul.Tensor", {value, relu}, Type({8, 16}));
  }
  auto code = PrepareAndGenerate(maker.Finish(value));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_NE(code->source.find("static void kiln_group_0("), std::string::npos);
}

TEST(LongChainsTest, A5000NodeChainCompilesWithClang) {
  auto code = PrepareAndGenerate(PointwiseChain(5000));
  ASSERT_TRUE(code.ok()) << code.status();
  auto work = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(work.ok()) << work.status();
  SubprocessCompiler compiler(*work, absl::Seconds(240));
  auto object = compiler.Compile(code->source, kiln::v1::TARGET_NATIVE);
  EXPECT_TRUE(object.ok()) << object.status();
}

// add 1, then relu, relu, ... over a [8, 16] input: `length` nodes.
kiln::v1::Graph ReluChainAfterAnAdd(int length) {
  kiln::v1::Argument one;
  one.set_name("other");
  one.set_float_value(1.0);
  GraphMaker maker;
  int value = maker.Node("aten.add.Tensor", {maker.Input(Type({8, 16}))}, Type({8, 16}), {one});
  for (int n = 1; n < length; ++n) value = maker.Node("aten.relu.default", {value}, Type({8, 16}));
  return maker.Finish(value);
}

void RunSerially(void* /*context*/, kiln_int64 n, kiln_int64 /*grain*/, kiln_parallel_body body,
                 void* closure) {
  body(closure, 0, n);
}

TEST(LongChainsTest, AChainAtKilndsNodeBudgetCompilesWithClangAndRuns) {
  // clang++ used to try folding const locals through the whole chain, each
  // relu's twice: super-linear time, then a crash.
  const int length = limits::kDefaultMaxGraphNodes;
  auto code = PrepareAndGenerate(ReluChainAfterAnAdd(length));
  ASSERT_TRUE(code.ok()) << code.status();
  auto work = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(work.ok()) << work.status();
  SubprocessCompiler compiler(*work, absl::Seconds(120));
  const absl::Time start = absl::Now();
  auto object = compiler.Compile(code->source, kiln::v1::TARGET_NATIVE);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));

  const std::string path = *work + "/chain.so";
  ASSERT_TRUE(WriteFileAtomically(path, object->shared_object, 0500).ok());
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto info = reinterpret_cast<kiln_info_fn>(dlsym(handle, "kiln_info"));
  auto run = reinterpret_cast<kiln_run_fn>(dlsym(handle, "kiln_run"));
  ASSERT_NE(info, nullptr);
  ASSERT_NE(run, nullptr);
  kiln_runtime runtime = {};
  runtime.abi_version = KILN_ABI_VERSION;
  runtime.parallel_for = RunSerially;
  std::vector<float> x(8 * 16), y(8 * 16, -1);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 64;
  std::vector<char> scratch(info()->scratch_bytes + 64);
  void* inputs[] = {x.data()};
  void* outputs[] = {y.data()};
  void* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64);
  ASSERT_EQ(run(&runtime, nullptr, inputs, outputs, aligned), 0);
  dlclose(handle);
  RemoveRecursively(*work).IgnoreError();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], std::max(x[i] + 1, 0.0f)) << i;
}

// The status of preparing `graph`.
absl::Status Prepare(const kiln::v1::Graph& graph) { return PrepareGraph(graph).status(); }

void ExpectRefused(const absl::Status& status, const std::string& message) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(message));
}

TEST(LimitsTest, NodesPerGraph) {
  ExpectRefused(Prepare(PointwiseChain(limits::kMaxNodes + 1)),
                "the graph's nodes has 131073, over the limit kMaxNodes = 131072");
}

TEST(LimitsTest, NameLengths) {
  kiln::v1::Graph graph = PointwiseChain(2);
  graph.set_name(std::string(50 << 20, 'g'));
  ExpectRefused(Prepare(graph),
                "the graph name is 52428800 bytes long, over the limit kMaxNameLength = 1024");
  graph = PointwiseChain(2);
  graph.mutable_inputs(0)->set_name(std::string(1025, 'x'));
  ExpectRefused(Prepare(graph),
                "input 0's name is 1025 bytes long, over the limit kMaxNameLength = 1024");
  graph = PointwiseChain(2);
  graph.mutable_nodes(1)->set_name(std::string(2000, 'n'));
  ExpectRefused(Prepare(graph),
                "node 1's name is 2000 bytes long, over the limit kMaxNameLength = 1024");
  graph = PointwiseChain(2);
  graph.mutable_nodes(1)->set_op(std::string(4096, 'o'));
  ExpectRefused(Prepare(graph),
                "node 1's op is 4096 bytes long, over the limit kMaxNameLength = 1024");
  graph = PointwiseChain(2);
  graph.mutable_inputs(0)->mutable_type()->mutable_sizes(0)->set_symbol(std::string(1500, 's'));
  ExpectRefused(Prepare(graph), "a symbol name is 1500 bytes long, over the limit kMaxNameLength");
}

TEST(LimitsTest, Rank) {
  GraphMaker maker;
  const int x = maker.Input(Type(std::vector<int64_t>(33, 1)));
  ExpectRefused(Prepare(maker.Finish(x)), "input 0 'x': rank 33, over the limit kMaxRank = 32");
}

TEST(LimitsTest, ElementsPerTensor) {
  GraphMaker maker;
  const int x = maker.Input(Type({int64_t{1} << 41}, kiln::v1::BOOL));
  ExpectRefused(Prepare(maker.Finish(x)),
                "input 0 'x': bool[2199023255552] has 2199023255552 elements, over the limit "
                "kMaxTensorElements = 1099511627776");
}

// expand(x, size) with the result declared as what eager would say.
kiln::v1::Graph Expand(const std::vector<int64_t>& input, const std::vector<int64_t>& size) {
  GraphMaker maker;
  const int x = maker.Input(Type(input));
  return maker.Finish(maker.Node("aten.expand.default", {x}, Type(size), {IntList("size", size)}));
}

TEST(LimitsTest, BytesPerTensorAreCountedWithoutOverflow) {
  ExpectRefused(Prepare(Expand({1, 8}, {int64_t{1} << 62, 8})),
                "node 0 'n0' (aten.expand.default) output 0: float32[4611686018427387904, 8] has "
                "more than 9223372036854775807 elements, over the limit kMaxTensorElements = "
                "1099511627776");
  ExpectRefused(Prepare(Expand({1, 1 << 20}, {1 << 20, 1 << 20})),
                "node 0 'n0' (aten.expand.default) output 0: float32[1048576, 1048576] has "
                "4398046511104 bytes, over the limit kMaxTensorBytes = 1099511627776");
  // A zero dim does not hide the others: their loops and strides remain.
  ExpectRefused(Prepare(Expand({1, 1}, {0, int64_t{1} << 45})), "has 35184372088832 elements");
  EXPECT_TRUE(Prepare(Expand({1, 8}, {1 << 20, 8})).ok());
}

TEST(LimitsTest, SymbolsCountAtTheirLeastValue) {
  GraphMaker maker;
  kiln::v1::TensorType type = Type({int64_t{1} << 38, 1});
  type.mutable_sizes(1)->set_symbol("S");
  type.mutable_sizes(1)->set_multiplier(4);
  const int x = maker.Input(type);
  ExpectRefused(Prepare(maker.Finish(x)),
                "input 0 'x': float32[274877906944, 4*S] (its symbols at 2) has 2199023255552 "
                "elements, over the limit kMaxTensorElements");
}

TEST(LimitsTest, StridesSpanAtMostATensor) {
  GraphMaker maker;
  kiln::v1::TensorType type = Type({4, 4});
  type.add_strides()->set_constant(int64_t{1} << 39);
  type.add_strides()->set_constant(1);
  const int x = maker.Input(type);
  ExpectRefused(Prepare(maker.Finish(x)),
                "input 0 'x': strides span 1649267441668 elements of memory, over the limit "
                "kMaxTensorElements");
}

TEST(LimitsTest, ListLengthsAndResultsPerNode) {
  kiln::v1::Graph graph = Expand({1, 8}, {4, 8});
  for (int i = 0; i < limits::kMaxListLength; ++i) {
    graph.mutable_nodes(0)->mutable_args(0)->mutable_int_list()->add_values(1);
  }
  ExpectRefused(Prepare(graph),
                "node 0 'n0' (aten.expand.default): argument 'size' has 4098, "
                "over the limit kMaxListLength = 4096");

  graph = PointwiseChain(1);
  for (int k = 0; k < limits::kMaxResultsPerNode; ++k) graph.mutable_nodes(0)->add_outputs(100 + k);
  ExpectRefused(Prepare(graph),
                "node 0's results has 4097, over the limit kMaxResultsPerNode = 4096");

  // unbind of a dim longer than that is refused before any view is made.
  GraphMaker maker;
  const int x = maker.Input(Type({1 << 20, 2}));
  kiln::v1::Argument dim;
  dim.set_name("dim");
  dim.set_int_value(0);
  graph = maker.Finish(maker.Node("aten.unbind.int", {x}, Type({2}), {dim}));
  ExpectRefused(Prepare(graph), "the unbind has 1048576, over the limit kMaxResultsPerNode = 4096");
}

TEST(LimitsTest, SymbolsAndRelations) {
  GraphMaker maker;
  const int x = maker.Input(Type({}));
  kiln::v1::Graph graph = maker.Finish(x);
  for (int i = 0; i <= limits::kMaxSymbols; ++i) {
    kiln::v1::Input* input = graph.add_inputs();
    input->set_value(1000 + i);
    input->mutable_type()->set_dtype(kiln::v1::FLOAT32);
    input->mutable_type()->add_sizes()->set_symbol(absl::StrCat("s", i));
  }
  ExpectRefused(Prepare(graph), "the graph's symbols has 1025, over the limit kMaxSymbols = 1024");

  graph = maker.Finish(x);
  for (int r = 0; r <= limits::kMaxRelations; ++r) graph.add_relations();
  ExpectRefused(Prepare(graph),
                "the graph's relations has 1025, over the limit kMaxRelations = 1024");
}

TEST(LimitsTest, ReshapeSizesThatOverflowAreRefused) {
  GraphMaker maker;
  const int x = maker.Input(Type({16}));
  // 16 * (2^60 + 1) wraps to 16 in 64 bits.
  const std::vector<int64_t> size = {16, (int64_t{1} << 60) + 1};
  kiln::v1::Graph graph =
      maker.Finish(maker.Node("aten.view.default", {x}, Type({16}), {IntList("size", size)}));
  ExpectRefused(Prepare(graph), "cannot reshape 16 elements to sizes whose product overflows");
}

// x: [S], expanded to [S, S] and returned.
absl::StatusOr<ir::Graph> SquareOfASymbol(kiln::v1::DType dtype = kiln::v1::FLOAT32) {
  GraphMaker maker;
  kiln::v1::TensorType vector;
  vector.set_dtype(dtype);
  vector.add_sizes()->set_symbol("S");
  const int x = maker.Input(vector);
  kiln::v1::TensorType square = vector;
  *square.add_sizes() = vector.sizes(0);
  kiln::v1::Argument size;
  size.set_name("size");
  for (int d = 0; d < 2; ++d) {
    auto* term = size.mutable_sym_int_list()->add_values()->add_terms();
    term->set_coefficient(1);
    term->add_symbols("S");
  }
  return PrepareGraph(maker.Finish(maker.Node("aten.expand.default", {x}, square, {size})));
}

TEST(RunTimeSizesTest, EveryTensorAtTheBoundSymbolsIsWithinTheLimits) {
  auto graph = SquareOfASymbol();
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_TRUE(limits::CheckRunTimeSizes(*graph, {1 << 19}).ok());
  // The input is 2^21 elements; the expanded result 2^42.
  ExpectRefused(limits::CheckRunTimeSizes(*graph, {1 << 21}),
                "node 0 'n0' (aten.expand.default) result 0: float32[s0, s0] at s0 = 2097152 "
                "has 4398046511104 elements, over the limit kMaxTensorElements = 1099511627776");
  // Each dim fits; their product overflows int64.
  auto bools = SquareOfASymbol(kiln::v1::BOOL);
  ASSERT_TRUE(bools.ok()) << bools.status();
  ExpectRefused(limits::CheckRunTimeSizes(*bools, {int64_t{1} << 40}),
                "node 0 'n0' (aten.expand.default) result 0: bool[s0, s0] at s0 = 1099511627776 "
                "has more than 9223372036854775807 elements");
  ExpectRefused(limits::CheckRunTimeSizes(*graph, {int64_t{1} << 62}),
                "input 0 'x': dim 0 of float32[s0] at s0 = 4611686018427387904 is "
                "4611686018427387904, over the limit kMaxTensorElements");
  ExpectRefused(limits::CheckRunTimeSizes(*graph, {}), "0 symbol values for 1 symbols");
}

TEST(RunTimeSizesTest, BytesCountTheDType) {
  GraphMaker maker;
  kiln::v1::TensorType type = Type({64}, kiln::v1::FLOAT64);
  type.mutable_sizes(0)->set_symbol("S");
  const int x = maker.Input(type);
  auto graph = PrepareGraph(maker.Finish(maker.Node("aten.neg.default", {x}, type)));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_TRUE(limits::CheckRunTimeSizes(*graph, {int64_t{1} << 37}).ok());
  ExpectRefused(limits::CheckRunTimeSizes(*graph, {(int64_t{1} << 37) + 1}),
                "input 0 'x': float64[s0] at s0 = 137438953473 has 1099511627784 bytes, over "
                "the limit kMaxTensorBytes = 1099511627776");
}

TEST(RunTimeSizesTest, TheLargestSafeSymbolValueIsTheEdgeOfTheCheck) {
  // float32[s0, s0]: s0 * s0 elements of 4 bytes stay within 2^40 bytes up
  // to s0 = 2^19.
  auto square = SquareOfASymbol();
  ASSERT_TRUE(square.ok()) << square.status();
  EXPECT_EQ(limits::LargestSafeSymbolValue(limits::RunTimeSizesOf(*square)), int64_t{1} << 19);
  EXPECT_TRUE(limits::CheckRunTimeSizes(*square, {int64_t{1} << 19}).ok());
  EXPECT_FALSE(limits::CheckRunTimeSizes(*square, {(int64_t{1} << 19) + 1}).ok());
}

}  // namespace
}  // namespace kiln
