#include "abi/run_time_sizes.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

std::optional<int64_t> Multiply(int64_t a, int64_t b) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

// "more than 9223372036854775807" when a count overflowed, else the count.
std::string CountText(std::optional<int64_t> count) {
  return count ? absl::StrCat(*count)
               : absl::StrCat("more than ", std::numeric_limits<int64_t>::max());
}

}  // namespace

absl::Status CheckSymbolValues(const kiln::v1::RunTimeSizes& sizes,
                               absl::Span<const int64_t> symbol_values) {
  if (static_cast<int>(symbol_values.size()) != sizes.symbols_size()) {
    return absl::InvalidArgumentError(absl::StrCat(symbol_values.size(), " symbol values for ",
                                                   sizes.symbols_size(), " symbols"));
  }
  for (int s = 0; s < sizes.symbols_size(); ++s) {
    if (symbol_values[s] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("symbol ", sizes.symbols(s), " = ", symbol_values[s], " is negative"));
    }
  }
  auto value = [&](const kiln::v1::SymbolicSize& size) -> std::optional<int64_t> {
    std::optional<int64_t> product = size.multiplier();
    for (int symbol : size.symbols()) {
      if (symbol < 0 || symbol >= sizes.symbols_size()) return std::nullopt;
      if (product) product = Multiply(*product, symbol_values[symbol]);
    }
    return product;
  };
  for (const kiln::v1::SymbolicTensor& tensor : sizes.tensors()) {
    // "float32[s0, 64] at s0 = 4096".
    auto bound = [&] {
      std::vector<int> used;
      for (const kiln::v1::SymbolicSize& size : tensor.sizes()) {
        used.insert(used.end(), size.symbols().begin(), size.symbols().end());
      }
      std::sort(used.begin(), used.end());
      used.erase(std::unique(used.begin(), used.end()), used.end());
      return absl::StrCat(tensor.shape(), " at ",
                          absl::StrJoin(used, ", ", [&](std::string* out, int s) {
                            absl::StrAppend(out, sizes.symbols(s), " = ", symbol_values[s]);
                          }));
    };
    // Elements from the first dim on (each dim's from the dims inside it
    // are no more), zero dims counted as 1: a zero dim leaves every other
    // dim's loops and strides as large.
    std::optional<int64_t> elements = 1;
    for (int d = 0; d < tensor.sizes_size(); ++d) {
      const std::optional<int64_t> size = value(tensor.sizes(d));
      if (!size || *size > sizes.max_tensor_elements()) {
        return absl::InvalidArgumentError(
            absl::StrCat(tensor.where(), ": dim ", d, " of ", bound(), " is ", CountText(size),
                         ", over the limit kMaxTensorElements = ", sizes.max_tensor_elements()));
      }
      if (elements) elements = Multiply(*elements, std::max<int64_t>(*size, 1));
    }
    if (!elements || *elements > sizes.max_tensor_elements()) {
      return absl::InvalidArgumentError(absl::StrCat(
          tensor.where(), ": ", bound(), " has ", CountText(elements),
          " elements, over the limit kMaxTensorElements = ", sizes.max_tensor_elements()));
    }
    const std::optional<int64_t> bytes = Multiply(*elements, tensor.element_bytes());
    if (!bytes || *bytes > sizes.max_tensor_bytes()) {
      return absl::InvalidArgumentError(
          absl::StrCat(tensor.where(), ": ", bound(), " has ", CountText(bytes),
                       " bytes, over the limit kMaxTensorBytes = ", sizes.max_tensor_bytes()));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
