// Element comparisons stricter than assert_close, for the per-op tests:
// bit-for-bit, and distance in units in the last place (ulp) of the
// output's own dtype.
#ifndef KILN_TESTS_OPS_COMPARE_H_
#define KILN_TESTS_OPS_COMPARE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/tensor.h"

namespace kiln {

// OK when every element of `got` has the bits of `want`'s, except that a
// NaN matches any NaN. Otherwise FailedPrecondition naming `what`, the
// first differing element and how many differ.
absl::Status CompareBits(const std::string& what, const Tensor& got, const Tensor& want);

// Units in the last place between two elements of float dtype `dtype`,
// given as raw bits (zero-extended): how many representable values lie
// between them, with +0.0 and -0.0 the same point.
int64_t UlpDistance(DType dtype, uint64_t a, uint64_t b);

struct UlpReport {
  int64_t ulps = 0;    // the largest UlpDistance over the elements
  int64_t index = -1;  // where (-1 when every element matches exactly)
};
// FailedPrecondition naming `what` and the element when NaN-ness, an
// infinity or the sign of a zero differs from `want` (those must match
// exactly), or the shapes differ.
absl::StatusOr<UlpReport> MaxUlpDistance(const std::string& what, const Tensor& got,
                                         const Tensor& want);

// Raw bits of element i (zero-extended), for messages and tests.
uint64_t ElementBits(const Tensor& tensor, int64_t i);

}  // namespace kiln

#endif  // KILN_TESTS_OPS_COMPARE_H_
