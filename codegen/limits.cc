#include "codegen/limits.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::limits {
namespace {

// Each symbol is at least 2, so a product of more symbols than this has
// more than kMaxTensorElements elements whatever the coefficient.
constexpr int64_t kMaxSymbolsPerProduct = 40;

// "more than 9223372036854775807" when a count overflowed, else the count.
std::string CountText(std::optional<int64_t> count) {
  return count ? absl::StrCat(*count)
               : absl::StrCat("more than ", std::numeric_limits<int64_t>::max());
}

// The product of the dims' values, zero dims counted as 1 (a zero dim
// leaves every other dim's loops and strides as large); nullopt on overflow.
// `value` gives each dim's value.
template <typename DimValue>
std::optional<int64_t> SpannedElements(const std::vector<ir::Dim>& sizes, DimValue value) {
  int64_t elements = 1;
  for (const ir::Dim& dim : sizes) {
    const std::optional<int64_t> size = value(dim);
    if (!size) return std::nullopt;
    const std::optional<int64_t> product = CheckedMul(elements, std::max<int64_t>(*size, 1));
    if (!product) return std::nullopt;
    elements = *product;
  }
  return elements;
}

// `elements` of `dtype` against kMaxTensorElements and kMaxTensorBytes.
// `what` says which tensor and at which sizes.
absl::Status CheckElementsAndBytes(std::optional<int64_t> elements, ir::DType dtype,
                                   const std::string& what) {
  if (!elements || *elements > kMaxTensorElements) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", CountText(elements),
                     " elements, over the limit kMaxTensorElements = ", kMaxTensorElements));
  }
  const std::optional<int64_t> bytes = CheckedMul(*elements, ir::DTypeSize(dtype));
  if (!bytes || *bytes > kMaxTensorBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", CountText(bytes),
                     " bytes, over the limit kMaxTensorBytes = ", kMaxTensorBytes));
  }
  return absl::OkStatus();
}

// The least value a dim takes: its constant, or its multiplier with every
// symbol at 2.
std::optional<int64_t> LeastValue(const ir::Dim& dim) {
  if (!dim.is_symbolic()) return dim.constant;
  if (static_cast<int64_t>(dim.times.size()) + 1 > kMaxSymbolsPerProduct) return std::nullopt;
  return CheckedMul(dim.multiplier, int64_t{1} << (dim.times.size() + 1));
}

std::string ShapeText(const ir::TensorType& type, const ir::Graph& graph) {
  return ir::ToString(ir::TensorType{type.dtype, type.sizes, ir::ContiguousStrides(type.sizes)},
                      graph);
}

// Elements a static type's memory spans: 1 + sum (size - 1) * stride, or 0
// when it is empty; nullopt on overflow.
std::optional<int64_t> StorageExtent(const ir::TensorType& type) {
  int64_t extent = 1;
  for (size_t d = 0; d < type.sizes.size(); ++d) {
    if (type.sizes[d].constant == 0) return 0;
    const std::optional<int64_t> reach =
        CheckedMul(type.sizes[d].constant - 1, type.strides[d].constant());
    if (!reach) return std::nullopt;
    const std::optional<int64_t> sum = CheckedAdd(extent, *reach);
    if (!sum) return std::nullopt;
    extent = *sum;
  }
  return extent;
}

}  // namespace

absl::Status CheckNameLength(const std::string& name, const std::string& what) {
  if (static_cast<int64_t>(name.size()) <= kMaxNameLength) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " is ", name.size(), " bytes long, over the limit kMaxNameLength = ", kMaxNameLength));
}

absl::Status CheckCount(int64_t count, int64_t limit, const char* limit_name,
                        const std::string& what) {
  if (count <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " has ", count, ", over the limit ", limit_name, " = ", limit));
}

absl::Status CheckSymExpr(const ir::SymExpr& expr, const std::string& where) {
  if (static_cast<int64_t>(expr.terms.size()) > kMaxTermsPerExpression) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has ", expr.terms.size(),
                     " terms, over the limit kMaxTermsPerExpression = ", kMaxTermsPerExpression));
  }
  for (const ir::SymExpr::Term& term : expr.terms) {
    if (term.coefficient > kMaxTensorElements || term.coefficient < -kMaxTensorElements) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " has the coefficient ", term.coefficient,
                       ", over the limit kMaxTensorElements = ", kMaxTensorElements));
    }
    if (static_cast<int64_t>(term.symbols.size()) > kMaxSymbolsPerProduct) {
      return absl::InvalidArgumentError(absl::StrCat(where, " multiplies ", term.symbols.size(),
                                                     " symbols: at 2 each, over the limit ",
                                                     "kMaxTensorElements = ", kMaxTensorElements));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTensorType(const ir::TensorType& type, const ir::Graph& graph,
                             const std::string& where) {
  if (type.rank() > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": rank ", type.rank(), ", over the limit kMaxRank = ", kMaxRank));
  }
  const std::optional<int64_t> elements = SpannedElements(type.sizes, LeastValue);
  const bool symbolic = !type.is_static();
  const absl::Status sizes = CheckElementsAndBytes(
      elements, type.dtype,
      absl::StrCat(where, ": ", ShapeText(type, graph), symbolic ? " (its symbols at 2)" : ""));
  if (!sizes.ok()) return sizes;
  for (size_t d = 0; d < type.strides.size(); ++d) {
    const absl::Status stride = CheckSymExpr(type.strides[d], absl::StrCat(where, ": stride ", d));
    if (!stride.ok()) return stride;
  }
  if (symbolic) return absl::OkStatus();  // the client checks strides against real tensors
  const std::optional<int64_t> extent = StorageExtent(type);
  if (!extent || *extent > kMaxTensorElements) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": strides span ", CountText(extent),
        " elements of memory, over the limit kMaxTensorElements = ", kMaxTensorElements));
  }
  return absl::OkStatus();
}

absl::Status CheckRunTimeSizes(const ir::Graph& graph, const std::vector<int64_t>& symbol_values) {
  if (symbol_values.size() != graph.symbols.size()) {
    return absl::InvalidArgumentError(absl::StrCat(symbol_values.size(), " symbol values for ",
                                                   graph.symbols.size(), " symbols"));
  }
  auto value = [&](const ir::Dim& dim) -> std::optional<int64_t> {
    if (!dim.is_symbolic()) return dim.constant;
    std::optional<int64_t> product = CheckedMul(dim.multiplier, symbol_values[dim.symbol]);
    for (int symbol : dim.times) {
      if (product) product = CheckedMul(*product, symbol_values[symbol]);
    }
    return product;
  };
  for (size_t s = 0; s < symbol_values.size(); ++s) {
    if (symbol_values[s] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("symbol ", graph.symbols[s], " = ", symbol_values[s], " is negative"));
    }
  }
  // "float32[s0, 64] at s0 = 4096": the type and the values of its symbols.
  auto bound = [&](const ir::TensorType& type) {
    std::vector<int> used;
    for (const ir::Dim& dim : type.sizes) {
      if (!dim.is_symbolic()) continue;
      used.push_back(dim.symbol);
      used.insert(used.end(), dim.times.begin(), dim.times.end());
    }
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
    return absl::StrCat(ShapeText(type, graph), " at ",
                        absl::StrJoin(used, ", ", [&](std::string* out, int s) {
                          absl::StrAppend(out, graph.symbols[s], " = ", symbol_values[s]);
                        }));
  };
  auto check = [&](int value_index, const std::string& where) -> absl::Status {
    const ir::TensorType& type = graph.values[value_index];
    if (type.is_static()) return absl::OkStatus();  // import checked it
    for (size_t d = 0; d < type.sizes.size(); ++d) {
      const std::optional<int64_t> size = value(type.sizes[d]);
      if (!size || *size > kMaxTensorElements) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": dim ", d, " of ", bound(type), " is ", CountText(size),
                         ", over the limit kMaxTensorElements = ", kMaxTensorElements));
      }
    }
    return CheckElementsAndBytes(SpannedElements(type.sizes, value), type.dtype,
                                 absl::StrCat(where, ": ", bound(type)));
  };
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const std::string name = i < graph.input_names.size() ? graph.input_names[i] : "";
    const absl::Status status = check(graph.inputs[i], absl::StrCat("input ", i, " '", name, "'"));
    if (!status.ok()) return status;
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const ir::Node& node = graph.nodes[n];
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const absl::Status status =
          check(node.outputs[k],
                absl::StrCat("node ", n, " '", node.name, "' (", node.op, ") result ", k));
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

int64_t LargestSafeSymbolValue(const ir::Graph& graph) {
  std::vector<int64_t> values(graph.symbols.size());
  auto passes = [&](int64_t value) {
    std::fill(values.begin(), values.end(), value);
    return CheckRunTimeSizes(graph, values).ok();
  };
  if (!passes(1)) return 0;
  int64_t low = 1, high = kMaxTensorElements;  // passes(low) holds; find the last that does
  if (passes(high)) return high;
  while (high - low > 1) {
    const int64_t middle = low + (high - low) / 2;
    (passes(middle) ? low : high) = middle;
  }
  return low;
}

}  // namespace kiln::limits
