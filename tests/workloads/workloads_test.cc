// Every public workload, traced from PyTorch, compiled through a real kilnd
// and run from the C++ client, against eager PyTorch's outputs.
#include <cstdlib>
#include <new>

#include "absl/strings/str_cat.h"
#include "client/compiled_graph.h"
#include "client/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/graph_file.h"
#include "tests/daemon_fixture.h"
#include "tools/reference/tensor_data.h"

// Every C++ allocation on this thread, counted (the test below checks that
// a steady-state Run makes none). Other threads (gRPC's) are not counted.
thread_local long long allocations_on_this_thread = 0;

void* operator new(std::size_t size) {
  ++allocations_on_this_thread;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace kiln {
namespace {

constexpr char kTraced[] = "tests/workloads/";

class WorkloadsTest : public SharedDaemonTest<std::string> {
 protected:
  // Compiles and runs `name` on its reference inputs; checks the outputs.
  static void RunAndCompare(const std::string& name, const std::string& reference_suffix = "",
                            CompiledGraph* reuse = nullptr) {
    auto graph = ReadGraphFile(absl::StrCat(kTraced, name, ".json"));
    ASSERT_TRUE(graph.ok()) << graph.status();
    auto reference =
        ReadReferenceFile(absl::StrCat(kTraced, name, ".ref", reference_suffix, ".json"));
    ASSERT_TRUE(reference.ok()) << reference.status();
    std::vector<Tensor> inputs;
    std::vector<TensorView> views;
    for (const auto& data : reference->inputs()) {
      auto tensor = ToTensor(data);
      ASSERT_TRUE(tensor.ok()) << tensor.status();
      inputs.push_back(*std::move(tensor));
    }
    for (const Tensor& input : inputs) views.push_back(input.view());
    CompiledGraph own(client_, *graph);
    CompiledGraph& compiled = reuse != nullptr ? *reuse : own;
    auto outputs = compiled.Run(views);
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    ASSERT_EQ(static_cast<int>(outputs->size()), reference->outputs_size());
    for (size_t k = 0; k < outputs->size(); ++k) {
      const Tensor& output = (*outputs)[k];
      EXPECT_TRUE(CompareToReference(absl::StrCat(name, " output ", k), output,
                                     reference->outputs(k), DefaultTolerance(output.dtype()))
                      .ok())
          << CompareToReference(absl::StrCat(name, " output ", k), output, reference->outputs(k),
                                DefaultTolerance(output.dtype()));
    }
  }
};

TEST_P(WorkloadsTest, MatchesEagerPyTorch) { RunAndCompare(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Public, WorkloadsTest,
                         ::testing::Values("f", "keep_product", "tail", "edge_values", "softmax",
                                           "gelu", "gelu_tanh", "layer_norm", "attention", "mlp",
                                           "transformer_layer", "loss_grad", "mlp_train",
                                           "resnet18", "resnet18_b8", "mobilenet_v3_small"));

class DynamicWorkloadsTest : public WorkloadsTest {};

// One symbolic artifact for every size >= 2 of the batch or sequence dim,
// and a static one for 1.
TEST_P(DynamicWorkloadsTest, OneArtifactServesEverySize) {
  const std::string name = absl::StrCat("dynamic/", GetParam());
  auto graph = ReadGraphFile(absl::StrCat(kTraced, name, ".json"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  CompiledGraph compiled(client_, *graph);
  const int64_t before = client_->Stats()->compiles();
  // As tests/workloads/BUILD.bazel traces them (sequence and batch at once
  // only up to 33: at 257 the attention scores alone are 271 MB).
  const std::vector<int> sizes = GetParam() == "transformer_layer_both"
                                     ? std::vector<int>{2, 3, 33, 1}
                                     : std::vector<int>{2, 3, 257, 1024, 1};
  for (int size : sizes) {
    SCOPED_TRACE(absl::StrCat(name, " at size ", size));
    RunAndCompare(name, absl::StrCat(".", size), &compiled);
  }
  EXPECT_EQ(client_->Stats()->compiles() - before, 2);
}

INSTANTIATE_TEST_SUITE_P(Public, DynamicWorkloadsTest,
                         ::testing::Values("attention", "attention_seq", "f", "gelu", "gelu_tanh",
                                           "keep_product", "layer_norm", "loss_grad", "mlp",
                                           "softmax", "tail", "transformer_layer",
                                           "transformer_layer_batch", "transformer_layer_both"));

// Buffer planning's promise: with preallocated outputs, a steady-state Run
// allocates nothing — no scratch (the thread's arena is reused), no packed
// GEMM operands or symbolic row buffers (thread-local buffers), no pointer
// arrays — at 1 thread and at 2 (the pool's workers and the syrk/bmm
// splits), for static and symbolic artifacts. Kiln's own code, that is:
// oneDNN allocates inside each call (its argument map, its kernels'
// bookkeeping), so GEMMs run on OpenBLAS here.
TEST_F(WorkloadsTest, SteadyStateRunsAllocateNothing) {
  for (int threads : {1, 2}) {
    Runtime runtime(threads, GemmLibraries::kOpenBlas);
    for (const char* name : {"f", "attention", "mlp", "transformer_layer", "layer_norm",
                             "dynamic/attention_seq", "dynamic/transformer_layer"}) {
      SCOPED_TRACE(absl::StrCat(name, " at ", threads, " threads"));
      auto graph = ReadGraphFile(absl::StrCat(kTraced, name, ".json"));
      ASSERT_TRUE(graph.ok()) << graph.status();
      auto reference = ReadReferenceFile(absl::StrCat(kTraced, name, ".ref.json"));
      ASSERT_TRUE(reference.ok()) << reference.status();
      std::vector<Tensor> inputs;
      std::vector<TensorView> views, output_views;
      for (const auto& data : reference->inputs()) inputs.push_back(*ToTensor(data));
      for (const Tensor& input : inputs) views.push_back(input.view());
      CompiledGraph compiled(client_, *graph, {}, &runtime);
      auto outputs = compiled.Run(views);  // compiles, loads, grows the arena
      ASSERT_TRUE(outputs.ok()) << outputs.status();
      for (const Tensor& output : *outputs) output_views.push_back(output.view());
      ASSERT_TRUE(compiled.Run(views, output_views).ok());
      const long long before = allocations_on_this_thread;
      for (int i = 0; i < 20; ++i) ASSERT_TRUE(compiled.Run(views, output_views).ok());
      EXPECT_EQ(allocations_on_this_thread - before, 0);
    }
  }
}

// The transformer layer (src: [S, B, 64]) never mixes positions along its
// batch: a batch between warmed buckets runs the next larger one, padded,
// and matches eager. Its sequence dim is refused: attention's softmax (and
// its test for fully masked rows, which comes first) reduces over it.
TEST_F(WorkloadsTest, TheTransformerLayerPadsItsBatchButNotItsSequence) {
  const std::string name = "dynamic/transformer_layer_both";
  auto graph = ReadGraphFile(absl::StrCat(kTraced, name, ".json"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto buckets = [](bool pad_sequence) {
    kiln::v1::WarmupGraph entry;
    auto* batch = entry.add_symbols();
    batch->set_symbol("B");
    batch->set_paddable(!pad_sequence);
    for (int64_t size : {2, 4}) batch->add_sizes(size);
    auto* sequence = entry.add_symbols();
    sequence->set_symbol("S");
    sequence->set_paddable(pad_sequence);
    sequence->add_sizes(3);
    return entry;
  };
  CompiledGraph compiled(client_, *graph);
  const absl::StatusOr<CompiledGraph::WarmupResult> refused = compiled.Warmup(buckets(true));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("symbol S is not paddable: node "));
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("(aten.sum.dim_IntList, 'sum_1'): reduces over dim 3"));
  const int64_t before = client_->Stats()->compiles();
  auto warmed = compiled.Warmup(buckets(false));
  ASSERT_TRUE(warmed.ok()) << warmed.status();
  EXPECT_EQ(warmed->padded_symbols, std::vector<std::string>{"B"});
  EXPECT_EQ(client_->Stats()->compiles() - before, 2) << "S = 3 with B = 2 and 4";
  RunAndCompare(name, ".3", &compiled);  // S = B = 3: B padded to 4
  EXPECT_EQ(client_->Stats()->compiles() - before, 2) << "the padded call compiled nothing";
}

TEST_F(WorkloadsTest, OtherWeightsReuseTheArtifact) {
  RunAndCompare("mlp");
  const int64_t compiles = client_->Stats()->compiles();
  RunAndCompare("mlp_reweighted");  // weights are inputs: same graph, same key
  const auto stats = client_->Stats();
  EXPECT_EQ(stats->compiles(), compiles) << "different weights must not recompile";
  EXPECT_GE(stats->hits(), 1);
}

}  // namespace
}  // namespace kiln
