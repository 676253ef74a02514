#include "codegen/symbol_independence.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "codegen/prepare.h"
#include "gtest/gtest.h"
#include "proto/graph_file.h"

namespace kiln {
namespace {

// A dim written "8", "B" or "4*B".
kiln::v1::Dim ParseDim(const std::string& text) {
  kiln::v1::Dim dim;
  int64_t constant = 0;
  if (absl::SimpleAtoi(text, &constant)) {
    dim.set_constant(constant);
    return dim;
  }
  const std::vector<std::string> factors = absl::StrSplit(text, '*');
  if (factors.size() == 2) {
    EXPECT_TRUE(absl::SimpleAtoi(factors[0], &constant)) << text;
    dim.set_multiplier(constant);
  }
  dim.set_symbol(factors.back());
  return dim;
}

// Sizes written "B, 4, 8".
kiln::v1::TensorType Type(const std::string& sizes) {
  kiln::v1::TensorType type;
  type.set_dtype(kiln::v1::FLOAT32);
  for (absl::string_view size : absl::StrSplit(sizes, ", ", absl::SkipEmpty())) {
    *type.add_sizes() = ParseDim(std::string(size));
  }
  return type;
}

kiln::v1::Argument IntArg(const std::string& name, int64_t value) {
  kiln::v1::Argument arg;
  arg.set_name(name);
  arg.set_int_value(value);
  return arg;
}

kiln::v1::Argument IntListArg(const std::string& name, const std::vector<int64_t>& values) {
  kiln::v1::Argument arg;
  arg.set_name(name);
  for (int64_t value : values) arg.mutable_int_list()->add_values(value);
  return arg;
}

// A view's sizes as symbolic expressions, "4*B, 8".
kiln::v1::Argument SizeArg(const std::string& sizes) {
  kiln::v1::Argument arg;
  arg.set_name("size");
  const kiln::v1::TensorType type = Type(sizes);
  for (const kiln::v1::Dim& dim : type.sizes()) {
    kiln::v1::SymExpr::Term* term = arg.mutable_sym_int_list()->add_values()->add_terms();
    if (dim.has_symbol()) {
      term->set_coefficient(dim.multiplier() == 0 ? 1 : dim.multiplier());
      term->add_symbols(dim.symbol());
    } else {
      term->set_coefficient(dim.constant());
    }
  }
  return arg;
}

kiln::v1::Argument NoneArg(const std::string& name) {
  kiln::v1::Argument arg;
  arg.set_name(name);
  arg.set_none(true);
  return arg;
}

// A graph written node by node; values are numbered in order.
class TestGraph {
 public:
  int Input(const std::string& name, const std::string& sizes) {
    kiln::v1::Input* input = graph_.add_inputs();
    input->set_value(next_value_);
    input->set_name(name);
    *input->mutable_type() = Type(sizes);
    return next_value_++;
  }

  // The node's results have `result_sizes` (one entry per result).
  std::vector<int> Node(const std::string& op, const std::string& name, std::vector<int> inputs,
                        std::vector<kiln::v1::Argument> args,
                        const std::vector<std::string>& result_sizes) {
    kiln::v1::Node* node = graph_.add_nodes();
    node->set_op(op);
    node->set_name(name);
    for (int input : inputs) node->add_inputs(input);
    for (kiln::v1::Argument& arg : args) *node->add_args() = std::move(arg);
    std::vector<int> results;
    for (const std::string& sizes : result_sizes) {
      node->add_outputs(next_value_);
      *node->add_output_types() = Type(sizes);
      results.push_back(next_value_++);
    }
    return results;
  }

  int Node(const std::string& op, const std::string& name, std::vector<int> inputs,
           std::vector<kiln::v1::Argument> args, const std::string& result_sizes) {
    return Node(op, name, std::move(inputs), std::move(args),
                std::vector<std::string>{result_sizes})[0];
  }

  // The prepared graph returning `outputs`.
  ir::Graph Prepare(const std::vector<int>& outputs) {
    for (int output : outputs) graph_.add_outputs(output);
    auto prepared = PrepareGraph(graph_);
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    return prepared.ok() ? *std::move(prepared) : ir::Graph();
  }

 private:
  kiln::v1::Graph graph_;
  int next_value_ = 0;
};

// Whether `symbol` (the prepared graph's only one, s0) can be padded, as
// "inputs [..] outputs [..]" or the error.
std::string Padding(const ir::Graph& graph, int symbol = 0) {
  auto dims = PaddableDims(graph, symbol);
  if (!dims.ok()) return dims.status().ToString();
  auto list = [](const std::vector<int>& dims) {
    std::string text;
    for (int dim : dims) text += (text.empty() ? "" : ", ") + std::to_string(dim);
    return "[" + text + "]";
  };
  return "inputs " + list(dims->inputs) + " outputs " + list(dims->outputs);
}

// --- The traced transformer layer: src is [S, B, 64] ---------------------

ir::Graph TransformerLayer() {
  auto graph = ReadGraphFile("tests/workloads/dynamic/transformer_layer_both.json");
  EXPECT_TRUE(graph.ok()) << graph.status();
  auto prepared = PrepareGraph(graph.ok() ? *graph : kiln::v1::Graph());
  EXPECT_TRUE(prepared.ok()) << prepared.status();
  return prepared.ok() ? *std::move(prepared) : ir::Graph();
}

TEST(SymbolIndependenceTest, TransformerBatchIsPaddable) {
  const ir::Graph graph = TransformerLayer();
  // Canonical names by first occurrence: src's [S, B, 64] is [s0, s1, 64].
  ASSERT_EQ(graph.symbols, (std::vector<std::string>{"s0", "s1"}));
  ASSERT_EQ(graph.values[graph.inputs[0]].sizes[1].symbol, 1);
  // B is dim 1 of src (the other inputs are parameters) and of the result,
  // through [S, B, 64] -> [S * B, 64] (B inside, rows independent through
  // the linear layers) and back, and [S, B, 64] -> [S, 4 * B, 16] for the
  // heads (B outermost, the batch of both bmm).
  EXPECT_EQ(Padding(graph, 1),
            "inputs [1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1] outputs [1]");
}

TEST(SymbolIndependenceTest, TransformerSequenceIsRefusedAtTheSoftmax) {
  const ir::Graph graph = TransformerLayer();
  const auto dims = PaddableDims(graph, 0);
  ASSERT_EQ(dims.status().code(), absl::StatusCode::kFailedPrecondition) << dims.status();
  // Scores are [B, 4, S, S]: q @ k.T contracts over the head dim, and the
  // softmax's test for rows masked whole (torch's _safe_softmax: a sum of
  // the -inf matches) is the first node that reads across S.
  int masked_rows = -1;
  for (size_t n = 0; n < graph.nodes.size() && masked_rows < 0; ++n) {
    if (graph.nodes[n].op == "aten.sum.dim_IntList") masked_rows = static_cast<int>(n);
  }
  EXPECT_EQ(dims.status().message(),
            "node " + std::to_string(masked_rows) +
                " (aten.sum.dim_IntList, 'sum_1'): reduces over dim 3, which carries symbol "
                "s0: padding s0 would change the result");
}

TEST(SymbolIndependenceTest, SymbolOutOfRangeIsInvalidArgument) {
  EXPECT_EQ(PaddableDims(TransformerLayer(), 2).status(),
            absl::InvalidArgumentError("symbol 2 is out of range: the graph has 2 symbols"));
}

// --- Reductions -----------------------------------------------------------

TEST(SymbolIndependenceTest, SumOverTheSymbolsDimIsRefused) {
  TestGraph g;
  const int x = g.Input("x", "B, 8");
  const int sum = g.Node("aten.sum.dim_IntList", "sum", {x}, {IntListArg("dim", {0})}, "8");
  EXPECT_EQ(Padding(g.Prepare({sum})),
            "FAILED_PRECONDITION: node 0 (aten.sum.dim_IntList, 'sum'): reduces over dim 0, "
            "which carries symbol s0: padding s0 would change the result");
}

TEST(SymbolIndependenceTest, SumOverAnotherDimIsAllowed) {
  TestGraph g;
  const int x = g.Input("x", "B, 8");
  const int sum = g.Node("aten.sum.dim_IntList", "sum", {x}, {IntListArg("dim", {-1})}, "B");
  EXPECT_EQ(Padding(g.Prepare({sum})), "inputs [0] outputs [0]");
}

TEST(SymbolIndependenceTest, SoftmaxAndLayerNormOverOtherDimsAreAllowed) {
  TestGraph g;
  const int x = g.Input("x", "4, B, 8");
  const int softmax =
      g.Node("aten._softmax.default", "softmax", {x}, {IntArg("dim", -1)}, "4, B, 8");
  const std::vector<int> norm =
      g.Node("aten.native_layer_norm.default", "norm", {softmax},
             {IntListArg("normalized_shape", {8}), NoneArg("weight"), NoneArg("bias"),
              [] {
                kiln::v1::Argument eps;
                eps.set_name("eps");
                eps.set_float_value(1e-5);
                return eps;
              }()},
             {"4, B, 8", "4, B, 1", "4, B, 1"});
  EXPECT_EQ(Padding(g.Prepare({norm[0], norm[2]})), "inputs [1] outputs [1, 1]");

  TestGraph over_b;
  const int y = over_b.Input("y", "4, B");
  const int bad = over_b.Node("aten._softmax.default", "softmax", {y}, {IntArg("dim", 1)}, "4, B");
  EXPECT_EQ(Padding(over_b.Prepare({bad})),
            "FAILED_PRECONDITION: node 0 (aten._softmax.default, 'softmax'): reduces over dim "
            "1, which carries symbol s0: padding s0 would change the result");
}

// --- GEMM -----------------------------------------------------------------

TEST(SymbolIndependenceTest, MmContractingOverTheSymbolIsRefused) {
  TestGraph g;
  const int x = g.Input("x", "8, B");
  const int w = g.Input("w", "B, 4");
  const int mm = g.Node("aten.mm.default", "mm", {x, w}, {}, "8, 4");
  EXPECT_EQ(Padding(g.Prepare({mm})),
            "FAILED_PRECONDITION: node 0 (aten.mm.default, 'mm'): contracts over dim 1 of input "
            "0, which carries symbol s0: padding s0 would change the result");
}

TEST(SymbolIndependenceTest, MmWithTheSymbolAsRowsIsAllowed) {
  TestGraph g;
  const int x = g.Input("x", "B, 8");
  const int w = g.Input("w", "8, 4");
  const int bias = g.Input("bias", "4");
  const int mm = g.Node("aten.addmm.default", "addmm", {bias, x, w}, {}, "B, 4");
  const int t = g.Node("aten.t.default", "t", {mm}, {}, "4, B");
  EXPECT_EQ(Padding(g.Prepare({mm, t})), "inputs [0, -1, -1] outputs [0, 1]");
}

// --- Views ----------------------------------------------------------------

TEST(SymbolIndependenceTest, ViewMergingTheSymbolAsOuterFactorIsAllowed) {
  TestGraph g;
  const int x = g.Input("x", "B, 4, 8");
  const int view = g.Node("aten.view.default", "view", {x}, {SizeArg("4*B, 8")}, "4*B, 8");
  EXPECT_EQ(Padding(g.Prepare({view})), "inputs [0] outputs [0]");
}

TEST(SymbolIndependenceTest, ViewMergingTheSymbolAsInnerFactorIsRefusedAsAResult) {
  TestGraph g;
  const int x = g.Input("x", "4, B, 8");
  const int view = g.Node("aten.view.default", "view", {x}, {SizeArg("4*B, 8")}, "4*B, 8");
  EXPECT_EQ(Padding(g.Prepare({view})),
            "FAILED_PRECONDITION: output 0 (from node 0 (aten.view.default, 'view')): dim 0 holds "
            "symbol s0 as an inner factor (4 * s0 * 1): a padded result could not be sliced back");
}

TEST(SymbolIndependenceTest, InnerMergeSplitBackAfterRowWiseOpsIsAllowed) {
  // The transformer's pattern: rows of [4 * B] stay independent through a
  // GEMM over the other dim, and the view back makes B a dim again.
  TestGraph g;
  const int x = g.Input("x", "4, B, 8");
  const int w = g.Input("w", "8, 8");
  const int flat = g.Node("aten.view.default", "flat", {x}, {SizeArg("4*B, 8")}, "4*B, 8");
  const int mm = g.Node("aten.mm.default", "mm", {flat, w}, {}, "4*B, 8");
  const int back = g.Node("aten.view.default", "back", {mm}, {SizeArg("4, B, 8")}, "4, B, 8");
  EXPECT_EQ(Padding(g.Prepare({back})), "inputs [1, -1] outputs [1]");
}

TEST(SymbolIndependenceTest, ViewSplittingTheSymbolFromItsDimIsRefused) {
  // [4 * B] holds B outermost; read as [4, B] the 4 would be outside.
  TestGraph g;
  const int x = g.Input("x", "4*B");
  const int view = g.Node("aten.view.default", "view", {x}, {SizeArg("4, B")}, "4, B");
  EXPECT_EQ(Padding(g.Prepare({view})),
            "FAILED_PRECONDITION: node 0 (aten.view.default, 'view'): reshapes dim 0 (1 * s0 * "
            "4), which carries symbol s0, so that s0 is not one factor of a result dim: padding "
            "s0 would change the result");
}

TEST(SymbolIndependenceTest, PointwiseOperandsInDifferentLayoutsAreRefused) {
  TestGraph g;
  const int x = g.Input("x", "B, 4, 8");
  const int y = g.Input("y", "4, B, 8");
  const int outer = g.Node("aten.view.default", "outer", {x}, {SizeArg("4*B, 8")}, "4*B, 8");
  const int inner = g.Node("aten.view.default", "inner", {y}, {SizeArg("4*B, 8")}, "4*B, 8");
  const int add = g.Node("aten.add.Tensor", "add", {outer, inner}, {}, "4*B, 8");
  EXPECT_EQ(Padding(g.Prepare({add})),
            "FAILED_PRECONDITION: node 2 (aten.add.Tensor, 'add'): pairs dim 0 of input 0 (1 * s0 "
            "* 4) with dim 0 of input 1 (4 * s0 * 1), which hold symbol s0 in different layouts: "
            "padding s0 would change the result");
}

TEST(SymbolIndependenceTest, BroadcastAlongTheSymbolIsAllowed) {
  TestGraph g;
  const int x = g.Input("x", "B, 8");
  const int bias = g.Input("bias", "8");
  const int add = g.Node("aten.add.Tensor", "add", {x, bias}, {}, "B, 8");
  const int expanded = g.Node("aten.expand.default", "expand", {bias}, {SizeArg("B, 8")}, "B, 8");
  EXPECT_EQ(Padding(g.Prepare({add, expanded})), "inputs [0, -1] outputs [0, 0]");
}

TEST(SymbolIndependenceTest, InputsAndOutputsHoldTheSymbolInOneDim) {
  TestGraph twice;
  const int mask = twice.Input("mask", "B, B");
  const int relu = twice.Node("aten.relu.default", "relu", {mask}, {}, "B, B");
  EXPECT_EQ(Padding(twice.Prepare({relu})),
            "FAILED_PRECONDITION: input 0 ('mask') carries symbol s0 in dims 0 and 1: padding s0 "
            "needs it in one dim");
}

// --- Slices, unknown ops --------------------------------------------------

TEST(SymbolIndependenceTest, SplitAndSliceAlongAnotherDimAreAllowed) {
  // (Kiln cannot slice or concatenate along a symbolic dim at all yet.)
  TestGraph g;
  const int x = g.Input("x", "B, 16");
  const std::vector<int> halves =
      g.Node("aten.split.Tensor", "split", {x}, {IntArg("split_size", 8), IntArg("dim", 1)},
             std::vector<std::string>{"B, 8", "B, 8"});
  const int slice = g.Node("aten.slice.Tensor", "slice", {halves[1]},
                           {IntArg("dim", 1), IntArg("start", 2), IntArg("end", 6)}, "B, 4");
  const int select =
      g.Node("aten.select.int", "select", {halves[0]}, {IntArg("dim", 1), IntArg("index", 3)}, "B");
  EXPECT_EQ(Padding(g.Prepare({slice, select})), "inputs [0] outputs [0, 0]");
}

TEST(SymbolIndependenceTest, AnOpNotKnownToBeSafeIsRefusedNamingIt) {
  // layer_norm's backward sums the weight's gradient over rows: over B.
  TestGraph g;
  const int grad = g.Input("grad", "B, 8");
  const int x = g.Input("x", "B, 8");
  const int mean = g.Input("mean", "B, 1");
  const int rstd = g.Input("rstd", "B, 1");
  kiln::v1::Argument mask;
  mask.set_name("output_mask");
  for (int k = 0; k < 3; ++k) mask.mutable_bool_list()->add_values(true);
  const std::vector<int> results =
      g.Node("aten.native_layer_norm_backward.default", "backward", {grad, x, mean, rstd},
             {IntListArg("normalized_shape", {8}), NoneArg("weight"), NoneArg("bias"), mask},
             {"B, 8", "8", "8"});
  EXPECT_EQ(Padding(g.Prepare({results[0]})),
            "FAILED_PRECONDITION: node 0 (aten.native_layer_norm_backward.default, 'backward'): "
            "not known to keep positions apart along dim 0 of input 0, which carries symbol s0: "
            "padding s0 could change the result");
}

TEST(SymbolIndependenceTest, ReadingTheSymbolsValueIsRefused) {
  TestGraph g;
  const int x = g.Input("x", "B, 8");
  kiln::v1::Argument other;
  other.set_name("other");
  kiln::v1::SymExpr::Term* term = other.mutable_sym_int()->add_terms();
  term->set_coefficient(1);
  term->add_symbols("B");
  const int div = g.Node("aten.div.Tensor", "div", {x}, {other}, "B, 8");
  EXPECT_EQ(Padding(g.Prepare({div})),
            "FAILED_PRECONDITION: node 0 (aten.div.Tensor, 'div'): argument 'other' reads the "
            "value of symbol s0: padding s0 would change the result");
}

}  // namespace
}  // namespace kiln
