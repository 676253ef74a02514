#include "client/specialization.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/warmup_plan.h"
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

Specializations PlanSpecializations(const kiln::v1::Graph& graph,
                                    absl::Span<const TensorView> inputs) {
  Specializations planned;
  planned.small_size = SmallSizeSpecialization(graph, inputs);
  if (!planned.small_size.has_value()) {
    planned.respecialization = PlanRespecialization(graph, inputs);
  }
  return planned;
}

std::vector<absl::StatusOr<kiln::v1::Graph>> RetypedCandidates(const kiln::v1::Graph& graph,
                                                               const Respecialization& plan) {
  std::vector<absl::StatusOr<kiln::v1::Graph>> graphs;
  for (const InputDims& sizes : plan.candidates) graphs.push_back(Retype(graph, sizes));
  return graphs;
}

namespace {

std::string InputName(const kiln::v1::Graph& graph, int i) {
  return absl::StrCat("input ", i, " '", graph.inputs(i).name(), "'");
}

// InvalidArgument unless `sizes` has one entry per input, with its rank,
// and no negative size.
absl::Status CheckShapeOfSizes(const kiln::v1::Graph& graph,
                               const std::vector<std::vector<int64_t>>& sizes) {
  if (static_cast<int>(sizes.size()) != graph.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("the graph has ", graph.inputs_size(),
                                                   " inputs; the sizes give ", sizes.size()));
  }
  for (int i = 0; i < graph.inputs_size(); ++i) {
    const int rank = graph.inputs(i).type().sizes_size();
    if (static_cast<int>(sizes[i].size()) != rank) {
      return absl::InvalidArgumentError(absl::StrCat(InputName(graph, i), " has ", rank,
                                                     " dims; the sizes give ", sizes[i].size(),
                                                     " (", absl::StrJoin(sizes[i], "x"), ")"));
    }
    for (int64_t size : sizes[i]) {
      if (size < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(InputName(graph, i), ": size ", size, " is negative"));
      }
    }
  }
  return absl::OkStatus();
}

// The symbols `candidate` names that `graph`'s inputs do not: the dims a
// respecialization made symbolic.
std::vector<std::string> NewSymbols(const kiln::v1::Graph& graph, const InputDims& candidate) {
  std::vector<std::string> symbols;
  for (size_t i = 0; i < candidate.size(); ++i) {
    for (size_t d = 0; d < candidate[i].size(); ++d) {
      const kiln::v1::Dim& dim = candidate[i][d];
      if (dim.has_symbol() && !graph.inputs(i).type().sizes(d).has_symbol() &&
          std::find(symbols.begin(), symbols.end(), dim.symbol()) == symbols.end()) {
        symbols.push_back(dim.symbol());
      }
    }
  }
  return symbols;
}

}  // namespace

absl::Status CheckGraphTakesSizes(const kiln::v1::Graph& graph,
                                  const std::vector<std::vector<int64_t>>& sizes) {
  if (absl::Status shape = CheckShapeOfSizes(graph, sizes); !shape.ok()) return shape;
  std::map<std::string, int64_t> values;
  std::map<std::string, std::string> bound_by;  // symbol -> the dim that bound it
  for (int i = 0; i < graph.inputs_size(); ++i) {
    for (int d = 0; d < graph.inputs(i).type().sizes_size(); ++d) {
      const kiln::v1::Dim& dim = graph.inputs(i).type().sizes(d);
      const int64_t size = sizes[i][d];
      const std::string where = absl::StrCat(InputName(graph, i), " dim ", d);
      if (!dim.has_symbol()) {
        if (size != dim.constant()) {
          return absl::FailedPreconditionError(
              absl::StrCat(where, " is ", size, "; the graph has ", dim.constant()));
        }
        continue;
      }
      const int64_t multiplier = dim.multiplier() == 0 ? 1 : dim.multiplier();
      if (size % multiplier != 0) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, " is ", size, "; the graph has ", multiplier, "*", dim.symbol()));
      }
      const int64_t value = size / multiplier;
      const auto [it, inserted] = values.emplace(dim.symbol(), value);
      if (!inserted && it->second != value) {
        return absl::FailedPreconditionError(absl::StrCat(where, " makes ", dim.symbol(), " = ",
                                                          value, "; ", bound_by[dim.symbol()],
                                                          " made it ", it->second));
      }
      bound_by.emplace(dim.symbol(), where);
      if (value < 2) {
        return absl::FailedPreconditionError(absl::StrCat(
            where, " makes ", dim.symbol(), " = ", value, "; symbolic sizes are at least 2"));
      }
    }
  }
  for (const kiln::v1::SymbolRelation& relation : graph.relations()) {
    if (relation.has_equal()) {
      const auto lhs = values.find(relation.equal().lhs());
      const auto rhs = values.find(relation.equal().rhs());
      if (lhs != values.end() && rhs != values.end() && lhs->second != rhs->second) {
        return absl::FailedPreconditionError(absl::StrCat(lhs->first, " = ", lhs->second, " and ",
                                                          rhs->first, " = ", rhs->second,
                                                          "; the graph states them equal"));
      }
    } else if (relation.has_range()) {
      const auto& range = relation.range();
      const auto it = values.find(range.symbol());
      if (it != values.end() &&
          (it->second < range.min() || (range.max() != 0 && it->second > range.max()))) {
        return absl::FailedPreconditionError(absl::StrCat(
            range.symbol(), " = ", it->second, "; the graph states ", range.min(),
            " <= ", range.symbol(), range.max() != 0 ? absl::StrCat(" <= ", range.max()) : ""));
      }
    } else if (relation.has_divisible()) {
      const auto& divisible = relation.divisible();
      const auto it = values.find(divisible.symbol());
      if (it != values.end() && divisible.divisor() > 0 && it->second % divisible.divisor() != 0) {
        return absl::FailedPreconditionError(absl::StrCat(divisible.symbol(), " = ", it->second,
                                                          "; the graph states ", divisible.symbol(),
                                                          " % ", divisible.divisor(), " == 0"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SizedRequest>> RequestsForSizes(
    const kiln::v1::Graph& graph, const std::vector<std::vector<int64_t>>& sizes) {
  if (absl::Status shape = CheckShapeOfSizes(graph, sizes); !shape.ok()) return shape;
  if (CheckGraphTakesSizes(graph, sizes).ok())
    return std::vector<SizedRequest>{{graph, "the graph as given"}};
  // As CompiledGraph sees them: views of contiguous tensors, no data.
  std::vector<std::vector<int64_t>> strides;
  for (const auto& dims : sizes) strides.push_back(ContiguousStrides(dims));
  std::vector<TensorView> inputs;
  for (int i = 0; i < graph.inputs_size(); ++i) {
    inputs.push_back(TensorView{nullptr, graph.inputs(i).type().dtype(), sizes[i], strides[i]});
  }
  Specializations planned = PlanSpecializations(graph, inputs);
  if (planned.small_size.has_value()) {
    return std::vector<SizedRequest>{
        {*std::move(planned.small_size), "the static specialization for symbols at 0 or 1"}};
  }
  if (!planned.respecialization.ok()) return planned.respecialization.status();
  const Respecialization& plan = *planned.respecialization;
  std::vector<absl::StatusOr<kiln::v1::Graph>> retyped = RetypedCandidates(graph, plan);
  std::vector<SizedRequest> requests;
  absl::Status first_refusal;
  for (size_t c = 0; c < retyped.size(); ++c) {
    if (!retyped[c].ok()) {
      if (first_refusal.ok()) first_refusal = retyped[c].status();
      continue;
    }
    const std::vector<std::string> symbols = NewSymbols(graph, plan.candidates[c]);
    requests.push_back({*std::move(retyped[c]),
                        symbols.empty() ? "re-typed for the exact sizes"
                                        : absl::StrCat("re-typed, changed dims symbolic (",
                                                       absl::StrJoin(symbols, ", "), ")")});
  }
  if (requests.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no specialization of the graph takes these sizes: ", first_refusal.message()));
  }
  return requests;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> ParseInputSizes(const kiln::v1::Graph& graph,
                                                                  absl::string_view text) {
  const std::vector<absl::string_view> items = absl::StrSplit(text, ',');
  const bool by_symbol = absl::StrContains(text, '=');
  if (by_symbol) {
    std::set<std::string> symbols;
    for (const kiln::v1::Input& input : graph.inputs()) {
      for (const kiln::v1::Dim& dim : input.type().sizes()) {
        if (dim.has_symbol()) symbols.insert(dim.symbol());
      }
    }
    std::map<std::string, int64_t> bucket;
    for (absl::string_view item : items) {
      const std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(item, '=');
      int64_t value;
      if (!absl::StrContains(item, '=') || parts.first.empty() ||
          !absl::SimpleAtoi(parts.second, &value) || value < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", item,
                         "' is not NAME=SIZE (give symbol sizes as B=8,S=16, or every input's dims "
                         "as 8x64,64x32)"));
      }
      if (!symbols.count(std::string(parts.first))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the graph's inputs have no symbol ", parts.first,
            symbols.empty() ? " (they have none)"
                            : absl::StrCat(" (they have ", absl::StrJoin(symbols, ", "), ")")));
      }
      bucket[std::string(parts.first)] = value;
    }
    return BucketInputSizes(graph, bucket);
  }
  std::vector<std::vector<int64_t>> sizes;
  for (absl::string_view item : items) {
    std::vector<int64_t>& dims = sizes.emplace_back();
    if (item.empty()) continue;  // a 0-d input
    for (absl::string_view dim : absl::StrSplit(item, 'x')) {
      int64_t size;
      if (!absl::SimpleAtoi(dim, &size) || size < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "'", item,
            "' is not an input's dims (write them as 8x64; inputs separated by commas, "
            "or symbol sizes as B=8,S=16)"));
      }
      dims.push_back(size);
    }
  }
  if (static_cast<int>(sizes.size()) != graph.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("the graph has ", graph.inputs_size(),
                                                   " inputs; '", text, "' gives ", sizes.size()));
  }
  return sizes;
}

std::string InputSizesString(const std::vector<std::vector<int64_t>>& sizes) {
  std::vector<std::string> inputs;
  for (const auto& dims : sizes) inputs.push_back(absl::StrJoin(dims, "x"));
  return absl::StrJoin(inputs, ",");
}

}  // namespace kiln
