#include "client/specialization.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/guard_table.h"
#include "client/warmup_plan.h"

namespace kiln {
namespace {

std::vector<std::vector<int64_t>> SizesOf(absl::Span<const TensorView> inputs) {
  std::vector<std::vector<int64_t>> sizes;
  for (const TensorView& input : inputs) sizes.emplace_back(input.sizes.begin(), input.sizes.end());
  return sizes;
}

// Whether `view` is contiguous (dims of size 1 aside, whose strides are
// moot; an empty tensor always is).
bool ContiguousView(const TensorView& view) {
  if (std::find(view.sizes.begin(), view.sizes.end(), 0) != view.sizes.end()) return true;
  int64_t expected = 1;
  for (size_t d = view.sizes.size(); d-- > 0;) {
    if (view.sizes[d] != 1 && view.strides[d] != expected) return false;
    expected *= view.sizes[d];
  }
  return true;
}

// A product of a coefficient and symbols, as strides are written.
class Monomial {
 public:
  explicit Monomial(int64_t coefficient) : coefficient_(coefficient) {}
  // Multiplied by a size: a constant, or multiplier * symbol * times.
  void Times(const kiln::v1::Dim& dim) {
    if (!dim.has_symbol()) {
      Scale(dim.constant());
      return;
    }
    Scale(dim.multiplier() == 0 ? 1 : dim.multiplier());
    symbols_.push_back(dim.symbol());
    symbols_.insert(symbols_.end(), dim.times().begin(), dim.times().end());
  }
  kiln::v1::Dim ToDim() const {
    kiln::v1::Dim dim;
    if (symbols_.empty() || coefficient_ == 0) {
      dim.set_constant(coefficient_);
      return dim;
    }
    std::vector<std::string> symbols = symbols_;
    std::sort(symbols.begin(), symbols.end());
    dim.set_symbol(symbols[0]);
    if (coefficient_ != 1) dim.set_multiplier(coefficient_);
    for (size_t s = 1; s < symbols.size(); ++s) dim.add_times(symbols[s]);
    return dim;
  }

 private:
  // Saturates: an overflowed product is never used (its stride is no
  // stride the view has).
  void Scale(int64_t factor) {
    if (__builtin_mul_overflow(coefficient_, factor, &coefficient_)) coefficient_ = INT64_MAX;
  }

  int64_t coefficient_;
  std::vector<std::string> symbols_;
};

// The value of `dim` at `values`; nullopt when it names a symbol without one.
std::optional<int64_t> ValueOf(const kiln::v1::Dim& dim,
                               const std::map<std::string, int64_t>& values) {
  if (!dim.has_symbol()) return dim.constant();
  int64_t value = dim.multiplier() == 0 ? 1 : dim.multiplier();
  std::vector<std::string> symbols = {dim.symbol()};
  symbols.insert(symbols.end(), dim.times().begin(), dim.times().end());
  for (const std::string& symbol : symbols) {
    const auto it = values.find(symbol);
    if (it == values.end() || __builtin_mul_overflow(value, it->second, &value)) {
      return std::nullopt;
    }
  }
  return value;
}

// Whether `view` has the strides `type` declares (none: contiguous), its
// symbols at `values`, dims of size 1 aside.
bool HasDeclaredStrides(const kiln::v1::TensorType& type, const TensorView& view,
                        const std::map<std::string, int64_t>& values) {
  if (type.strides_size() == 0) return ContiguousView(view);
  if (type.strides_size() != static_cast<int>(view.strides.size())) return false;
  if (std::find(view.sizes.begin(), view.sizes.end(), 0) != view.sizes.end()) return true;
  for (int d = 0; d < type.strides_size(); ++d) {
    if (view.sizes[d] == 1) continue;
    if (ValueOf(type.strides(d), values) != view.strides[d]) return false;
  }
  return true;
}

// `graph`'s inputs at `sizes` (a candidate's dims), laid out as `inputs`
// are: an input at its declared sizes that passes its declared strides
// keeps them (so the graph re-typed for a call it takes is itself), any
// other declares StridesAsSeen.
InputLayouts LayOut(const kiln::v1::Graph& graph, absl::Span<const TensorView> inputs,
                    const std::vector<std::vector<kiln::v1::Dim>>& sizes) {
  const std::map<std::string, int64_t> values = SymbolValues(graph, SizesOf(inputs));
  InputLayouts layouts(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    const kiln::v1::TensorType& declared = graph.inputs(static_cast<int>(i)).type();
    layouts[i].mutable_sizes()->Add(sizes[i].begin(), sizes[i].end());
    if (SameDims(declared.sizes(), sizes[i]) && HasDeclaredStrides(declared, inputs[i], values)) {
      *layouts[i].mutable_strides() = declared.strides();
    } else {
      const std::vector<kiln::v1::Dim> strides = StridesAsSeen(sizes[i], inputs[i]);
      layouts[i].mutable_strides()->Add(strides.begin(), strides.end());
    }
  }
  return layouts;
}

std::vector<kiln::v1::Dim> DimsOf(const google::protobuf::RepeatedPtrField<kiln::v1::Dim>& dims) {
  return {dims.begin(), dims.end()};
}

}  // namespace

std::vector<kiln::v1::Dim> StridesAsSeen(const std::vector<kiln::v1::Dim>& sizes,
                                         const TensorView& view) {
  if (ContiguousView(view)) return {};
  const int rank = static_cast<int>(view.sizes.size());
  std::vector<int> order;  // dims longer than 1, smallest stride first
  for (int d = rank - 1; d >= 0; --d) {
    if (view.sizes[d] != 1) order.push_back(d);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return view.strides[a] < view.strides[b]; });
  std::vector<kiln::v1::Dim> strides(rank);
  // What a dim's stride must be to follow the dims inside it densely: as a
  // value, and as a product of the candidate's sizes.
  Monomial dense(1);
  int64_t dense_value = 1;
  bool valid = true;
  for (int d : order) {
    if (valid && view.strides[d] == dense_value) {
      strides[d] = dense.ToDim();
    } else {
      strides[d].set_constant(view.strides[d]);
      dense = Monomial(view.strides[d]);
      dense_value = view.strides[d];
      valid = true;
    }
    dense.Times(sizes[d]);
    valid = valid && !__builtin_mul_overflow(dense_value, view.sizes[d], &dense_value);
  }
  for (int d = rank - 1; d >= 0; --d) {
    if (view.sizes[d] != 1) continue;
    if (d == rank - 1) {
      strides[d].set_constant(1);
      continue;
    }
    Monomial next(1);
    next.Times(strides[d + 1]);
    next.Times(sizes[d + 1]);
    strides[d] = next.ToDim();
  }
  return strides;
}

std::optional<SpecializedGraph> SmallSizeSpecialization(const kiln::v1::Graph& graph,
                                                        absl::Span<const TensorView> inputs) {
  std::map<std::string, int64_t> values = SymbolValues(graph, SizesOf(inputs));
  for (auto it = values.begin(); it != values.end();) {
    it = it->second < 2 ? std::next(it) : values.erase(it);
  }
  if (values.empty()) return std::nullopt;
  SpecializedGraph small{Specialize(graph, std::move(values)), {}};
  if (static_cast<int>(inputs.size()) != small.graph.inputs_size()) return small;
  std::vector<std::vector<kiln::v1::Dim>> sizes;
  for (int i = 0; i < small.graph.inputs_size(); ++i) {
    const kiln::v1::TensorType& type = small.graph.inputs(i).type();
    if (type.sizes_size() != static_cast<int>(inputs[i].sizes.size())) return small;
    sizes.push_back(DimsOf(type.sizes()));
  }
  InputLayouts layouts = LayOut(small.graph, inputs, sizes);
  for (size_t i = 0; i < layouts.size(); ++i) {
    // Strided inputs: the static graph laid out as they are.
    if (!SameDims(small.graph.inputs(static_cast<int>(i)).type().strides(),
                  DimsOf(layouts[i].strides()))) {
      small.layouts = std::move(layouts);
      break;
    }
  }
  return small;
}

bool InputTypesTake(const kiln::v1::Graph& graph, const InputLayouts& layouts,
                    absl::Span<const TensorView> inputs, bool copyable) {
  kiln::v1::Signature signature;
  for (int i = 0; i < graph.inputs_size(); ++i) {
    kiln::v1::TensorType& type = *signature.add_inputs();
    type = graph.inputs(i).type();
    if (i < static_cast<int>(layouts.size())) {
      *type.mutable_sizes() = layouts[i].sizes();
      *type.mutable_strides() = layouts[i].strides();
    }
    for (const auto* dims : {&type.sizes(), &type.strides()}) {
      for (const kiln::v1::Dim& dim : *dims) {
        if (!dim.has_symbol()) continue;
        std::vector<std::string> names = {dim.symbol()};
        names.insert(names.end(), dim.times().begin(), dim.times().end());
        for (const std::string& name : names) {
          if (std::find(signature.symbols().begin(), signature.symbols().end(), name) ==
              signature.symbols().end()) {
            signature.add_symbols(name);
          }
        }
      }
    }
  }
  absl::StatusOr<GuardTable> table = GuardTable::Create(signature, {}, graph);
  if (!table.ok()) return true;
  GuardTable::Symbols symbols;
  return copyable ? table->CheckCopyable(inputs, symbols) : table->Check(inputs, symbols);
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
  std::vector<std::vector<kiln::v1::Dim>> symbolic(inputs.size()), exact(inputs.size());
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
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const auto& dim : exact[i]) absl::StrAppend(&plan.sizes_key, dim.constant(), ",");
    if (!ContiguousView(inputs[i])) {
      plan.sizes_key += "@";
      for (int64_t stride : inputs[i].strides) absl::StrAppend(&plan.sizes_key, stride, ",");
    }
    plan.sizes_key += ";";
  }
  // Candidate (a) also when only strides changed, if it keeps a symbol:
  // the symbolic graph laid out as the call is.
  const InputLayouts symbolic_layouts = LayOut(graph, inputs, symbolic);
  bool relaid = false, has_symbol = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    relaid |= !symbolic_layouts[i].strides().empty() &&
              !SameDims(graph.inputs(static_cast<int>(i)).type().strides(),
                        DimsOf(symbolic_layouts[i].strides()));
    for (const kiln::v1::Dim& dim : symbolic[i]) has_symbol |= dim.has_symbol();
  }
  if (!new_symbols.empty() || (relaid && has_symbol)) plan.candidates.push_back(symbolic_layouts);
  for (size_t s = 0; new_symbols.size() > 1 && s < new_symbols.size(); ++s) {
    std::vector<std::vector<kiln::v1::Dim>> one = symbolic;
    for (size_t i = 0; i < one.size(); ++i) {
      for (size_t d = 0; d < one[i].size(); ++d) {
        const bool other_new = one[i][d].has_symbol() && one[i][d].symbol() != new_symbols[s] &&
                               !graph.inputs(i).type().sizes(d).has_symbol();
        if (other_new) one[i][d] = exact[i][d];
      }
    }
    plan.candidates.push_back(LayOut(graph, inputs, one));
  }
  plan.candidates.push_back(LayOut(graph, inputs, exact));
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
std::vector<std::string> NewSymbols(const kiln::v1::Graph& graph, const InputLayouts& candidate) {
  std::vector<std::string> symbols;
  for (size_t i = 0; i < candidate.size(); ++i) {
    for (int d = 0; d < candidate[i].sizes_size(); ++d) {
      const kiln::v1::Dim& dim = candidate[i].sizes(d);
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
                                  const std::vector<std::vector<int64_t>>& sizes,
                                  int64_t smallest_symbol) {
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
      if (value < smallest_symbol) {
        return absl::FailedPreconditionError(absl::StrCat(where, " makes ", dim.symbol(), " = ",
                                                          value, "; symbolic sizes are at least ",
                                                          smallest_symbol));
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
        return absl::FailedPreconditionError(
            absl::StrCat(bound_by[range.symbol()], " makes ", range.symbol(), " = ", it->second,
                         "; the graph states ", range.min(), " <= ", range.symbol(),
                         range.max() != 0 ? absl::StrCat(" <= ", range.max()) : ""));
      }
    } else if (relation.has_divisible()) {
      const auto& divisible = relation.divisible();
      const auto it = values.find(divisible.symbol());
      if (it != values.end() && divisible.divisor() > 0 && it->second % divisible.divisor() != 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            bound_by[divisible.symbol()], " makes ", divisible.symbol(), " = ", it->second,
            "; the graph states ", divisible.symbol(), " % ", divisible.divisor(), " == 0"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SizedRequest>> RequestsForSizes(
    const kiln::v1::Graph& graph, const std::vector<std::vector<int64_t>>& sizes) {
  if (absl::Status shape = CheckShapeOfSizes(graph, sizes); !shape.ok()) return shape;
  if (CheckGraphTakesSizes(graph, sizes).ok())
    return std::vector<SizedRequest>{{{graph, {}}, "the graph as given"}};
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
  std::vector<SizedRequest> requests;
  for (const InputLayouts& candidate : planned.respecialization->candidates) {
    const std::vector<std::string> symbols = NewSymbols(graph, candidate);
    requests.push_back({{graph, candidate},
                        symbols.empty() ? "re-typed for the exact sizes"
                                        : absl::StrCat("re-typed, changed dims symbolic (",
                                                       absl::StrJoin(symbols, ", "), ")")});
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
