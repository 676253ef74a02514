// The pooling family's windows and the helpers its forward ops (pooling.cc)
// and backward ops (pooling_backward.cc) share.
#ifndef KILN_CODEGEN_OPS_POOLING_H_
#define KILN_CODEGEN_OPS_POOLING_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/graph_builder.h"
#include "codegen/ir.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"

namespace kiln::ops::pooling {

using Args = std::map<std::string, ir::ArgValue>;

// Adaptive pooling whose windows differ in size is written as one pooling
// per window size and place, stacked: at most this many.
constexpr int64_t kMaxAdaptiveParts = 64;
// Window arguments above this are refused, so that no size arithmetic here
// can overflow (sizes are at most 2^40, limits.h).
constexpr int64_t kMaxWindowArgument = int64_t{1} << 31;
// Average pooling divides by a literal when every window has the same
// divisor, checked window by window up to this many along a dim.
constexpr int64_t kMaxScannedWindows = 1 << 16;

// One pooled dim: output position o's window reads input positions
// o * stride - padding + k * dilation for k in [0, kernel).
struct Window {
  int64_t input = 0, kernel = 1, stride = 1, padding = 0, dilation = 1, output = 0;

  int64_t Start(int64_t o) const { return o * stride - padding; }
};

struct Pool2d {
  Window height, width;
  bool ceil_mode = false;
};

int64_t FloorDiv(int64_t a, int64_t b);

absl::Status CheckInput(const ir::TensorType& input);

absl::StatusOr<Pool2d> PoolOf(const ir::Node& node, const ir::TensorType& input);

Args PoolArgs(const Pool2d& pool, const std::string& mode);

std::vector<ir::Dim> PooledSizes(const ir::TensorType& input, const Pool2d& pool);

int Scaled(ExprBuilder& b, int variable, int64_t factor);

absl::StatusOr<int> DivideByWindowSizes(GraphBuilder& b, int value, const Pool2d& pool,
                                        const ir::Node& node);

// Registers kiln.pool2d_backward and the backward ops (pooling_backward.cc).
void AddBackwardOps(OpTable& table);

}  // namespace kiln::ops::pooling

#endif  // KILN_CODEGEN_OPS_POOLING_H_
