#include "codegen/passes/transpose_linear.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/import.h"
#include "codegen/ops/op_table.h"
#include "codegen/passes/canonicalize.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

constexpr char kMm[] = "kiln.mm.default";
constexpr char kTranspose[] = "aten.t.default";

// x · W1ᵀ (`first`), the pointwise nodes after it in order (`between`), and
// G · W2ᵀ (`second`), G being the last of them (or the first product).
struct Pair {
  int first = -1;
  std::vector<int> between;
  int second = -1;
  std::vector<ir::Dim> hidden_sizes;  // G's: [batch, hidden]
};

bool IsView(const ir::Node& node) {
  const ops::OpDef* op = ops::OpTable::Get().Find(node.op);
  return op != nullptr && op->family == "view";
}

// Whether rewriting pays (measured, docs/BENCHMARKS.md "GEMM choices"): at
// a batch no larger than the narrowest of the three widths, 1.02-1.75x on
// both products. Past it the products gain at most 4% (and lose up to 7% at
// narrow widths) while reading C back through the transposed view costs
// more than that. A symbolic batch counts as
// its upper bound (the symbol's, times its multiplier); without one, or as a
// product of symbols, it is not rewritten.
bool WorthTransposing(const ir::Graph& graph, const Pair& pair) {
  const int64_t in = graph.values[graph.nodes[pair.first].inputs[0]].sizes[1].constant;
  const int64_t out = graph.values[graph.nodes[pair.second].outputs[0]].sizes[1].constant;
  const int64_t narrowest = std::min({in, pair.hidden_sizes[1].constant, out});
  const ir::Dim& batch = pair.hidden_sizes[0];
  if (!batch.is_symbolic()) return batch.constant <= narrowest;
  if (!batch.times.empty()) return false;  // a product of symbols: unbounded here
  const int64_t max = graph.bounds[batch.symbol].max;
  int64_t bound;  // multiplier * max, the batch's largest value
  return max > 0 && !__builtin_mul_overflow(max, batch.multiplier, &bound) && bound <= narrowest;
}

// W when `value` is t(W) of a static, contiguous matrix (an nn.Linear
// weight); else -1.
int TransposedWeight(const ir::Graph& graph, int value) {
  const int node = graph.producer[value];
  if (node < 0 || graph.nodes[node].op != kTranspose) return -1;
  const int weight = graph.nodes[node].inputs[0];
  const ir::TensorType& type = graph.values[weight];
  return type.rank() == 2 && type.is_static() && type.IsContiguous() ? weight : -1;
}

// The pair whose second product is node `second`, if there is one.
// `readers` lists each value's reading nodes; `uses` counts those and graph
// outputs.
std::optional<Pair> MatchPair(const ir::Graph& graph, const std::vector<std::vector<int>>& readers,
                              const std::vector<int>& uses, int second) {
  const ir::Node& product = graph.nodes[second];
  if (product.op != kMm || TransposedWeight(graph, product.inputs[1]) < 0) return std::nullopt;
  const ir::TensorType& result = graph.values[product.outputs[0]];
  const ir::TensorType& hidden = graph.values[product.inputs[0]];
  // The widths static (the weights'), the batch maybe symbolic.
  if (result.dtype != ir::DType::kFloat32 || result.sizes[1].is_symbolic() ||
      hidden.sizes[1].is_symbolic()) {
    return std::nullopt;
  }
  // C becomes a transposed view: a view of it, typed for C's memory as it
  // was (an alias of its rows, a reshape), would read it wrongly.
  for (int reader : readers[product.outputs[0]]) {
    if (IsView(graph.nodes[reader])) return std::nullopt;
  }
  Pair pair;
  pair.second = second;
  pair.hidden_sizes = hidden.sizes;
  // Back from G to the first product, through pointwise nodes each with one
  // input of G's shape that nothing else reads.
  for (int value = product.inputs[0];;) {
    const ir::TensorType& type = graph.values[value];
    if (uses[value] != 1 || type.sizes != hidden.sizes || type.dtype != ir::DType::kFloat32 ||
        !type.IsContiguous() || graph.producer[value] < 0) {
      return std::nullopt;
    }
    const int node = graph.producer[value];
    const ir::Node& producer = graph.nodes[node];
    if (producer.op == kMm) {
      const ir::TensorType& x = graph.values[producer.inputs[0]];
      if (TransposedWeight(graph, producer.inputs[1]) < 0 || !x.IsContiguous() ||
          x.sizes[1].is_symbolic()) {
        return std::nullopt;
      }
      pair.first = node;
      break;
    }
    const ops::OpDef* op = ops::OpTable::Get().Find(producer.op);
    if (op == nullptr || op->family != "pointwise" || producer.outputs.size() != 1) {
      return std::nullopt;
    }
    int next = -1;
    for (int input : producer.inputs) {
      if (graph.producer[input] < 0 || graph.values[input].sizes != hidden.sizes ||
          uses[input] != 1) {
        continue;  // an operand from outside the chain
      }
      if (next >= 0) return std::nullopt;  // two branches meet here
      next = input;
    }
    if (next < 0) return std::nullopt;
    pair.between.push_back(node);  // walking backwards: reversed below
    value = next;
  }
  std::reverse(pair.between.begin(), pair.between.end());
  if (!WorthTransposing(graph, pair)) return std::nullopt;
  return pair;
}

// Node `n` of `pair`, rewritten into `builder`'s graph: the first product as
// W1 · xᵀ, an elementwise op on transposed operands, the second product as
// W2 · Gᵀ read through a transposed view. `transposed` maps each chain
// value to its transpose; `new_value`, every other value to its copy.
absl::Status RewriteNode(const ir::Graph& graph, int n, const Pair& pair, GraphBuilder& builder,
                         std::vector<int>& new_value, std::vector<int>& transposed) {
  const ir::Node& node = graph.nodes[n];
  builder.set_name_prefix(node.name.empty() ? node.op : node.name);
  const int output = node.outputs[0];
  if (n == pair.first) {
    ASSIGN_OR_RETURN(const int x_t, builder.Add(kTranspose, {new_value[node.inputs[0]]}));
    const int w1 = new_value[TransposedWeight(graph, node.inputs[1])];
    ASSIGN_OR_RETURN(transposed[output], builder.Add(kMm, {w1, x_t}));
  } else if (n == pair.second) {
    const int w2 = new_value[TransposedWeight(graph, node.inputs[1])];
    ASSIGN_OR_RETURN(const int c_t, builder.Add(kMm, {w2, transposed[node.inputs[0]]}));
    ASSIGN_OR_RETURN(new_value[output], builder.Add(kTranspose, {c_t}));
    return absl::OkStatus();
  } else {
    std::vector<int> inputs;
    for (int input : node.inputs) {
      if (transposed[input] >= 0) {
        inputs.push_back(transposed[input]);
        continue;
      }
      // A 0-d operand broadcasts either way; expanded, it would take part
      // in type promotion (a float64 scalar tensor would widen the result).
      int operand = new_value[input];
      if (graph.values[input].rank() == 0) {
        inputs.push_back(operand);
        continue;
      }
      if (graph.values[input].sizes != graph.values[output].sizes) {
        const std::vector<ir::SymExpr> size = {ir::SymExpr::Of(pair.hidden_sizes[0]),
                                               ir::SymExpr::Of(pair.hidden_sizes[1])};
        ASSIGN_OR_RETURN(operand, builder.Add("aten.expand.default", {operand}, {{"size", size}}));
      }
      ASSIGN_OR_RETURN(operand, builder.Add(kTranspose, {operand}));
      inputs.push_back(operand);
    }
    ASSIGN_OR_RETURN(transposed[output], builder.Add(node.op, inputs, node.args));
  }
  // Gᵀ's values: the dtype and the sizes reversed of what they stand for.
  const ir::TensorType& want = graph.values[output];
  const ir::TensorType& got = builder.type(transposed[output]);
  if (got.dtype != want.dtype || got.rank() != 2 || got.sizes[0] != want.sizes[1] ||
      got.sizes[1] != want.sizes[0]) {
    return absl::InternalError(absl::StrCat("got ", ir::ToString(got, builder.graph()), " for ",
                                            ir::ToString(want, graph)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ir::Graph> TransposeLinearPairs(const ir::Graph& graph) {
  std::vector<std::vector<int>> readers(graph.values.size());
  std::vector<int> uses(graph.values.size(), 0);
  for (int n = 0; n < static_cast<int>(graph.nodes.size()); ++n) {
    for (int input : graph.nodes[n].inputs) {
      readers[input].push_back(n);
      ++uses[input];
    }
  }
  for (int output : graph.outputs) ++uses[output];
  std::vector<Pair> pairs;
  std::vector<int> pair_of(graph.nodes.size(), -1);  // node -> index into pairs
  for (int n = 0; n < static_cast<int>(graph.nodes.size()); ++n) {
    std::optional<Pair> pair = MatchPair(graph, readers, uses, n);
    if (!pair) continue;
    std::vector<int> nodes = pair->between;
    nodes.push_back(pair->first);
    nodes.push_back(pair->second);
    if (std::any_of(nodes.begin(), nodes.end(), [&](int node) { return pair_of[node] >= 0; })) {
      continue;  // one pair's second product is the next one's first
    }
    for (int node : nodes) pair_of[node] = static_cast<int>(pairs.size());
    pairs.push_back(*std::move(pair));
  }
  if (pairs.empty()) return graph;

  std::vector<int> new_value;
  ir::Graph result = ir::WithInputsOf(graph, new_value);
  result.symbols = graph.symbols;
  result.bounds = graph.bounds;
  std::vector<int> transposed(graph.values.size(), -1);  // a chain value's transpose
  GraphBuilder builder(result);
  for (int n = 0; n < static_cast<int>(graph.nodes.size()); ++n) {
    if (pair_of[n] < 0) {
      result.AppendCopy(graph, graph.nodes[n], new_value);
      continue;
    }
    const absl::Status rewritten =
        RewriteNode(graph, n, pairs[pair_of[n]], builder, new_value, transposed);
    if (!rewritten.ok()) {
      return absl::InternalError(
          absl::StrCat(NodeLabel(graph, n), ": in transposed space: ", rewritten.message()));
    }
  }
  for (int output : graph.outputs) result.outputs.push_back(new_value[output]);
  return Canonicalize(result);  // drops t(W1) and t(W2) when nothing else reads them
}

}  // namespace kiln
