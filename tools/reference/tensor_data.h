// Reference tensors (kiln.v1.TensorData, written by tools/trace) as client
// Tensors, and comparison with torch.testing.assert_close's default
// tolerances.
#ifndef KILN_TOOLS_REFERENCE_TENSOR_DATA_H_
#define KILN_TOOLS_REFERENCE_TENSOR_DATA_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/tensor.h"
#include "proto/reference.pb.h"

namespace kiln {

absl::StatusOr<kiln::v1::Reference> ReadReferenceFile(const std::string& path);

// The values of `data`, contiguous (its strides, where the tracer met the
// tensor, are not applied: the caller lays it out as the graph declares).
// InvalidArgument when the byte count does not match the shape.
absl::StatusOr<Tensor> ToTensor(const kiln::v1::TensorData& data);

struct Tolerance {
  double rtol;
  double atol;
};
// assert_close's defaults: float32 1.3e-6/1e-5, float64 1e-7/1e-7, float16
// 1e-3/1e-5, bfloat16 1.6e-2/1e-5, integers and bool exact.
Tolerance DefaultTolerance(DType dtype);

// OK when `got` matches `want` within `tolerance` (NaN matches NaN, infinities
// must be equal); otherwise FailedPrecondition naming the first mismatch and
// how many elements mismatch.
absl::Status CompareToReference(const std::string& what, const Tensor& got,
                                const kiln::v1::TensorData& want, Tolerance tolerance);

// Element i of a tensor of any dtype, as a double.
double ElementAsDouble(const Tensor& tensor, int64_t i);

}  // namespace kiln

#endif  // KILN_TOOLS_REFERENCE_TENSOR_DATA_H_
