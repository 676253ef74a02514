// kilnd's padding proof for a warmup entry: the dims of each paddable
// symbol, or the node or input that forbids padding it.
#include "daemon/padding_proof.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

constexpr int64_t kMaxNodes = 1000;

kiln::v1::TensorType TypeB4() {
  kiln::v1::TensorType type;
  type.set_dtype(kiln::v1::FLOAT32);
  type.add_sizes()->set_symbol("B");
  type.add_sizes()->set_constant(4);
  return type;
}

// x: [B, 4] -> op(x), of type `result`.
kiln::v1::Graph OneNodeGraph(const std::string& op, const std::string& name,
                             std::vector<kiln::v1::Argument> args,
                             const kiln::v1::TensorType& result) {
  kiln::v1::Graph graph;
  kiln::v1::Input* input = graph.add_inputs();
  input->set_value(0);
  input->set_name("x");
  *input->mutable_type() = TypeB4();
  kiln::v1::Node* node = graph.add_nodes();
  node->set_op(op);
  node->set_name(name);
  node->add_inputs(0);
  for (auto& arg : args) *node->add_args() = std::move(arg);
  node->add_outputs(1);
  *node->add_output_types() = result;
  graph.add_outputs(1);
  return graph;
}

kiln::v1::Graph ReluGraph() { return OneNodeGraph("aten.relu.default", "relu", {}, TypeB4()); }

kiln::v1::Graph SumOverBGraph() {
  kiln::v1::Argument dim;
  dim.set_name("dim");
  dim.mutable_int_list()->add_values(0);
  kiln::v1::TensorType result;
  result.set_dtype(kiln::v1::FLOAT32);
  result.add_sizes()->set_constant(4);
  return OneNodeGraph("aten.sum.dim_IntList", "sum", {dim}, result);
}

kiln::v1::PaddingRequest Request(kiln::v1::Graph graph, const std::string& symbol, bool paddable) {
  kiln::v1::PaddingRequest request;
  *request.mutable_graph() = std::move(graph);
  kiln::v1::SymbolSizes* sizes = request.mutable_entry()->add_symbols();
  sizes->set_symbol(symbol);
  sizes->add_sizes(8);
  sizes->add_sizes(2);
  sizes->set_paddable(paddable);
  return request;
}

TEST(ProvePaddingTest, AReluOverBIsPaddable) {
  auto proof = ProvePadding(Request(ReluGraph(), "B", true), kMaxNodes);
  ASSERT_TRUE(proof.ok()) << proof.status();
  EXPECT_EQ(proof->ShortDebugString(), "symbols { symbol: \"B\" input_dims: 0 output_dims: 0 }");
}

TEST(ProvePaddingTest, SymbolsNotMarkedPaddableAreLeftOut) {
  auto proof = ProvePadding(Request(SumOverBGraph(), "B", false), kMaxNodes);
  ASSERT_TRUE(proof.ok()) << proof.status();
  EXPECT_EQ(proof->symbols_size(), 0);
}

TEST(ProvePaddingTest, ASumOverBIsRefusedNamingTheNode) {
  EXPECT_EQ(ProvePadding(Request(SumOverBGraph(), "B", true), kMaxNodes).status(),
            absl::FailedPreconditionError(
                "symbol B is not paddable: node 0 (aten.sum.dim_IntList, 'sum'): reduces over "
                "dim 0, which carries symbol s0: padding s0 would change the result"));
}

TEST(ProvePaddingTest, PaddingNeedsStaticBuckets) {
  kiln::v1::PaddingRequest request = Request(ReluGraph(), "B", true);
  request.mutable_entry()->set_serve(kiln::v1::WarmupGraph::SERVE_SYMBOLIC);
  EXPECT_EQ(ProvePadding(request, kMaxNodes).status(),
            absl::InvalidArgumentError(
                "symbol B is paddable, which needs static buckets (SERVE_STATIC)"));
}

TEST(ProvePaddingTest, AGraphOverTheNodeBudgetIsRefused) {
  EXPECT_EQ(ProvePadding(Request(ReluGraph(), "B", true), /*max_graph_nodes=*/0).status(),
            absl::InvalidArgumentError("the graph has 1 nodes, over the limit max_graph_nodes = 0 "
                                       "(kilnd --max_graph_nodes)"));
}

TEST(ProvePaddingTest, ASymbolNotInTheGraphIsRefused) {
  EXPECT_EQ(ProvePadding(Request(ReluGraph(), "S", true), kMaxNodes).status(),
            absl::InvalidArgumentError("symbol S names no dim of the graph's inputs"));
}

}  // namespace
}  // namespace kiln
