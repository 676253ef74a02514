// Every bench checks what it times against a float64 reference, with a
// tolerance that grows with the reductions an output went through, so that
// a correct kernel passes on any CPU (summation order differs between BLAS
// builds and vector widths) and a wrong one fails everywhere.
//
// An element passes when
//   |got - ref| <= c * eps * sqrt(K) * (|ref| + mean_j |ref_j|)
// with c = kToleranceFactor, eps the output type's machine epsilon (2^-23
// for float32), K the output's reduction length (ReductionLengths), and the
// mean over the whole output: an element that is small by cancellation (a
// dot product near 0) is held to the tensor's scale, not its own. NaN must
// meet NaN and infinities the same infinity; integers and bools are exact.
// docs/BENCHMARKS.md, "Method".
#ifndef KILN_TOOLS_BENCH_ACCURACY_H_
#define KILN_TOOLS_BENCH_ACCURACY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/tensor.h"
#include "proto/graph.pb.h"

namespace kiln {
namespace bench {

// Random-walk rounding of a K-long float32 sum is ~eps * sqrt(K) times its
// terms' size; 16 leaves room for the pointwise ops around it (polynomial
// exp, erf: a few ulp each) and for chains of reductions; a wrong kernel's
// error is of the order of its values, far past it.
inline constexpr double kToleranceFactor = 16;

// Per output of `graph` (static sizes): the summed lengths of the
// reductions and contractions along the longest chain it depends on (a
// 1024-long product after a 256-long one: 1280); 1 when it has none.
absl::StatusOr<std::vector<int64_t>> ReductionLengths(const kiln::v1::Graph& graph);

// How far one output, or the worst of several, is from its reference.
struct Accuracy {
  double max_abs_err = 0;
  double max_rel_err = 0;  // |got - ref| / (|ref| + mean |ref|), the largest
  double bound = 0;        // c * eps * sqrt(K): max_rel_err's limit
  int64_t reduction_length = 1;
  int64_t mismatches = 0;  // elements beyond the bound (or NaN/inf/int mismatches)
  std::string first_mismatch;

  // The worse of the two: largest errors, mismatches summed.
  void Merge(const Accuracy& other);
  // "max_abs_err=.. max_rel_err=.. bound=.. K=.."
  std::string ToString() const;
};

// The tolerance bound for an output of `dtype` after reductions of length K.
double ToleranceBound(kiln::v1::DType dtype, int64_t reduction_length);

// `got` against `reference` (same element count, row-major), with K.
Accuracy MeasureAccuracy(const Tensor& got, const std::vector<double>& reference,
                         int64_t reduction_length);

// The same for float32 results in memory (row-major, reference.size() of them).
Accuracy MeasureAccuracy(const float* got, const std::vector<double>& reference,
                         int64_t reduction_length);

// A tensor's elements as doubles (a float64 reference read with ToTensor).
std::vector<double> ToDoubles(const Tensor& tensor);

// OK when nothing mismatched; FailedPrecondition "WHAT: N elements beyond
// ..." otherwise.
absl::Status CheckAccuracy(const std::string& what, const Accuracy& accuracy);

}  // namespace bench
}  // namespace kiln

#endif  // KILN_TOOLS_BENCH_ACCURACY_H_
