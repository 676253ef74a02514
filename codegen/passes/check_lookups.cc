#include "codegen/passes/check_lookups.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// A lookup's index and the dim of its table it names: eager's name for the
// op, the table's input and the index's, and the dim (nullopt: not a lookup).
struct Lookup {
  const char* op;
  int table, index;
  int64_t dim;
};

std::optional<Lookup> LookupOf(const ir::Node& node) {
  if (node.op == "aten.embedding.default") return Lookup{"embedding", 0, 1, 0};
  if (node.op == "aten.index_select.default") {
    return Lookup{"index_select", 0, 1, ops::IntArg(node, "dim")};
  }
  if (node.op == "aten.gather.default") return Lookup{"gather", 0, 1, ops::IntArg(node, "dim")};
  return std::nullopt;
}

// The index x of an index_select whose index is where(x < 0, x + size, x),
// through views and expands: x[index] (aten.index) as Kiln traces it, with
// negative entries counting from the end (kiln/_decompositions_indexing.py).
std::optional<int> CountedFromTheEnd(const ir::Graph& graph, int index, const ir::SymExpr& size) {
  auto producer = [&](int value) -> const ir::Node* {
    return graph.producer[value] < 0 ? nullptr : &graph.nodes[graph.producer[value]];
  };
  const ir::Node* node = producer(index);
  while (node != nullptr && (node->op == "aten.view.default" || node->op == "aten.expand.default" ||
                             node->op == "aten.reshape.default")) {
    node = producer(node->inputs[0]);
  }
  if (node == nullptr || node->op != "aten.where.self" || node->inputs.size() != 3 ||
      !size.is_constant()) {
    return std::nullopt;
  }
  const int x = node->inputs[2];
  const ir::Node* negative = producer(node->inputs[0]);
  const ir::Node* shifted = producer(node->inputs[1]);
  const auto scalar = [](const ir::Node& n, const char* name, double value) {
    return ops::Present(n, name) && ops::ScalarArgAsDouble(n, name) == value;
  };
  if (negative == nullptr || negative->op != "aten.lt.Scalar" || negative->inputs[0] != x ||
      !scalar(*negative, "other", 0) || shifted == nullptr ||
      (shifted->op != "aten.add.Tensor" && shifted->op != "aten.add.Scalar") ||
      shifted->inputs.size() != 1 || shifted->inputs[0] != x ||
      !scalar(*shifted, "other", static_cast<double>(size.constant())) ||
      (ops::Present(*shifted, "alpha") && !scalar(*shifted, "alpha", 1))) {
    return std::nullopt;
  }
  return x;
}

}  // namespace

absl::StatusOr<ir::Graph> CheckLookups(const ir::Graph& graph) {
  bool any = false;
  for (const ir::Node& node : graph.nodes) any = any || LookupOf(node).has_value();
  if (!any) return graph;

  std::vector<int> new_value;
  ir::Graph result = ir::WithInputsOf(graph, new_value);
  result.symbols = graph.symbols;
  result.bounds = graph.bounds;
  GraphBuilder builder(result);
  for (const ir::Node& node : graph.nodes) {
    const std::optional<Lookup> lookup = LookupOf(node);
    // An empty index names no position (and may be of any integer type).
    const auto& index_sizes =
        lookup ? graph.values[node.inputs[lookup->index]].sizes : std::vector<ir::Dim>{};
    const bool empty = std::any_of(index_sizes.begin(), index_sizes.end(),
                                   [](const ir::Dim& d) { return d == ir::Dim::Constant(0); });
    if (lookup && !empty) {
      const ir::TensorType& table = graph.values[node.inputs[lookup->table]];
      // A 0-dim table is one element along dim 0 (or -1), as in eager.
      ASSIGN_OR_RETURN(const int dim,
                       ops::WrapDim(lookup->dim, std::max<int64_t>(table.rank(), 1)));
      const ir::SymExpr size =
          table.rank() == 0 ? ir::SymExpr::Constant(1) : ir::SymExpr::Of(table.sizes[dim]);
      // x[index]'s check takes the index itself, in [-size, size): its
      // error names the entry the caller passed.
      int index = node.inputs[lookup->index];
      std::string op = lookup->op;
      const std::optional<int> counted =
          op == "index_select" ? CountedFromTheEnd(graph, index, size) : std::nullopt;
      if (counted) {
        index = *counted;
        op = "index";
      }
      builder.set_name_prefix(node.name.empty() ? node.op : node.name);
      RETURN_IF_ERROR(builder
                          .AddNode("kiln.check_index.default", {new_value[index]},
                                   {{"op", op},
                                    {"dim", int64_t{dim}},
                                    {"size", size},
                                    {"from_the_end", counted.has_value()}})
                          .status());
    }
    result.AppendCopy(graph, node, new_value);
  }
  for (int output : graph.outputs) result.outputs.push_back(new_value[output]);
  return result;
}

}  // namespace kiln
