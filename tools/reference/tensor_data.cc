#include "tools/reference/tensor_data.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"

namespace kiln {
namespace {

float HalfToFloat(uint16_t h) {
  _Float16 half;
  memcpy(&half, &h, sizeof(half));
  return static_cast<float>(half);
}

float BFloat16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace

absl::StatusOr<kiln::v1::Reference> ReadReferenceFile(const std::string& path) {
  kiln::v1::Reference reference;
  RETURN_IF_ERROR(ReadJsonFile(path, "a Kiln reference file", reference));
  return reference;
}

absl::StatusOr<Tensor> ToTensor(const kiln::v1::TensorData& data) {
  ASSIGN_OR_RETURN(
      Tensor tensor,
      Tensor::Empty(data.dtype(), std::vector<int64_t>(data.sizes().begin(), data.sizes().end())));
  if (static_cast<int64_t>(data.data().size()) != tensor.NumBytes()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor data has ", data.data().size(),
                                                   " bytes; its shape needs ", tensor.NumBytes()));
  }
  memcpy(tensor.data<char>(), data.data().data(), data.data().size());
  return tensor;
}

Tolerance DefaultTolerance(DType dtype) {
  switch (dtype) {
    case kiln::v1::FLOAT32:
    case kiln::v1::COMPLEX64:
      return {1.3e-6, 1e-5};
    case kiln::v1::FLOAT64:
    case kiln::v1::COMPLEX128:
      return {1e-7, 1e-7};
    case kiln::v1::FLOAT16:
      return {1e-3, 1e-5};
    case kiln::v1::BFLOAT16:
      return {1.6e-2, 1e-5};
    default:
      return {0, 0};
  }
}

double ElementAsDouble(const Tensor& tensor, int64_t i) {
  switch (tensor.dtype()) {
    case kiln::v1::FLOAT32:
    case kiln::v1::COMPLEX64:  // part i: the real and imaginary parts interleaved
      return tensor.data<float>()[i];
    case kiln::v1::FLOAT64:
    case kiln::v1::COMPLEX128:
      return tensor.data<double>()[i];
    case kiln::v1::FLOAT16:
      return HalfToFloat(tensor.data<uint16_t>()[i]);
    case kiln::v1::BFLOAT16:
      return BFloat16ToFloat(tensor.data<uint16_t>()[i]);
    case kiln::v1::INT64:
      return static_cast<double>(tensor.data<int64_t>()[i]);
    case kiln::v1::INT32:
      return tensor.data<int32_t>()[i];
    case kiln::v1::BOOL:
    case kiln::v1::UINT8:
      return tensor.data<uint8_t>()[i];
    case kiln::v1::INT8:
      return tensor.data<int8_t>()[i];
    case kiln::v1::INT16:
      return tensor.data<int16_t>()[i];
    default:
      return NAN;
  }
}

absl::Status CompareToReference(const std::string& what, const Tensor& got,
                                const kiln::v1::TensorData& want, Tolerance tolerance) {
  ASSIGN_OR_RETURN(const Tensor expected, ToTensor(want));
  if (got.dtype() != expected.dtype() || got.sizes() != expected.sizes()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " is ", kiln::v1::DType_Name(got.dtype()), "[", absl::StrJoin(got.sizes(), ", "),
        "]; eager gave ", kiln::v1::DType_Name(expected.dtype()), "[",
        absl::StrJoin(expected.sizes(), ", "), "]"));
  }
  int64_t mismatches = 0, first = -1;
  double worst = 0;
  // A complex tensor compares part by part.
  const bool complex = got.dtype() == kiln::v1::COMPLEX64 || got.dtype() == kiln::v1::COMPLEX128;
  const int64_t count = got.NumElements() * (complex ? 2 : 1);
  for (int64_t i = 0; i < count; ++i) {
    const double a = ElementAsDouble(got, i), b = ElementAsDouble(expected, i);
    bool ok;
    if (std::isnan(a) || std::isnan(b)) {
      ok = std::isnan(a) && std::isnan(b);
    } else if (std::isinf(a) || std::isinf(b)) {
      ok = a == b;
    } else {
      const double error = std::abs(a - b);
      worst = std::max(worst, error);
      ok = error <= tolerance.atol + tolerance.rtol * std::abs(b);
    }
    if (!ok && mismatches++ == 0) first = i;
  }
  if (mismatches == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s: %d of %d %s differ from eager beyond rtol %g, atol %g; first at %d: %.9g vs "
      "eager %.9g",
      what, mismatches, count, complex ? "parts" : "elements", tolerance.rtol, tolerance.atol,
      first, ElementAsDouble(got, first), ElementAsDouble(expected, first)));
}

}  // namespace kiln
