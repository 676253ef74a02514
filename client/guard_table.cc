#include "client/guard_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

std::string InputName(const kiln::v1::Graph& graph, size_t i) {
  if (i < static_cast<size_t>(graph.inputs_size()) && !graph.inputs(i).name().empty()) {
    return absl::StrCat("input ", i, " '", graph.inputs(i).name(), "'");
  }
  return absl::StrCat("input ", i);
}

// The index of `name` among the signature's symbols, -1 when it is none.
int SymbolIndex(const kiln::v1::Signature& signature, const std::string& name) {
  for (int s = 0; s < signature.symbols_size(); ++s) {
    if (signature.symbols(s) == name) return s;
  }
  return -1;
}

GuardTable::Size ToSize(const kiln::v1::Dim& dim, const kiln::v1::Signature& signature) {
  GuardTable::Size size;
  if (!dim.has_symbol()) {
    size.constant = dim.constant();
    return size;
  }
  size.symbol = SymbolIndex(signature, dim.symbol());
  size.multiplier = dim.multiplier() == 0 ? 1 : dim.multiplier();
  for (const std::string& name : dim.times()) size.times.push_back(SymbolIndex(signature, name));
  return size;
}

std::vector<GuardTable::Size> ToSizes(const google::protobuf::RepeatedPtrField<kiln::v1::Dim>& dims,
                                      const kiln::v1::Signature& signature) {
  std::vector<GuardTable::Size> sizes;
  for (const kiln::v1::Dim& dim : dims) sizes.push_back(ToSize(dim, signature));
  return sizes;
}

}  // namespace

absl::StatusOr<GuardTable> GuardTable::Create(const kiln::v1::Signature& signature,
                                              const kiln::v1::Guards& guards,
                                              const kiln::v1::Graph& graph) {
  if (signature.symbols_size() > kMaxSymbols) {
    return absl::UnimplementedError(absl::StrCat("the graph has ", signature.symbols_size(),
                                                 " size symbols; at most ", kMaxSymbols));
  }
  GuardTable table;
  table.symbol_names_.assign(signature.symbols().begin(), signature.symbols().end());
  for (int i = 0; i < signature.inputs_size(); ++i) {
    const kiln::v1::TensorType& type = signature.inputs(i);
    table.input_names_.push_back(InputName(graph, i));
    table.dtypes_.push_back(type.dtype());
    table.sizes_.push_back(ToSizes(type.sizes(), signature));
    table.strides_.push_back(ToSizes(type.strides(), signature));
  }
  for (const kiln::v1::TensorType& type : signature.outputs()) {
    table.output_sizes_.push_back(ToSizes(type.sizes(), signature));
  }
  table.bounds_.resize(signature.symbols_size());
  for (const kiln::v1::SymbolRelation& relation : guards.relations()) {
    // Canonical guards: ranges and divisors of signature symbols only.
    const auto bad = [&](const char* why) {
      return absl::InternalError(
          absl::StrCat("artifact guard relation ", relation.ShortDebugString(), ": ", why));
    };
    if (!relation.has_range() && !relation.has_divisible()) return bad("not a range or divisor");
    const int symbol = SymbolIndex(signature, relation.has_range() ? relation.range().symbol()
                                                                   : relation.divisible().symbol());
    if (symbol < 0) return bad("names no symbol of the signature");
    Bounds& bounds = table.bounds_[symbol];
    if (relation.has_range()) {
      bounds.min = std::max<int64_t>(2, relation.range().min());
      bounds.max = relation.range().max();
      if (bounds.max < 0 || (bounds.max != 0 && bounds.max < bounds.min)) return bad("empty range");
    } else {
      bounds.divisor = relation.divisible().divisor();
      if (bounds.divisor <= 0) return bad("divisor is not positive");
    }
  }
  return table;
}

bool GuardTable::Check(absl::Span<const TensorView> inputs, Symbols& symbols,
                       absl::Status* why) const {
  return CheckImpl(inputs, symbols, why, /*strides=*/true);
}

bool GuardTable::CheckCopyable(absl::Span<const TensorView> inputs, Symbols& symbols) const {
  if (!CheckImpl(inputs, symbols, nullptr, /*strides=*/false)) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (StridesPass(i, inputs[i], symbols)) continue;
    if (!HasDistinctElements(inputs[i].sizes, InputStrides(i, inputs[i], symbols))) return false;
  }
  return true;
}

bool GuardTable::StridesPass(size_t i, const TensorView& input, const Symbols& symbols) const {
  return !FirstStrideMiss(i, input, symbols).has_value();
}

std::optional<GuardTable::StrideMiss> GuardTable::FirstStrideMiss(size_t i, const TensorView& input,
                                                                  const Symbols& symbols) const {
  // A dim of size 1 is only ever read at index 0 (and an empty tensor not
  // at all): its stride is moot.
  if (std::find(input.sizes.begin(), input.sizes.end(), 0) != input.sizes.end()) {
    return std::nullopt;
  }
  const std::vector<Size>& strides = strides_[i];
  int64_t contiguous = 1;
  for (size_t d = input.sizes.size(); d-- > 0;) {
    const int64_t expected = strides.empty() ? contiguous : strides[d].Evaluate(symbols);
    contiguous *= input.sizes[d];
    if (input.sizes[d] != 1 && input.strides[d] != expected) return StrideMiss{d, expected};
  }
  return std::nullopt;
}

std::vector<int64_t> GuardTable::InputStrides(size_t i, const TensorView& input,
                                              const Symbols& symbols) const {
  if (strides_[i].empty()) return ContiguousStrides(input.sizes);
  std::vector<int64_t> strides;
  for (const Size& stride : strides_[i]) strides.push_back(stride.Evaluate(symbols));
  return strides;
}

bool GuardTable::CheckImpl(absl::Span<const TensorView> inputs, Symbols& symbols, absl::Status* why,
                           bool check_strides) const {
  const auto fail = [why](const auto& message) {
    if (why != nullptr) *why = absl::FailedPreconditionError(message());
    return false;
  };
  if (inputs.size() != dtypes_.size()) {
    if (why != nullptr) {
      *why = absl::InvalidArgumentError(
          absl::StrCat("got ", inputs.size(), " inputs; the graph takes ", dtypes_.size()));
    }
    return false;
  }
  std::fill(symbols.begin(), symbols.end(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorView& input = inputs[i];
    if (input.dtype != dtypes_[i]) {
      return fail([&] {
        return absl::StrCat(input_names_[i], " has dtype ", kiln::v1::DType_Name(input.dtype),
                            "; the graph was compiled for ", kiln::v1::DType_Name(dtypes_[i]));
      });
    }
    const std::vector<Size>& sizes = sizes_[i];
    if (input.sizes.size() != sizes.size() || input.strides.size() != sizes.size()) {
      return fail([&] {
        return absl::StrCat(input_names_[i], " has rank ", input.sizes.size(),
                            "; the graph expects ", sizes.size());
      });
    }
    for (size_t d = 0; d < sizes.size(); ++d) {
      const Size& size = sizes[d];
      if (size.symbol < 0) {
        if (input.sizes[d] != size.constant) {
          return fail([&] {
            return absl::StrCat(input_names_[i], ": dim ", d, " has size ", input.sizes[d],
                                "; the graph was compiled for ", size.constant, " (static shapes)");
          });
        }
        continue;
      }
      // A symbolic dim: bind its symbol (>= 2, as in PyTorch) or check it.
      const int64_t value = input.sizes[d] / size.multiplier;
      if (input.sizes[d] % size.multiplier != 0 || value < 2) {
        return fail([&] {
          const std::string& name = symbol_names_[size.symbol];
          return absl::StrCat(input_names_[i], ": dim ", d, " has size ", input.sizes[d], "; ",
                              size.multiplier == 1 ? "" : absl::StrCat(size.multiplier, " * "),
                              name, " needs ", name, " >= 2");
        });
      }
      if (symbols[size.symbol] >= 0 && symbols[size.symbol] != value) {
        return fail([&] {
          return absl::StrCat(input_names_[i], ": dim ", d, " makes ", symbol_names_[size.symbol],
                              " = ", value, ", but another input made it ", symbols[size.symbol]);
        });
      }
      symbols[size.symbol] = value;
    }
  }
  // Strides once every symbol is bound.
  for (size_t i = 0; check_strides && i < inputs.size(); ++i) {
    const std::optional<StrideMiss> miss = FirstStrideMiss(i, inputs[i], symbols);
    if (!miss.has_value()) continue;
    return fail([&] {
      return absl::StrCat(input_names_[i], ": dim ", miss->dim, " has stride ",
                          inputs[i].strides[miss->dim], "; the graph was compiled for stride ",
                          miss->expected);
    });
  }
  for (int s = 0; s < num_symbols(); ++s) {
    const Bounds& bounds = bounds_[s];
    const int64_t value = symbols[s];
    if (value >= bounds.min && (bounds.max == 0 || value <= bounds.max) &&
        value % bounds.divisor == 0) {
      continue;
    }
    return fail([&] { return BoundsError(s, inputs, value); });
  }
  return true;
}

std::string GuardTable::BoundsError(int symbol, absl::Span<const TensorView> inputs,
                                    int64_t value) const {
  const Bounds& bounds = bounds_[symbol];
  const std::string& name = symbol_names_[symbol];
  std::string where = name;  // the first dim that binds the symbol
  for (size_t i = 0; i < sizes_.size() && where == name; ++i) {
    for (size_t d = 0; d < sizes_[i].size(); ++d) {
      if (sizes_[i][d].symbol != symbol) continue;
      where = absl::StrCat(input_names_[i], ": dim ", d, " has size ", inputs[i].sizes[d], ", so ",
                           name);
      break;
    }
  }
  std::string promise = absl::StrCat(bounds.min, " <= ", name);
  if (bounds.max != 0) absl::StrAppend(&promise, " <= ", bounds.max);
  if (bounds.divisor > 1) absl::StrAppend(&promise, " and ", name, " % ", bounds.divisor, " == 0");
  return absl::StrCat(where, " = ", value, "; the graph's relations require ", promise);
}

std::string GuardTable::DebugString() const {
  const auto format = [this](const Size& size) {
    if (size.symbol < 0) return absl::StrCat(size.constant);
    std::vector<std::string> factors;
    if (size.multiplier != 1) factors.push_back(absl::StrCat(size.multiplier));
    factors.push_back(symbol_names_[size.symbol]);
    for (int symbol : size.times) factors.push_back(symbol < 0 ? "?" : symbol_names_[symbol]);
    return absl::StrJoin(factors, "*");
  };
  const auto list = [&](const std::vector<Size>& sizes) {
    std::vector<std::string> parts;
    for (const Size& size : sizes) parts.push_back(format(size));
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  };
  std::string out;
  for (size_t i = 0; i < dtypes_.size(); ++i) {
    absl::StrAppend(&out, input_names_[i], ": ", kiln::v1::DType_Name(dtypes_[i]), " ",
                    list(sizes_[i]), " strides ",
                    strides_[i].empty() ? "contiguous" : list(strides_[i]), "\n");
  }
  for (size_t k = 0; k < output_sizes_.size(); ++k) {
    absl::StrAppend(&out, "output ", k, ": ", list(output_sizes_[k]), "\n");
  }
  for (int s = 0; s < num_symbols(); ++s) {
    const Bounds& bounds = bounds_[s];
    const std::string& name = symbol_names_[s];
    absl::StrAppend(&out, name, ": ", bounds.min, " <= ", name);
    if (bounds.max != 0) absl::StrAppend(&out, " <= ", bounds.max);
    if (bounds.divisor > 1) absl::StrAppend(&out, ", ", name, " % ", bounds.divisor, " == 0");
    out += "\n";
  }
  return out;
}

}  // namespace kiln
