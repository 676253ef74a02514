#include "codegen/retype.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codegen/import.h"
#include "codegen/limits.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<kiln::v1::Graph> Retype(const kiln::v1::Graph& graph,
                                       const std::vector<std::vector<kiln::v1::Dim>>& input_sizes) {
  if (static_cast<int>(input_sizes.size()) != graph.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("sizes for ", input_sizes.size(),
                                                   " inputs; the graph has ", graph.inputs_size()));
  }
  std::vector<InputLayout> layouts(input_sizes.size());
  for (size_t i = 0; i < input_sizes.size(); ++i) {
    const kiln::v1::TensorType& type = graph.inputs(static_cast<int>(i)).type();
    layouts[i].sizes = input_sizes[i];
    if (SameDims(type.sizes(), input_sizes[i])) {
      layouts[i].strides.assign(type.strides().begin(), type.strides().end());
    }
  }
  return Retype(graph, layouts);
}

absl::StatusOr<kiln::v1::Graph> Retype(const kiln::v1::Graph& graph,
                                       const std::vector<InputLayout>& inputs) {
  if (static_cast<int>(inputs.size()) != graph.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("layouts for ", inputs.size(),
                                                   " inputs; the graph has ", graph.inputs_size()));
  }
  kiln::v1::Graph result = graph;
  // Symbols the new sizes make constant: substituted into symbolic
  // arguments, unless the sizes do not give one value for them (then the
  // arguments keep naming them, and importing the result says so).
  std::map<std::string, int64_t> fixed;
  std::set<std::string> unfixable;
  for (int i = 0; i < result.inputs_size(); ++i) {
    kiln::v1::TensorType* type = result.mutable_inputs(i)->mutable_type();
    const std::vector<kiln::v1::Dim>& sizes = inputs[i].sizes;
    if (!SameDims(type->sizes(), sizes)) {
      for (int d = 0; d < type->sizes_size() && d < static_cast<int>(sizes.size()); ++d) {
        const kiln::v1::Dim& old = type->sizes(d);
        const int64_t multiplier = old.multiplier() == 0 ? 1 : old.multiplier();
        if (!old.has_symbol() || sizes[d].has_symbol()) continue;
        const int64_t size = sizes[d].constant();
        auto [it, added] = fixed.emplace(old.symbol(), size / multiplier);
        if (size % multiplier != 0 || it->second * multiplier != size) {
          unfixable.insert(old.symbol());
        }
      }
    }
    type->clear_sizes();
    type->clear_strides();
    for (const kiln::v1::Dim& dim : sizes) *type->add_sizes() = dim;
    for (const kiln::v1::Dim& dim : inputs[i].strides) *type->add_strides() = dim;
  }
  for (const std::string& symbol : unfixable) fixed.erase(symbol);
  FixSymbolicArguments(result, fixed);
  DropRelationsOfLostSymbols(result);
  // Import with the new input types (node types are replaced below, in
  // order, so each node's inputs are already right when it is inferred).
  ASSIGN_OR_RETURN(ir::Graph ir_graph, ImportGraph(result));
  for (int n = 0; n < static_cast<int>(ir_graph.nodes.size()); ++n) {
    const ir::Node& node = ir_graph.nodes[n];
    const ops::OpDef* op = ops::OpTable::Get().Find(node.op);
    if (op == nullptr) {
      return absl::UnimplementedError(absl::StrCat(NodeLabel(ir_graph, n), ": op '", node.op,
                                                   "' is not supported (see docs/OPS.md)"));
    }
    // The graph need not have been verified, and infer trusts what verify
    // checks first (found by fuzzing: aten.mm with no inputs read past them).
    const int num_inputs = static_cast<int>(node.inputs.size());
    if (absl::StartsWith(node.op, "kiln.")) {
      return absl::InvalidArgumentError(absl::StrCat(NodeLabel(ir_graph, n), ": '", node.op,
                                                     "' is internal to Kiln, not an ATen op"));
    }
    if (num_inputs < op->min_inputs || num_inputs > op->max_inputs) {
      return absl::InvalidArgumentError(absl::StrCat(NodeLabel(ir_graph, n), ": expects ",
                                                     op->min_inputs, " to ", op->max_inputs,
                                                     " tensor inputs, got ", num_inputs));
    }
    ASSIGN_OR_RETURN(const ir::Node filled, ops::WithDefaults(node, *op));
    ops::InputTypes inputs;
    for (int input : node.inputs) inputs.push_back(&ir_graph.values[input]);
    auto types = op->infer(filled, inputs);
    if (!types.ok()) {
      return absl::Status(types.status().code(),
                          absl::StrCat(NodeLabel(ir_graph, n), ": ", types.status().message()));
    }
    if (types->size() != node.outputs.size()) {
      // A split of a resized dim: the traced graph has no values for the
      // new results, so these sizes need a graph traced at them.
      return absl::InvalidArgumentError(absl::StrCat(
          NodeLabel(ir_graph, n), ": gives ", types->size(), " results at the new sizes, not the ",
          node.outputs.size(), " the graph was traced with; trace the model at these sizes"));
    }
    kiln::v1::Node& out = *result.mutable_nodes(n);
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      ir_graph.values[node.outputs[k]] = (*types)[k];
      *out.mutable_output_types(k) = ExportTensorType((*types)[k], ir_graph);
    }
  }
  return result;
}

}  // namespace kiln
