#include "codegen/guards.h"

#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/str_cat.h"
#include "codegen/import.h"

namespace kiln {

kiln::v1::Guards ExactGuards(const ir::Graph& graph) {
  kiln::v1::Guards guards;
  for (int input : graph.inputs) {
    const kiln::v1::TensorType type = ExportTensorType(graph.values[input], graph);
    kiln::v1::InputGuard* guard = guards.add_inputs();
    guard->set_dtype(type.dtype());
    guard->set_device("cpu");
    guard->set_rank(type.sizes_size());
    *guard->mutable_sizes() = type.sizes();
    *guard->mutable_strides() = type.strides();
    guard->set_requires_grad(type.requires_grad());
  }
  for (size_t s = 0; s < graph.symbols.size(); ++s) {
    const ir::SymbolBounds& bounds = graph.bounds[s];
    if (bounds.min > 2 || bounds.max != 0) {
      auto* range = guards.add_relations()->mutable_range();
      range->set_symbol(graph.symbols[s]);
      range->set_min(bounds.min);
      range->set_max(bounds.max);
    }
    if (bounds.divisor > 1) {
      auto* divisible = guards.add_relations()->mutable_divisible();
      divisible->set_symbol(graph.symbols[s]);
      divisible->set_divisor(bounds.divisor);
    }
  }
  return guards;
}

absl::StatusOr<kiln::v1::Guards> ResolveGuards(const ir::Graph& graph,
                                               const kiln::v1::Guards& requested) {
  kiln::v1::Guards exact = ExactGuards(graph);
  if (requested.inputs_size() == 0 && requested.relations_size() == 0) return exact;
  if (requested.inputs_size() != exact.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("guards describe ", requested.inputs_size(),
                                                   " inputs; the graph has ", exact.inputs_size()));
  }
  for (int i = 0; i < exact.inputs_size(); ++i) {
    if (!google::protobuf::util::MessageDifferencer::Equals(requested.inputs(i), exact.inputs(i))) {
      return absl::UnimplementedError(
          absl::StrCat("guards for input ", i,
                       " differ from its type in the graph; only exact guards are "
                       "supported until dynamic shapes land"));
    }
  }
  google::protobuf::util::MessageDifferencer relations;
  relations.TreatAsSet(kiln::v1::Guards::descriptor()->FindFieldByName("relations"));
  kiln::v1::Guards requested_relations, exact_relations;
  *requested_relations.mutable_relations() = requested.relations();
  *exact_relations.mutable_relations() = exact.relations();
  if (!relations.Compare(requested_relations, exact_relations)) {
    return absl::UnimplementedError(
        "guard relations differ from the graph's; state them in the graph (Graph.relations)");
  }
  return exact;
}

}  // namespace kiln
