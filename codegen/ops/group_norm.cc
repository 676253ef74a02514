// Group norm and its backward: the statistics of each group of channels of
// each sample, taken per channel over x as it is laid out and then per group
// (x is never reshaped), and x * scale + shift in one pass, as eager
// computes them (normalization_util.h has the pieces batch norm shares).
#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/normalization_util.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops::normalization {
namespace {

using ir::DType;

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

}  // namespace

void AddGroupNormOps(OpTable& table) {
  const std::vector<ArgSpec> group_sizes = {{"N", ArgKind::kSize, std::nullopt},
                                            {"C", ArgKind::kSize, std::nullopt},
                                            {"HxW", ArgKind::kSize, std::nullopt},
                                            {"group", ArgKind::kInt, std::nullopt}};
  std::vector<ArgSpec> forward = {OptionalTensor("weight"), OptionalTensor("bias")};
  forward.insert(forward.end(), group_sizes.begin(), group_sizes.end());
  forward.push_back(EpsArg());
  AddComposite(table, "aten.native_group_norm.default", 1, 3, forward, GroupNorm, kFloatTypes,
               Refused(), "normalization");
  std::vector<ArgSpec> backward = {OptionalTensor("weight")};
  backward.insert(backward.end(), group_sizes.begin(), group_sizes.end());
  backward.push_back(OutputMaskArg());
  AddComposite(table, "aten.native_group_norm_backward.default", 4, 5, backward, GroupNormBackward,
               kFloatTypes, Refused(), "normalization");
}

}  // namespace kiln::ops::normalization
