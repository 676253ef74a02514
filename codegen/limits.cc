#include "codegen/limits.h"

#include <algorithm>
#include <limits>

#include "abi/run_time_sizes.h"
#include "absl/container/flat_hash_set.h"
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

kiln::v1::RunTimeSizes RunTimeSizesOf(const ir::Graph& graph) {
  kiln::v1::RunTimeSizes sizes;
  sizes.set_max_tensor_elements(kMaxTensorElements);
  sizes.set_max_tensor_bytes(kMaxTensorBytes);
  for (const std::string& symbol : graph.symbols) sizes.add_symbols(symbol);
  absl::flat_hash_set<std::string> shapes;
  auto add = [&](int value_index, const std::string& where) {
    const ir::TensorType& type = graph.values[value_index];
    if (type.is_static()) return;  // import checked it
    std::string shape = ShapeText(type, graph);
    if (!shapes.insert(shape).second) return;
    kiln::v1::SymbolicTensor& tensor = *sizes.add_tensors();
    tensor.set_where(where);
    tensor.set_shape(std::move(shape));
    tensor.set_element_bytes(ir::DTypeSize(type.dtype));
    for (const ir::Dim& dim : type.sizes) {
      kiln::v1::SymbolicSize& size = *tensor.add_sizes();
      if (!dim.is_symbolic()) {
        size.set_multiplier(dim.constant);
        continue;
      }
      size.set_multiplier(dim.multiplier);
      size.add_symbols(dim.symbol);
      for (int symbol : dim.times) size.add_symbols(symbol);
    }
  };
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const std::string name = i < graph.input_names.size() ? graph.input_names[i] : "";
    add(graph.inputs[i], absl::StrCat("input ", i, " '", name, "'"));
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const ir::Node& node = graph.nodes[n];
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      add(node.outputs[k],
          absl::StrCat("node ", n, " '", node.name, "' (", node.op, ") result ", k));
    }
  }
  return sizes;
}

absl::Status CheckRunTimeSizes(const ir::Graph& graph, const std::vector<int64_t>& symbol_values) {
  return CheckSymbolValues(RunTimeSizesOf(graph), symbol_values);
}

int64_t LargestSafeSymbolValue(const kiln::v1::RunTimeSizes& sizes) {
  std::vector<int64_t> values(sizes.symbols_size());
  auto passes = [&](int64_t value) {
    std::fill(values.begin(), values.end(), value);
    return CheckSymbolValues(sizes, values).ok();
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
