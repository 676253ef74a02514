#include "tests/ops/compare.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/reference/tensor_data.h"

namespace kiln {
namespace {

struct Format {
  int bits;           // storage width
  int mantissa_bits;  // explicit fraction bits
};

Format FormatOf(DType dtype) {
  switch (dtype) {
    case kiln::v1::FLOAT64:
      return {64, 52};
    case kiln::v1::FLOAT32:
      return {32, 23};
    case kiln::v1::FLOAT16:
      return {16, 10};
    case kiln::v1::BFLOAT16:
      return {16, 7};
    default:
      return {0, 0};
  }
}

uint64_t Magnitude(const Format& format, uint64_t bits) {
  return bits & (~uint64_t{0} >> (65 - format.bits));
}

uint64_t InfinityBits(const Format& format) {
  return ((uint64_t{1} << (format.bits - 1 - format.mantissa_bits)) - 1) << format.mantissa_bits;
}

bool IsNan(const Format& format, uint64_t bits) {
  return Magnitude(format, bits) > InfinityBits(format);
}

bool SignBit(const Format& format, uint64_t bits) { return (bits >> (format.bits - 1)) & 1; }

std::string Shape(const Tensor& tensor) {
  return absl::StrCat(kiln::v1::DType_Name(tensor.dtype()), "[",
                      absl::StrJoin(tensor.sizes(), ", "), "]");
}

absl::Status SameShape(const std::string& what, const Tensor& got, const Tensor& want) {
  if (got.dtype() == want.dtype() && got.sizes() == want.sizes()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(what, " is ", Shape(got), "; eager gave ", Shape(want)));
}

}  // namespace

uint64_t ElementBits(const Tensor& tensor, int64_t i) {
  switch (ElementSize(tensor.dtype())) {
    case 1:
      return tensor.data<uint8_t>()[i];
    case 2:
      return tensor.data<uint16_t>()[i];
    case 4:
      return tensor.data<uint32_t>()[i];
    default:
      return tensor.data<uint64_t>()[i];
  }
}

absl::Status CompareBits(const std::string& what, const Tensor& got, const Tensor& want) {
  if (auto status = SameShape(what, got, want); !status.ok()) return status;
  const Format format = FormatOf(got.dtype());
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < got.NumElements(); ++i) {
    const uint64_t a = ElementBits(got, i), b = ElementBits(want, i);
    const bool both_nan = format.bits > 0 && IsNan(format, a) && IsNan(format, b);
    if (a != b && !both_nan && mismatches++ == 0) first = i;
  }
  if (mismatches == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s: %d of %d elements differ from eager bit for bit; first at %d: %.17g (bits %#x) vs "
      "eager %.17g (bits %#x)",
      what, mismatches, got.NumElements(), first, ElementAsDouble(got, first),
      ElementBits(got, first), ElementAsDouble(want, first), ElementBits(want, first)));
}

int64_t UlpDistance(DType dtype, uint64_t a, uint64_t b) {
  const Format format = FormatOf(dtype);
  // Map sign-magnitude onto a line where adjacent floats are adjacent
  // integers and both zeros are 0.
  auto line = [&](uint64_t bits) -> __int128 {
    const __int128 magnitude = Magnitude(format, bits);
    return SignBit(format, bits) ? -magnitude : magnitude;
  };
  const __int128 distance = line(a) - line(b);
  const __int128 absolute = distance < 0 ? -distance : distance;
  return absolute > INT64_MAX ? INT64_MAX : static_cast<int64_t>(absolute);
}

absl::StatusOr<UlpReport> MaxUlpDistance(const std::string& what, const Tensor& got,
                                         const Tensor& want) {
  if (auto status = SameShape(what, got, want); !status.ok()) return status;
  const Format format = FormatOf(got.dtype());
  if (format.bits == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ulp distance of a ", kiln::v1::DType_Name(got.dtype()), " tensor"));
  }
  UlpReport worst;
  for (int64_t i = 0; i < got.NumElements(); ++i) {
    const uint64_t a = ElementBits(got, i), b = ElementBits(want, i);
    const bool nan_a = IsNan(format, a), nan_b = IsNan(format, b);
    const bool exact_class = nan_a || nan_b || Magnitude(format, a) == InfinityBits(format) ||
                             Magnitude(format, b) == InfinityBits(format) ||
                             (Magnitude(format, a) == 0 && Magnitude(format, b) == 0);
    const bool same_class = nan_a ? nan_b : a == b;
    if (exact_class && !same_class) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: element %d is %.17g (bits %#x), eager %.17g (bits %#x): NaN, infinities and "
          "signed zeros must match exactly",
          what, i, ElementAsDouble(got, i), a, ElementAsDouble(want, i), b));
    }
    if (exact_class) continue;
    const int64_t ulps = UlpDistance(got.dtype(), a, b);
    if (ulps > worst.ulps) worst = {ulps, i};
  }
  return worst;
}

}  // namespace kiln
