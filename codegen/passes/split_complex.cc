#include "codegen/passes/split_complex.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/import.h"
#include "codegen/ops/complex.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<ir::Graph> SplitComplex(const ir::Graph& graph) {
  if (std::none_of(graph.values.begin(), graph.values.end(),
                   [](const ir::TensorType& type) { return ir::IsComplex(type.dtype); })) {
    return graph;
  }
  std::vector<int> new_value;
  ir::Graph result = ir::WithInputsOf(graph, new_value);
  result.symbols = graph.symbols;
  result.bounds = graph.bounds;
  for (int input : result.inputs) result.values[input] = ops::PairType(result.values[input]);
  GraphBuilder builder(result);
  for (int n = 0; n < static_cast<int>(graph.nodes.size()); ++n) {
    const ir::Node& old_node = graph.nodes[n];
    if (!ops::TouchesComplex(graph, n)) {
      result.AppendCopy(graph, old_node, new_value);
      continue;
    }
    const ops::ComplexRule* rule = ops::FindComplexRule(old_node.op);
    if (rule == nullptr) return absl::InternalError("split before verify: no complex rule");
    ops::InputTypes types;
    ir::Node node = old_node;
    for (int& input : node.inputs) {
      types.push_back(&graph.values[input]);
      input = new_value[input];
    }
    builder.set_name_prefix(node.name.empty() ? node.op : node.name);
    auto replacement = rule->split(builder, node, types);
    if (!replacement.ok()) {
      return absl::Status(replacement.status().code(),
                          absl::StrCat(NodeLabel(graph, n), ": ", replacement.status().message()));
    }
    if (replacement->size() != node.outputs.size()) {
      return absl::InternalError(absl::StrCat(NodeLabel(graph, n), ": complex rule returns ",
                                              replacement->size(), " values"));
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const ir::TensorType expected = ops::PairType(graph.values[node.outputs[k]]);
      const ir::TensorType& built = result.values[(*replacement)[k]];
      if (expected.dtype != built.dtype || expected.sizes != built.sizes) {
        return absl::InternalError(absl::StrCat(NodeLabel(graph, n), ": complex rule result ", k,
                                                " is ", ir::ToString(built, result), ", not ",
                                                ir::ToString(expected, result)));
      }
      new_value[node.outputs[k]] = (*replacement)[k];
    }
  }
  for (int output : graph.outputs) result.outputs.push_back(new_value[output]);
  return result;
}

}  // namespace kiln
