#include "codegen/retype.h"

#include <algorithm>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codegen/import.h"
#include "codegen/limits.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// Drops the relations naming a symbol that no input size uses any more.
void DropRelationsOfLostSymbols(kiln::v1::Graph& graph) {
  absl::flat_hash_set<std::string> used;
  for (const auto& input : graph.inputs()) {
    for (const auto& dim : input.type().sizes()) {
      if (dim.has_symbol()) used.insert(dim.symbol());
    }
  }
  auto* relations = graph.mutable_relations();
  relations->erase(std::remove_if(relations->begin(), relations->end(),
                                  [&](const kiln::v1::SymbolRelation& relation) {
                                    switch (relation.relation_case()) {
                                      case kiln::v1::SymbolRelation::kEqual:
                                        return !used.contains(relation.equal().lhs()) ||
                                               !used.contains(relation.equal().rhs());
                                      case kiln::v1::SymbolRelation::kRange:
                                        return !used.contains(relation.range().symbol());
                                      case kiln::v1::SymbolRelation::kDivisible:
                                        return !used.contains(relation.divisible().symbol());
                                      default:
                                        return false;  // the importer names it
                                    }
                                  }),
                   relations->end());
}

// Symbolic arguments (a view to [8, S, 32]) with the symbols in `values`
// replaced by their values.
void FixSymbolicArguments(kiln::v1::Graph& graph, const std::map<std::string, int64_t>& values) {
  auto fix = [&](kiln::v1::SymExpr& expr) {
    for (auto& term : *expr.mutable_terms()) {
      auto* symbols = term.mutable_symbols();
      for (auto it = symbols->begin(); it != symbols->end();) {
        auto value = values.find(*it);
        if (value == values.end()) {
          ++it;
        } else {
          // Saturates rather than overflow (found by fuzzing): the importer
          // refuses any coefficient past limits::kMaxTensorElements.
          const int64_t a = term.coefficient(), b = value->second;
          term.set_coefficient(
              limits::CheckedMul(a, b).value_or((a < 0) != (b < 0) ? INT64_MIN : INT64_MAX));
          it = symbols->erase(it);
        }
      }
    }
  };
  for (auto& node : *graph.mutable_nodes()) {
    for (auto& arg : *node.mutable_args()) {
      if (arg.has_sym_int()) fix(*arg.mutable_sym_int());
      if (arg.has_sym_int_list()) {
        for (auto& expr : *arg.mutable_sym_int_list()->mutable_values()) fix(expr);
      }
    }
  }
}

}  // namespace

bool SameDims(const google::protobuf::RepeatedPtrField<kiln::v1::Dim>& declared,
              const std::vector<kiln::v1::Dim>& dims) {
  if (declared.size() != static_cast<int>(dims.size())) return false;
  for (int d = 0; d < declared.size(); ++d) {
    if (declared[d].SerializeAsString() != dims[d].SerializeAsString()) return false;
  }
  return true;
}

std::map<std::string, int64_t> SymbolValues(const kiln::v1::Graph& graph,
                                            const std::vector<std::vector<int64_t>>& input_sizes) {
  std::map<std::string, int64_t> values;
  for (size_t i = 0; i < input_sizes.size() && i < static_cast<size_t>(graph.inputs_size()); ++i) {
    const auto& dims = graph.inputs(i).type().sizes();
    for (int d = 0; d < dims.size() && d < static_cast<int>(input_sizes[i].size()); ++d) {
      // Sizes are never negative and multipliers are positive in a graph
      // that verifies; anything else gives no value.
      const int64_t multiplier = dims[d].multiplier() == 0 ? 1 : dims[d].multiplier();
      if (dims[d].has_symbol() && multiplier > 0 && input_sizes[i][d] >= 0 &&
          input_sizes[i][d] % multiplier == 0) {
        values[dims[d].symbol()] = input_sizes[i][d] / multiplier;
      }
    }
  }
  return values;
}

kiln::v1::Graph Specialize(kiln::v1::Graph graph, std::map<std::string, int64_t> values) {
  // A symbol stated equal to a fixed one is fixed too.
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& relation : graph.relations()) {
      if (!relation.has_equal()) continue;
      const std::string& lhs = relation.equal().lhs();
      const std::string& rhs = relation.equal().rhs();
      if (values.count(lhs) == values.count(rhs)) continue;
      if (values.count(lhs)) {
        values[rhs] = values[lhs];
      } else {
        values[lhs] = values[rhs];
      }
      grew = true;
    }
  }
  auto fix = [&](kiln::v1::TensorType* type) {
    bool changed = false;
    // Each fixed symbol of the product goes into the multiplier.
    auto fix_dim = [&](kiln::v1::Dim& dim) {
      if (!dim.has_symbol()) return false;
      int64_t multiplier = dim.multiplier() == 0 ? 1 : dim.multiplier();
      std::vector<std::string> left;
      bool fixed = false, overflow = false;
      auto take = [&](const std::string& symbol) {
        auto value = values.find(symbol);
        if (value == values.end()) {
          left.push_back(symbol);
        } else {
          const std::optional<int64_t> product = limits::CheckedMul(multiplier, value->second);
          overflow |= !product.has_value();
          multiplier = product.value_or(0);
          fixed = true;
        }
      };
      take(dim.symbol());
      for (const std::string& symbol : dim.times()) take(symbol);
      // A size past int64 is no size: the dim stays as it was, and
      // verifying the graph names it.
      if (!fixed || overflow) return false;
      dim.clear_times();
      dim.clear_multiplier();
      if (left.empty() || multiplier == 0) {  // (on the wire, multiplier 0 means 1)
        dim.set_constant(multiplier);
        return true;
      }
      dim.set_symbol(left[0]);
      if (multiplier != 1) dim.set_multiplier(multiplier);
      for (size_t i = 1; i < left.size(); ++i) dim.add_times(left[i]);
      return true;
    };
    for (kiln::v1::Dim& dim : *type->mutable_sizes()) changed |= fix_dim(dim);
    for (kiln::v1::Dim& dim : *type->mutable_strides()) fix_dim(dim);
    // Symbolic types are contiguous: recomputed from the new sizes. Others
    // keep their strides (a transposed weight stays transposed).
    if (changed) type->clear_strides();
  };
  for (auto& input : *graph.mutable_inputs()) fix(input.mutable_type());
  for (auto& node : *graph.mutable_nodes()) {
    for (auto& type : *node.mutable_output_types()) fix(&type);
  }
  FixSymbolicArguments(graph, values);
  DropRelationsOfLostSymbols(graph);
  return graph;
}

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
