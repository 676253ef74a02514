// Normalizations over channels (dim 1): batch norm, in eval and training
// mode, and group norm, with their backward ops; and weight norm, the
// normalization of a weight. Instance norm needs no op
// of its own: make_fx traces it as a training-mode batch norm over the
// input viewed as [1, N * C, ...].
//
// Each op is a composite (passes/decompose.h). The per-channel work (the
// statistics, and scale and shift) happens on [C]- or [N, C]-sized values;
// the input itself is read by the reductions that take its statistics and
// then once more by one pointwise pass, x * scale + shift, as eager's CPU
// kernels compute it: after a convolution, that pass (with an activation
// after it) is one loop over the convolution's output. 16-bit inputs
// compute in float32 and are rounded once at the end.
//
// Kiln's artifacts are pure functions: a training-mode batch norm never
// updates running_mean and running_var (eager does, in place). ops_doc.cc
// says so in docs/OPS.md, and the tracer warns.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// The node's tensors by schema name: the `required` ones first, then the
// optional ones (kOptionalTensor arguments) that are present, in order.
// Absent ones are missing from the map.
absl::StatusOr<std::map<std::string, int>> TensorInputs(const ir::Node& node,
                                                        const std::vector<std::string>& required,
                                                        const std::vector<std::string>& optional) {
  std::map<std::string, int> inputs;
  size_t next = 0;
  auto take = [&](const std::string& name) -> absl::Status {
    if (next >= node.inputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "has ", node.inputs.size(), " tensor inputs, too few for '", name, "' (present)"));
    }
    inputs[name] = node.inputs[next++];
    return absl::OkStatus();
  };
  for (const std::string& name : required) RETURN_IF_ERROR(take(name));
  for (const std::string& name : optional) {
    if (Present(node, name)) RETURN_IF_ERROR(take(name));
  }
  if (next != node.inputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("has ", node.inputs.size(), " tensor inputs, but its arguments say ", next));
  }
  return inputs;
}

int Find(const std::map<std::string, int>& inputs, const std::string& name) {
  auto it = inputs.find(name);
  return it == inputs.end() ? -1 : it->second;
}

// The sum of `value` over `dims`; `value` itself when there are none (a
// sum over an empty dim list would sum everything).
absl::StatusOr<int> Sum(GraphBuilder& b, int value, const std::vector<int64_t>& dims) {
  if (dims.empty()) return value;
  return b.Add("aten.sum.dim_IntList", {value}, {{"dim", dims}, {"keepdim", false}});
}

absl::StatusOr<int> Binary(GraphBuilder& b, const char* op, int x, int y) {
  return b.Add(op, {x, y});
}

// `value`, whose last dim is channels, with a dim of size 1 appended per
// dim of a rank-`rank` tensor after its channel dim 1: [C] or [N, C]
// broadcast against [N, C, H, W].
absl::StatusOr<int> AlongChannels(GraphBuilder& b, int value, int64_t rank) {
  for (int64_t d = 2; d < rank; ++d) {
    ASSIGN_OR_RETURN(value, b.Add("aten.unsqueeze.default", {value}, {{"dim", int64_t{-1}}}));
  }
  return value;
}

// 1 / sqrt(variance + eps), as eager computes the inverse standard
// deviation (not rsqrt).
absl::StatusOr<int> InverseStd(GraphBuilder& b, int variance, double eps) {
  ASSIGN_OR_RETURN(const int shifted, b.Add("aten.add.Tensor", {variance}, {{"other", eps}}));
  ASSIGN_OR_RETURN(const int root, b.Add("aten.sqrt.default", {shifted}));
  return b.Add("aten.reciprocal.default", {root});
}

// x * scale + shift, scale and shift per channel ([C] or [N, C]): eager's
// last step, one pass over x.
absl::StatusOr<int> ScaleAndShift(GraphBuilder& b, int x, int scale, int shift) {
  const int64_t rank = b.type(x).rank();
  ASSIGN_OR_RETURN(scale, AlongChannels(b, scale, rank));
  ASSIGN_OR_RETURN(shift, AlongChannels(b, shift, rank));
  ASSIGN_OR_RETURN(const int scaled, Binary(b, "aten.mul.Tensor", x, scale));
  return Binary(b, "aten.add.Tensor", scaled, shift);
}

// bias - mean * scale, or 0 - mean * scale without a bias (eager adds a
// zero bias: -0.0 never comes out where it would not).
absl::StatusOr<int> Shift(GraphBuilder& b, int bias, int mean, int scale) {
  ASSIGN_OR_RETURN(const int product, Binary(b, "aten.mul.Tensor", mean, scale));
  if (bias < 0) return b.Add("aten.rsub.Scalar", {product}, {{"other", 0.0}});
  return Binary(b, "aten.sub.Tensor", bias, product);
}

// The dims of a rank-`rank` input but the channel dim 1.
std::vector<int64_t> AllButChannels(int64_t rank) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
  return dims;
}

// The dims after the channel dim.
std::vector<int64_t> Spatial(int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
  return dims;
}

absl::Status CheckInput(const ir::TensorType& input) {
  if (input.rank() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "needs an input of rank 2 or more (batch, channels, ...), got rank ", input.rank()));
  }
  return absl::OkStatus();
}

// A per-channel parameter: shape `want`, and the input's dtype or (eager's
// mixed precision) float32 next to a 16-bit input when `mixed` allows it.
absl::Status CheckParameter(const GraphBuilder& b, const std::map<std::string, int>& inputs,
                            const std::string& name, const std::vector<ir::Dim>& want, bool mixed) {
  const int value = Find(inputs, name);
  if (value < 0) return absl::OkStatus();
  const ir::TensorType input = b.type(inputs.at("input"));
  const ir::TensorType parameter = b.type(value);
  if (parameter.sizes != want) {
    const ir::TensorType expected{parameter.dtype, want, {}};
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' has shape ", ir::ToString(parameter, b.graph()),
                     " but the input has ", ir::ToString(expected, b.graph()), " channels"));
  }
  const bool half = ComputeType(input.dtype) != input.dtype;
  if (parameter.dtype != input.dtype && !(mixed && half && parameter.dtype == DType::kFloat32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is ", ir::DTypeName(parameter.dtype), " but the input is ",
                     ir::DTypeName(input.dtype), ", a mix eager PyTorch refuses too"));
  }
  return absl::OkStatus();
}

// The dtype of the saved statistics: the input's; float32 for float16
// (the meta kernels that trace float16 graphs declare it) and for a
// bfloat16 input with float32 parameters (eager's mixed precision).
DType StatisticsType(const GraphBuilder& b, const std::map<std::string, int>& inputs,
                     const std::vector<std::string>& parameters) {
  const DType input = b.type(inputs.at("input")).dtype;
  if (input == DType::kFloat16) return DType::kFloat32;
  for (const std::string& name : parameters) {
    const int value = Find(inputs, name);
    if (value >= 0 && b.type(value).dtype == DType::kFloat32) return b.type(value).dtype;
  }
  return input;
}

// Each tensor of `inputs` in `compute`, by the same names (-1 stays).
absl::StatusOr<std::map<std::string, int>> Converted(GraphBuilder& b,
                                                     const std::map<std::string, int>& inputs,
                                                     DType compute) {
  std::map<std::string, int> converted;
  for (const auto& [name, value] : inputs) {
    ASSIGN_OR_RETURN(converted[name], b.Cast(value, compute));
  }
  return converted;
}

const std::vector<std::string> kBatchNormParameters = {"weight", "bias", "running_mean",
                                                       "running_var"};

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?,
// training, momentum, eps) -> (out, save_mean, save_invstd), per channel:
//   training: the batch's mean and biased variance over every dim but 1
//     (save_mean, save_invstd = 1 / sqrt(var + eps)); running_mean and
//     running_var are not read, and not updated (momentum is unused).
//   eval: the running statistics; save_mean and save_invstd are empty, as
//     eager's CPU kernel returns them, but for float16 [C] float32 (the
//     running mean and 1 / sqrt(running_var + eps)), as the meta kernels
//     that trace float16 graphs declare them.
// Then out = x * scale + shift with scale = invstd * weight and shift =
// bias - mean * scale: one pass over x.
absl::StatusOr<std::vector<int>> BatchNorm(GraphBuilder& b, const ir::Node& node) {
  ASSIGN_OR_RETURN(const auto inputs, TensorInputs(node, {"input"}, kBatchNormParameters));
  const ir::TensorType type = b.type(inputs.at("input"));
  RETURN_IF_ERROR(CheckInput(type));
  for (const std::string& name : kBatchNormParameters) {
    RETURN_IF_ERROR(CheckParameter(b, inputs, name, {type.sizes[1]}, /*mixed=*/true));
  }
  const DType out = type.dtype;
  const DType statistics = StatisticsType(b, inputs, kBatchNormParameters);
  ASSIGN_OR_RETURN(const auto in, Converted(b, inputs, ComputeType(out)));
  const int x = in.at("input");
  const double eps = ScalarArgAsDouble(node, "eps");
  int mean, invstd, save_mean, save_invstd;
  if (BoolArg(node, "training")) {
    const std::vector<int64_t> dims = AllButChannels(type.rank());
    const ir::SymExpr count = ElementCount(type, dims);
    ASSIGN_OR_RETURN(const int sum, Sum(b, x, dims));
    ASSIGN_OR_RETURN(mean, ByCount(b, "aten.div.Tensor", sum, count));
    ASSIGN_OR_RETURN(const int mean_along, AlongChannels(b, mean, type.rank()));
    ASSIGN_OR_RETURN(const int centered, Binary(b, "aten.sub.Tensor", x, mean_along));
    ASSIGN_OR_RETURN(const int squared, Binary(b, "aten.mul.Tensor", centered, centered));
    ASSIGN_OR_RETURN(const int squares, Sum(b, squared, dims));
    ASSIGN_OR_RETURN(const int variance, ByCount(b, "aten.div.Tensor", squares, count));
    ASSIGN_OR_RETURN(invstd, InverseStd(b, variance, eps));
    ASSIGN_OR_RETURN(save_mean, b.Cast(mean, statistics));
    ASSIGN_OR_RETURN(save_invstd, b.Cast(invstd, statistics));
  } else {
    if (!in.count("running_mean") || !in.count("running_var")) {
      return absl::InvalidArgumentError(
          "eval mode (training=False) needs running_mean and running_var (eager PyTorch "
          "crashes without them)");
    }
    mean = in.at("running_mean");
    ASSIGN_OR_RETURN(invstd, InverseStd(b, in.at("running_var"), eps));
    if (out == DType::kFloat16) {
      ASSIGN_OR_RETURN(save_mean, b.Cast(mean, statistics));
      ASSIGN_OR_RETURN(save_invstd, b.Cast(invstd, statistics));
    } else {
      const std::map<std::string, ir::ArgValue> empty = {{"size", std::vector<int64_t>{0}},
                                                         {"dtype", statistics}};
      ASSIGN_OR_RETURN(save_mean, b.Add("aten.zeros.default", {}, empty));
      ASSIGN_OR_RETURN(save_invstd, b.Add("aten.zeros.default", {}, empty));
    }
  }
  int scale = invstd;
  if (in.count("weight")) {
    ASSIGN_OR_RETURN(scale, Binary(b, "aten.mul.Tensor", invstd, in.at("weight")));
  }
  ASSIGN_OR_RETURN(const int shift, Shift(b, Find(in, "bias"), mean, scale));
  ASSIGN_OR_RETURN(int result, ScaleAndShift(b, x, scale, shift));
  ASSIGN_OR_RETURN(result, b.Cast(result, out));
  return std::vector<int>{result, save_mean, save_invstd};
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?,
// running_var?, save_mean?, save_invstd?, train, eps, output_mask) ->
// (grad_input, grad_weight, grad_bias), as eager's CPU kernel computes
// them per channel, with mean and invstd saved (train) or from the running
// statistics (eval), N the elements per channel:
//   sum = sum(grad), dotp = sum((x - mean) * grad),
//   train: grad_input = (grad - sum / N - (x - mean) * dotp * invstd^2 / N)
//                       * invstd * weight,
//   eval:  grad_input = grad * invstd * weight,
//   grad_weight = dotp * invstd, grad_bias = sum.
// All three are computed whatever output_mask says (unused ones are dead).
absl::StatusOr<std::vector<int>> BatchNormBackward(GraphBuilder& b, const ir::Node& node) {
  ASSIGN_OR_RETURN(const auto inputs, TensorInputs(node, {"grad_out", "input"},
                                                   {"weight", "running_mean", "running_var",
                                                    "save_mean", "save_invstd"}));
  const ir::TensorType type = b.type(inputs.at("input"));
  RETURN_IF_ERROR(CheckInput(type));
  if (b.type(inputs.at("grad_out")).sizes != type.sizes) {
    return absl::InvalidArgumentError("grad_out and input differ in shape");
  }
  const bool train = BoolArg(node, "train");
  const std::string mean_name = train ? "save_mean" : "running_mean";
  const std::string variance_name = train ? "save_invstd" : "running_var";
  if (!inputs.count(mean_name) || !inputs.count(variance_name)) {
    return absl::InvalidArgumentError(absl::StrCat(train ? "train=True" : "train=False", " needs ",
                                                   mean_name, " and ", variance_name));
  }
  for (const std::string& name : {std::string("weight"), mean_name, variance_name}) {
    RETURN_IF_ERROR(CheckParameter(b, inputs, name, {type.sizes[1]}, /*mixed=*/true));
  }
  const DType out = type.dtype;
  const DType parameters = inputs.count("weight") ? b.type(inputs.at("weight")).dtype : out;
  ASSIGN_OR_RETURN(const auto in, Converted(b, inputs, ComputeType(out)));
  const int x = in.at("input"), grad = in.at("grad_out");
  const int64_t rank = type.rank();
  const std::vector<int64_t> dims = AllButChannels(rank);
  const ir::SymExpr count = ElementCount(type, dims);
  const int mean = in.at(mean_name);
  int invstd = in.at(variance_name);
  if (!train) {
    ASSIGN_OR_RETURN(invstd, InverseStd(b, invstd, ScalarArgAsDouble(node, "eps")));
  }
  ASSIGN_OR_RETURN(const int mean_along, AlongChannels(b, mean, rank));
  ASSIGN_OR_RETURN(const int invstd_along, AlongChannels(b, invstd, rank));
  ASSIGN_OR_RETURN(const int centered, Binary(b, "aten.sub.Tensor", x, mean_along));
  ASSIGN_OR_RETURN(const int sum, Sum(b, grad, dims));
  ASSIGN_OR_RETURN(const int product, Binary(b, "aten.mul.Tensor", centered, grad));
  ASSIGN_OR_RETURN(const int dotp, Sum(b, product, dims));
  int grad_input = grad;
  if (train) {
    ASSIGN_OR_RETURN(const int k1, Binary(b, "aten.mul.Tensor", dotp, invstd));
    ASSIGN_OR_RETURN(const int k2, Binary(b, "aten.mul.Tensor", k1, invstd));
    ASSIGN_OR_RETURN(const int k, ByCount(b, "aten.div.Tensor", k2, count));
    ASSIGN_OR_RETURN(const int grad_mean, ByCount(b, "aten.div.Tensor", sum, count));
    ASSIGN_OR_RETURN(const int k_along, AlongChannels(b, k, rank));
    ASSIGN_OR_RETURN(const int grad_mean_along, AlongChannels(b, grad_mean, rank));
    ASSIGN_OR_RETURN(const int dx, Binary(b, "aten.mul.Tensor", centered, k_along));
    ASSIGN_OR_RETURN(const int less_mean, Binary(b, "aten.sub.Tensor", grad, grad_mean_along));
    ASSIGN_OR_RETURN(grad_input, Binary(b, "aten.sub.Tensor", less_mean, dx));
  }
  ASSIGN_OR_RETURN(grad_input, Binary(b, "aten.mul.Tensor", grad_input, invstd_along));
  if (in.count("weight")) {
    ASSIGN_OR_RETURN(const int weight_along, AlongChannels(b, in.at("weight"), rank));
    ASSIGN_OR_RETURN(grad_input, Binary(b, "aten.mul.Tensor", grad_input, weight_along));
  }
  ASSIGN_OR_RETURN(int grad_weight, Binary(b, "aten.mul.Tensor", dotp, invstd));
  ASSIGN_OR_RETURN(grad_input, b.Cast(grad_input, out));
  ASSIGN_OR_RETURN(grad_weight, b.Cast(grad_weight, parameters));
  ASSIGN_OR_RETURN(const int grad_bias, b.Cast(sum, parameters));
  return std::vector<int>{grad_input, grad_weight, grad_bias};
}

// Group norm's shapes: N, C = G * D channels in G groups, HxW elements per
// channel; checked against the node's N, C and HxW arguments.
struct Groups {
  ir::Dim n;
  int64_t groups = 0, per_group = 0;  // G, D
  ir::SymExpr spatial;                // HxW
  ir::SymExpr count;                  // D * HxW: elements per group
};

absl::StatusOr<Groups> GroupsOf(const ir::Node& node, const ir::TensorType& type) {
  RETURN_IF_ERROR(CheckInput(type));
  if (type.sizes[1].is_symbolic()) {
    return absl::UnimplementedError("group norm over a symbolic number of channels");
  }
  Groups groups;
  groups.n = type.sizes[0];
  const int64_t channels = type.sizes[1].constant;
  groups.groups = IntArg(node, "group");
  if (groups.groups <= 0 || channels % groups.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the input's ", channels, " channels do not divide into ", groups.groups, " groups"));
  }
  groups.per_group = channels / groups.groups;
  groups.spatial = ElementCount(type, Spatial(type.rank()));
  groups.count = groups.spatial * groups.per_group;
  const std::pair<const char*, ir::SymExpr> expected[] = {{"N", ir::SymExpr::Of(groups.n)},
                                                          {"C", ir::SymExpr::Constant(channels)},
                                                          {"HxW", groups.spatial}};
  for (const auto& [name, size] : expected) {
    if (SizeArg(node, name) != size) {
      return absl::InvalidArgumentError(
          absl::StrCat("argument '", name, "' is ", ir::ToString(SizeArg(node, name), ir::Graph()),
                       " but the input's shape says ", ir::ToString(size, ir::Graph())));
    }
  }
  return groups;
}

absl::StatusOr<int> Reshape(GraphBuilder& b, int value, std::vector<ir::SymExpr> sizes) {
  return b.Add("aten.reshape.default", {value}, {{"size", std::move(sizes)}});
}

// [N, C] (or [C]) per-channel values as [N, G, D] ([G, D]), and back.
absl::StatusOr<int> ChannelsToGroups(GraphBuilder& b, int value, const Groups& groups) {
  std::vector<ir::SymExpr> sizes;
  if (b.type(value).rank() == 2) sizes.push_back(ir::SymExpr::Of(groups.n));
  sizes.push_back(ir::SymExpr::Constant(groups.groups));
  sizes.push_back(ir::SymExpr::Constant(groups.per_group));
  return Reshape(b, value, std::move(sizes));
}

absl::StatusOr<int> GroupsToChannels(GraphBuilder& b, int value, const Groups& groups) {
  std::vector<ir::SymExpr> sizes;
  if (b.type(value).rank() == 3) sizes.push_back(ir::SymExpr::Of(groups.n));
  sizes.push_back(ir::SymExpr::Constant(groups.groups * groups.per_group));
  return Reshape(b, value, std::move(sizes));
}

// [N, G] per-group values repeated for each channel of their group: [N, G, D].
absl::StatusOr<int> PerGroupChannel(GraphBuilder& b, int value, const Groups& groups) {
  ASSIGN_OR_RETURN(const int unsqueezed,
                   b.Add("aten.unsqueeze.default", {value}, {{"dim", int64_t{2}}}));
  return b.Add("aten.expand.default", {unsqueezed},
               {{"size", std::vector<ir::SymExpr>{ir::SymExpr::Of(groups.n),
                                                  ir::SymExpr::Constant(groups.groups),
                                                  ir::SymExpr::Constant(groups.per_group)}}});
}

// [N, C] values from per-channel sums of x: summed over each group, [N, G].
absl::StatusOr<int> GroupSum(GraphBuilder& b, int per_channel, const Groups& groups) {
  ASSIGN_OR_RETURN(const int grouped, ChannelsToGroups(b, per_channel, groups));
  return Sum(b, grouped, {2});
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out,
// mean, rstd): the statistics of each group of C / group channels of each
// sample ([N, group]), then out = x * scale + shift per (sample, channel)
// with scale = rstd * weight and shift = bias - mean * scale, as eager. The
// sums run per channel over x as it is laid out, then over each group's
// channels: x is never reshaped (or copied).
absl::StatusOr<std::vector<int>> GroupNorm(GraphBuilder& b, const ir::Node& node) {
  ASSIGN_OR_RETURN(const auto inputs, TensorInputs(node, {"input"}, {"weight", "bias"}));
  const ir::TensorType type = b.type(inputs.at("input"));
  ASSIGN_OR_RETURN(const Groups groups, GroupsOf(node, type));
  for (const char* name : {"weight", "bias"}) {
    RETURN_IF_ERROR(CheckParameter(b, inputs, name, {type.sizes[1]}, /*mixed=*/false));
  }
  const DType out = type.dtype;
  const DType statistics = StatisticsType(b, inputs, {});
  ASSIGN_OR_RETURN(const auto in, Converted(b, inputs, ComputeType(out)));
  const int x = in.at("input");
  const int64_t rank = type.rank();
  const std::vector<int64_t> spatial = Spatial(rank);
  ASSIGN_OR_RETURN(const int channel_sum, Sum(b, x, spatial));
  ASSIGN_OR_RETURN(const int group_sum, GroupSum(b, channel_sum, groups));
  ASSIGN_OR_RETURN(const int mean, ByCount(b, "aten.div.Tensor", group_sum, groups.count));
  ASSIGN_OR_RETURN(const int mean_groups, PerGroupChannel(b, mean, groups));
  ASSIGN_OR_RETURN(const int mean_channels, GroupsToChannels(b, mean_groups, groups));
  ASSIGN_OR_RETURN(const int mean_along, AlongChannels(b, mean_channels, rank));
  ASSIGN_OR_RETURN(const int centered, Binary(b, "aten.sub.Tensor", x, mean_along));
  ASSIGN_OR_RETURN(const int squared, Binary(b, "aten.mul.Tensor", centered, centered));
  ASSIGN_OR_RETURN(const int channel_squares, Sum(b, squared, spatial));
  ASSIGN_OR_RETURN(const int squares, GroupSum(b, channel_squares, groups));
  ASSIGN_OR_RETURN(const int variance, ByCount(b, "aten.div.Tensor", squares, groups.count));
  ASSIGN_OR_RETURN(const int rstd, InverseStd(b, variance, ScalarArgAsDouble(node, "eps")));
  // scale and shift per (sample, group, channel of the group).
  ASSIGN_OR_RETURN(int scale, PerGroupChannel(b, rstd, groups));
  if (in.count("weight")) {
    ASSIGN_OR_RETURN(const int weight, ChannelsToGroups(b, in.at("weight"), groups));
    ASSIGN_OR_RETURN(scale, Binary(b, "aten.mul.Tensor", scale, weight));
  }
  int bias = -1;
  if (in.count("bias")) {
    ASSIGN_OR_RETURN(bias, ChannelsToGroups(b, in.at("bias"), groups));
  }
  ASSIGN_OR_RETURN(const int shift, Shift(b, bias, mean_groups, scale));
  ASSIGN_OR_RETURN(const int scale_channels, GroupsToChannels(b, scale, groups));
  ASSIGN_OR_RETURN(const int shift_channels, GroupsToChannels(b, shift, groups));
  ASSIGN_OR_RETURN(int result, ScaleAndShift(b, x, scale_channels, shift_channels));
  ASSIGN_OR_RETURN(result, b.Cast(result, out));
  ASSIGN_OR_RETURN(const int mean_out, b.Cast(mean, statistics));
  ASSIGN_OR_RETURN(const int rstd_out, b.Cast(rstd, statistics));
  return std::vector<int>{result, mean_out, rstd_out};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C,
// HxW, group, output_mask) -> (grad_input, grad_weight, grad_bias), as
// eager's CPU kernel computes them from per-channel sums ds = sum(grad *
// x) and db = sum(grad) over HxW, with g = weight (1 without one), over
// each group of D channels and n = D * HxW elements:
//   c1 = rstd * g, c2 = (sum(db * g) * mean - sum(ds * g)) * rstd^3 / n,
//   c3 = -c2 * mean - sum(db * g) * rstd / n,
//   grad_input = c1 * grad + c2 * x + c3,
//   grad_weight = sum over samples of (ds - db * mean) * rstd,
//   grad_bias = sum over samples of db.
// All three are computed whatever output_mask says (unused ones are dead),
// in the input's dtype, as eager (float16 graphs' mean and rstd are
// float32, as Kiln's forward gives them).
absl::StatusOr<std::vector<int>> GroupNormBackward(GraphBuilder& b, const ir::Node& node) {
  ASSIGN_OR_RETURN(const auto inputs,
                   TensorInputs(node, {"grad_out", "input", "mean", "rstd"}, {"weight"}));
  const ir::TensorType type = b.type(inputs.at("input"));
  ASSIGN_OR_RETURN(const Groups groups, GroupsOf(node, type));
  if (b.type(inputs.at("grad_out")).sizes != type.sizes) {
    return absl::InvalidArgumentError("grad_out and input differ in shape");
  }
  for (const char* name : {"mean", "rstd"}) {
    const ir::TensorType statistic = b.type(inputs.at(name));
    if (statistic.sizes != std::vector<ir::Dim>{groups.n, ir::Dim::Constant(groups.groups)}) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", name, "' has shape ", ir::ToString(statistic, b.graph()), ", not [N, group]"));
    }
  }
  RETURN_IF_ERROR(CheckParameter(b, inputs, "weight", {type.sizes[1]}, /*mixed=*/false));
  const DType out = type.dtype;
  ASSIGN_OR_RETURN(const auto in, Converted(b, inputs, ComputeType(out)));
  const int x = in.at("input"), grad = in.at("grad_out");
  const int mean = in.at("mean"), rstd = in.at("rstd");
  const int64_t rank = type.rank();
  const std::vector<int64_t> spatial = Spatial(rank);
  ASSIGN_OR_RETURN(const int product, Binary(b, "aten.mul.Tensor", grad, x));
  ASSIGN_OR_RETURN(const int ds_channels, Sum(b, product, spatial));
  ASSIGN_OR_RETURN(const int db_channels, Sum(b, grad, spatial));
  ASSIGN_OR_RETURN(const int ds, ChannelsToGroups(b, ds_channels, groups));
  ASSIGN_OR_RETURN(const int db, ChannelsToGroups(b, db_channels, groups));
  int weight = -1;
  if (in.count("weight")) {
    ASSIGN_OR_RETURN(weight, ChannelsToGroups(b, in.at("weight"), groups));
  }
  auto weighted_sum = [&](int value) -> absl::StatusOr<int> {
    if (weight >= 0) {
      ASSIGN_OR_RETURN(value, Binary(b, "aten.mul.Tensor", value, weight));
    }
    return Sum(b, value, {2});
  };
  ASSIGN_OR_RETURN(const int ds_group, weighted_sum(ds));
  ASSIGN_OR_RETURN(const int db_group, weighted_sum(db));
  // c2 and c3 per (sample, group).
  ASSIGN_OR_RETURN(const int db_mean, Binary(b, "aten.mul.Tensor", db_group, mean));
  ASSIGN_OR_RETURN(int c2, Binary(b, "aten.sub.Tensor", db_mean, ds_group));
  for (int power = 0; power < 3; ++power) {
    ASSIGN_OR_RETURN(c2, Binary(b, "aten.mul.Tensor", c2, rstd));
  }
  ASSIGN_OR_RETURN(c2, ByCount(b, "aten.div.Tensor", c2, groups.count));
  ASSIGN_OR_RETURN(const int c2_mean, Binary(b, "aten.mul.Tensor", c2, mean));
  ASSIGN_OR_RETURN(const int minus_c2_mean, b.Add("aten.neg.default", {c2_mean}));
  ASSIGN_OR_RETURN(const int db_rstd, Binary(b, "aten.mul.Tensor", db_group, rstd));
  ASSIGN_OR_RETURN(const int db_rstd_n, ByCount(b, "aten.div.Tensor", db_rstd, groups.count));
  ASSIGN_OR_RETURN(const int c3, Binary(b, "aten.sub.Tensor", minus_c2_mean, db_rstd_n));
  // Per (sample, channel), along x.
  ASSIGN_OR_RETURN(int c1, PerGroupChannel(b, rstd, groups));
  if (weight >= 0) {
    ASSIGN_OR_RETURN(c1, Binary(b, "aten.mul.Tensor", c1, weight));
  }
  // [N, G, D] values along x.
  auto along_x = [&](int value) -> absl::StatusOr<int> {
    ASSIGN_OR_RETURN(value, GroupsToChannels(b, value, groups));
    return AlongChannels(b, value, rank);
  };
  ASSIGN_OR_RETURN(const int c2_groups, PerGroupChannel(b, c2, groups));
  ASSIGN_OR_RETURN(const int c3_groups, PerGroupChannel(b, c3, groups));
  ASSIGN_OR_RETURN(const int c1_along, along_x(c1));
  ASSIGN_OR_RETURN(const int c2_along, along_x(c2_groups));
  ASSIGN_OR_RETURN(const int c3_along, along_x(c3_groups));
  ASSIGN_OR_RETURN(const int c1_grad, Binary(b, "aten.mul.Tensor", c1_along, grad));
  ASSIGN_OR_RETURN(const int c2_x, Binary(b, "aten.mul.Tensor", c2_along, x));
  ASSIGN_OR_RETURN(const int linear, Binary(b, "aten.add.Tensor", c1_grad, c2_x));
  ASSIGN_OR_RETURN(int grad_input, Binary(b, "aten.add.Tensor", linear, c3_along));
  // grad_weight and grad_bias per channel, over samples.
  ASSIGN_OR_RETURN(const int mean_groups, PerGroupChannel(b, mean, groups));
  ASSIGN_OR_RETURN(const int rstd_groups, PerGroupChannel(b, rstd, groups));
  ASSIGN_OR_RETURN(const int db_mean_channels, Binary(b, "aten.mul.Tensor", db, mean_groups));
  ASSIGN_OR_RETURN(const int centered_ds, Binary(b, "aten.sub.Tensor", ds, db_mean_channels));
  ASSIGN_OR_RETURN(const int scaled_ds, Binary(b, "aten.mul.Tensor", centered_ds, rstd_groups));
  ASSIGN_OR_RETURN(const int weight_groups, Sum(b, scaled_ds, {0}));
  ASSIGN_OR_RETURN(int grad_weight, GroupsToChannels(b, weight_groups, groups));
  ASSIGN_OR_RETURN(int grad_bias, Sum(b, db_channels, {0}));
  ASSIGN_OR_RETURN(grad_input, b.Cast(grad_input, out));
  ASSIGN_OR_RETURN(grad_weight, b.Cast(grad_weight, out));
  ASSIGN_OR_RETURN(grad_bias, b.Cast(grad_bias, out));
  return std::vector<int>{grad_input, grad_weight, grad_bias};
}

// _weight_norm_interface(v, g, dim) -> (v * (g / norm), norm), the
// weight of torch.nn.utils.weight_norm: norm is the 2-norm of v over every
// dim but `dim`, those dims kept with size 1. `dim` is 0 or the last, the
// dims eager's fused kernel takes (weight_norm decomposes any other dim
// into plain ops). bfloat16 computes in float32 and keeps norm there, as
// eager.
absl::StatusOr<std::vector<int>> WeightNorm(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType v_type = b.type(node.inputs[0]);
  const int64_t rank = v_type.rank();
  const int64_t dim = IntArg(node, "dim");
  if (rank == 0 || (dim != 0 && dim != rank - 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dim ", dim, " of a rank-", rank, " v: weight norm's fused form takes dim 0 or the last"));
  }
  const DType out = v_type.dtype;
  const DType compute = ComputeType(out);
  ASSIGN_OR_RETURN(const int v, b.Cast(node.inputs[0], compute));
  ASSIGN_OR_RETURN(const int g, b.Cast(node.inputs[1], compute));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != dim) dims.push_back(d);
  }
  ASSIGN_OR_RETURN(int squares, Binary(b, "aten.mul.Tensor", v, v));
  if (!dims.empty()) {
    ASSIGN_OR_RETURN(squares,
                     b.Add("aten.sum.dim_IntList", {squares}, {{"dim", dims}, {"keepdim", true}}));
  }
  ASSIGN_OR_RETURN(const int norm, b.Add("aten.sqrt.default", {squares}));
  ASSIGN_OR_RETURN(const int scale, Binary(b, "aten.div.Tensor", g, norm));
  ASSIGN_OR_RETURN(int weight, Binary(b, "aten.mul.Tensor", v, scale));
  ASSIGN_OR_RETURN(weight, b.Cast(weight, out));
  ASSIGN_OR_RETURN(const int norm_out,
                   b.Cast(norm, out == DType::kFloat64 ? out : DType::kFloat32));
  return std::vector<int>{weight, norm_out};
}

ArgSpec OptionalTensor(const char* name) {
  return {name, ArgKind::kOptionalTensor, ir::ArgValue(true)};
}

}  // namespace

void RegisterNormalizationOps(OpTable& table) {
  const std::vector<DType> integral = {DType::kInt64, DType::kBool};
  const ArgSpec eps{"eps", ArgKind::kFloat, std::nullopt};
  const ArgSpec output_mask{"output_mask", ArgKind::kBoolList, std::nullopt};
  AddComposite(table, "aten.native_batch_norm.default", 1, 5,
               {OptionalTensor("weight"),
                OptionalTensor("bias"),
                OptionalTensor("running_mean"),
                OptionalTensor("running_var"),
                {"training", ArgKind::kBool, std::nullopt},
                {"momentum", ArgKind::kFloat, std::nullopt},
                eps},
               BatchNorm, kFloatTypes, integral, "normalization");
  AddComposite(table, "aten.native_batch_norm_backward.default", 2, 7,
               {OptionalTensor("weight"),
                OptionalTensor("running_mean"),
                OptionalTensor("running_var"),
                OptionalTensor("save_mean"),
                OptionalTensor("save_invstd"),
                {"train", ArgKind::kBool, std::nullopt},
                eps,
                output_mask},
               BatchNormBackward, kFloatTypes, integral, "normalization");
  const std::vector<ArgSpec> group_sizes = {{"N", ArgKind::kSize, std::nullopt},
                                            {"C", ArgKind::kSize, std::nullopt},
                                            {"HxW", ArgKind::kSize, std::nullopt},
                                            {"group", ArgKind::kInt, std::nullopt}};
  std::vector<ArgSpec> forward = {OptionalTensor("weight"), OptionalTensor("bias")};
  forward.insert(forward.end(), group_sizes.begin(), group_sizes.end());
  forward.push_back(eps);
  AddComposite(table, "aten.native_group_norm.default", 1, 3, forward, GroupNorm, kFloatTypes,
               integral, "normalization");
  std::vector<ArgSpec> backward = {OptionalTensor("weight")};
  backward.insert(backward.end(), group_sizes.begin(), group_sizes.end());
  backward.push_back(output_mask);
  AddComposite(table, "aten.native_group_norm_backward.default", 4, 5, backward, GroupNormBackward,
               kFloatTypes, integral, "normalization");
  AddComposite(table, "aten._weight_norm_interface.default", 2, 2,
               {{"dim", ArgKind::kInt, ir::ArgValue(int64_t{0})}}, WeightNorm,
               {DType::kFloat32, DType::kFloat64, DType::kBFloat16},
               {DType::kFloat16, DType::kInt64, DType::kBool}, "normalization");
}

}  // namespace kiln::ops
