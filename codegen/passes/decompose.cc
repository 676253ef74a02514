#include "codegen/passes/decompose.h"

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/import.h"
#include "codegen/ops/op_table.h"
#include "codegen/passes/canonicalize.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// Decompositions may emit composites (addmm -> mm + add): bounded rounds.
constexpr int kMaxRounds = 8;

// One round: copies the graph, replacing each composite node by its
// decomposition. Returns whether anything changed.
absl::StatusOr<bool> DecomposeOnce(const ir::Graph& graph, ir::Graph& result) {
  std::vector<int> new_value;
  result = ir::WithInputsOf(graph, new_value);
  result.symbols = graph.symbols;
  result.bounds = graph.bounds;
  bool changed = false;
  GraphBuilder builder(result);
  for (int n = 0; n < static_cast<int>(graph.nodes.size()); ++n) {
    const ir::Node& old_node = graph.nodes[n];
    const ops::OpDef* op = ops::OpTable::Get().Find(old_node.op);
    if (op == nullptr) return absl::InternalError("decompose before verify: unknown op");
    if (op->decompose) {
      ir::Node node = old_node;
      for (int& input : node.inputs) input = new_value[input];
      changed = true;
      builder.set_name_prefix(node.name.empty() ? node.op : node.name);
      auto replacement = op->decompose(builder, node);
      if (!replacement.ok()) {
        return absl::Status(
            replacement.status().code(),
            absl::StrCat(NodeLabel(graph, n), ": ", replacement.status().message()));
      }
      if (replacement->size() != node.outputs.size()) {
        return absl::InternalError(absl::StrCat(NodeLabel(graph, n), ": decomposition returns ",
                                                replacement->size(), " values"));
      }
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        const ir::TensorType& declared = graph.values[node.outputs[k]];
        const ir::TensorType& built = result.values[(*replacement)[k]];
        if (declared.dtype != built.dtype || declared.sizes != built.sizes) {
          return absl::InternalError(absl::StrCat(NodeLabel(graph, n), ": decomposition result ", k,
                                                  " is ", ir::ToString(built, result), ", not ",
                                                  ir::ToString(declared, graph)));
        }
        new_value[node.outputs[k]] = (*replacement)[k];
      }
      continue;
    }
    result.AppendCopy(graph, old_node, new_value);
  }
  for (int output : graph.outputs) result.outputs.push_back(new_value[output]);
  return changed;
}

}  // namespace

absl::StatusOr<ir::Graph> Decompose(const ir::Graph& graph) {
  ir::Graph current = graph;
  for (int round = 0; round < kMaxRounds; ++round) {
    ir::Graph next;
    ASSIGN_OR_RETURN(const bool changed, DecomposeOnce(current, next));
    if (!changed) return Canonicalize(current);  // drops what decompositions left dead
    current = std::move(next);
  }
  return absl::InternalError("decompositions did not converge");
}

}  // namespace kiln
