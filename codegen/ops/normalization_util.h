// What the normalization ops (normalization.cc: batch norm and weight norm;
// group_norm.cc) share: their tensor inputs by name, the checks of input and
// per-channel parameters, and the graph pieces of eager's per-channel
// arithmetic, added to a composite's GraphBuilder.
#ifndef KILN_CODEGEN_OPS_NORMALIZATION_UTIL_H_
#define KILN_CODEGEN_OPS_NORMALIZATION_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"

namespace kiln::ops::normalization {

// The node's tensors by schema name: the `required` ones first, then the
// optional ones (kOptionalTensor arguments) that are present, in order.
// Absent ones are missing from the map.
absl::StatusOr<std::map<std::string, int>> TensorInputs(const ir::Node& node,
                                                        const std::vector<std::string>& required,
                                                        const std::vector<std::string>& optional);

// The tensor named `name` in `inputs`, or -1.
int Find(const std::map<std::string, int>& inputs, const std::string& name);

// The sum of `value` over `dims`; `value` itself when there are none (a
// sum over an empty dim list would sum everything).
absl::StatusOr<int> Sum(GraphBuilder& b, int value, const std::vector<int64_t>& dims);

// The two-tensor op `op` of x and y.
absl::StatusOr<int> Binary(GraphBuilder& b, const char* op, int x, int y);

// `value`, whose last dim is channels, with a dim of size 1 appended per
// dim of a rank-`rank` tensor after its channel dim 1: [C] or [N, C]
// broadcast against [N, C, H, W].
absl::StatusOr<int> AlongChannels(GraphBuilder& b, int value, int64_t rank);

// 1 / sqrt(variance + eps), as eager computes the inverse standard
// deviation (not rsqrt).
absl::StatusOr<int> InverseStd(GraphBuilder& b, int variance, double eps);

// x * scale + shift, scale and shift per channel ([C] or [N, C]): eager's
// last step, one pass over x.
absl::StatusOr<int> ScaleAndShift(GraphBuilder& b, int x, int scale, int shift);

// bias - mean * scale, or 0 - mean * scale without a bias (eager adds a
// zero bias: -0.0 never comes out where it would not).
absl::StatusOr<int> Shift(GraphBuilder& b, int bias, int mean, int scale);

// The dims after the channel dim.
std::vector<int64_t> Spatial(int64_t rank);

// A normalized input: rank 2 or more, channels in dim 1.
absl::Status CheckInput(const ir::TensorType& input);

// A per-channel parameter: shape `want`, and the input's dtype or (eager's
// mixed precision) float32 next to a 16-bit input when `mixed` allows it.
absl::Status CheckParameter(const GraphBuilder& b, const std::map<std::string, int>& inputs,
                            const std::string& name, const std::vector<ir::Dim>& want, bool mixed);

// The dtype of the saved statistics: the input's; float32 for float16
// (the meta kernels that trace float16 graphs declare it) and for a
// bfloat16 input with float32 parameters (eager's mixed precision).
ir::DType StatisticsType(const GraphBuilder& b, const std::map<std::string, int>& inputs,
                         const std::vector<std::string>& parameters);

// Each tensor of `inputs` in `compute`, by the same names (-1 stays).
absl::StatusOr<std::map<std::string, int>> Converted(GraphBuilder& b,
                                                     const std::map<std::string, int>& inputs,
                                                     ir::DType compute);

// An optional tensor argument (present by default).
ArgSpec OptionalTensor(const char* name);

// An `eps` argument, and the `output_mask` of a backward op.
ArgSpec EpsArg();
ArgSpec OutputMaskArg();

// The dtypes a normalization refuses (eager has no kernel for them).
const std::vector<ir::DType>& Refused();

// native_group_norm and its backward (group_norm.cc).
void AddGroupNormOps(OpTable& table);

}  // namespace kiln::ops::normalization

#endif  // KILN_CODEGEN_OPS_NORMALIZATION_UTIL_H_
