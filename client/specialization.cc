#include "client/specialization.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "codegen/retype.h"

namespace kiln {

std::optional<kiln::v1::Graph> SmallSizeSpecialization(const kiln::v1::Graph& graph,
                                                       absl::Span<const TensorView> inputs) {
  std::vector<std::vector<int64_t>> sizes;
  for (const TensorView& input : inputs) sizes.emplace_back(input.sizes.begin(), input.sizes.end());
  std::map<std::string, int64_t> values = SymbolValues(graph, sizes);
  for (auto it = values.begin(); it != values.end();) {
    it = it->second < 2 ? std::next(it) : values.erase(it);
  }
  if (values.empty()) return std::nullopt;
  return Specialize(graph, std::move(values));
}

absl::Status CheckSpecializationLimit(size_t entries, size_t limit, const absl::Status& miss) {
  if (entries < limit) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      miss.message(), "; and the specialization limit (", limit,
      ") is reached: add these sizes as a bucket of a warmup plan (docs/WARMUP.md) or raise the "
      "limit (CompiledGraph::set_specialization_limit)"));
}

absl::StatusOr<Respecialization> PlanRespecialization(const kiln::v1::Graph& graph,
                                                      absl::Span<const TensorView> inputs) {
  if (static_cast<int>(inputs.size()) != graph.inputs_size()) {
    return absl::InvalidArgumentError("input count differs");
  }
  InputDims symbolic(inputs.size()), exact(inputs.size());
  std::vector<std::string> new_symbols;  // in order of first use
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& declared = graph.inputs(i).type();
    if (static_cast<int>(inputs[i].sizes.size()) != declared.sizes_size() ||
        inputs[i].dtype != declared.dtype()) {
      return absl::FailedPreconditionError("rank or dtype differs: no specialization helps");
    }
    for (size_t d = 0; d < inputs[i].sizes.size(); ++d) {
      kiln::v1::Dim dim;
      dim.set_constant(inputs[i].sizes[d]);
      exact[i].push_back(dim);
      const kiln::v1::Dim& old = declared.sizes(d);
      if (!old.has_symbol() && old.constant() != inputs[i].sizes[d] && inputs[i].sizes[d] >= 2 &&
          old.constant() >= 2) {
        kiln::v1::Dim symbol;
        symbol.set_symbol(absl::StrCat("d", old.constant(), "_", inputs[i].sizes[d]));
        symbolic[i].push_back(symbol);
        if (std::find(new_symbols.begin(), new_symbols.end(), symbol.symbol()) ==
            new_symbols.end()) {
          new_symbols.push_back(symbol.symbol());
        }
      } else {
        symbolic[i].push_back(old.has_symbol() ? old : dim);
      }
    }
  }
  Respecialization plan;
  for (const auto& sizes : exact) {
    for (const auto& dim : sizes) absl::StrAppend(&plan.sizes_key, dim.constant(), ",");
    plan.sizes_key += ";";
  }
  if (!new_symbols.empty()) plan.candidates.push_back(symbolic);
  for (size_t s = 0; new_symbols.size() > 1 && s < new_symbols.size(); ++s) {
    InputDims one = symbolic;
    for (size_t i = 0; i < one.size(); ++i) {
      for (size_t d = 0; d < one[i].size(); ++d) {
        const bool other_new = one[i][d].has_symbol() && one[i][d].symbol() != new_symbols[s] &&
                               !graph.inputs(i).type().sizes(d).has_symbol();
        if (other_new) one[i][d] = exact[i][d];
      }
    }
    plan.candidates.push_back(std::move(one));
  }
  plan.candidates.push_back(std::move(exact));
  return plan;
}

}  // namespace kiln
