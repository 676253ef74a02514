#include "proto/specialize.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_set.h"

namespace kiln {

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
          // refuses any coefficient past kMaxTensorElements (codegen/limits.h).
          const int64_t a = term.coefficient(), b = value->second;
          int64_t product;
          if (__builtin_mul_overflow(a, b, &product)) {
            product = (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
          }
          term.set_coefficient(product);
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
          int64_t product;
          overflow |= __builtin_mul_overflow(multiplier, value->second, &product);
          multiplier = overflow ? 0 : product;
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

}  // namespace kiln
