// Normalizations over channels (dim 1): batch norm, in eval and training
// mode, and group norm (group_norm.cc), with their backward ops; and weight
// norm, the normalization of a weight. Instance norm needs no op
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
#include "codegen/ops/normalization_util.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;
using normalization::AlongChannels;
using normalization::Binary;
using normalization::CheckInput;
using normalization::CheckParameter;
using normalization::Converted;
using normalization::EpsArg;
using normalization::Find;
using normalization::InverseStd;
using normalization::OptionalTensor;
using normalization::OutputMaskArg;
using normalization::Refused;
using normalization::ScaleAndShift;
using normalization::Shift;
using normalization::StatisticsType;
using normalization::Sum;
using normalization::TensorInputs;

// The dims of a rank-`rank` input but the channel dim 1.
std::vector<int64_t> AllButChannels(int64_t rank) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
  return dims;
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

}  // namespace

void RegisterNormalizationOps(OpTable& table) {
  const ArgSpec eps = EpsArg();
  const ArgSpec output_mask = OutputMaskArg();
  AddComposite(table, "aten.native_batch_norm.default", 1, 5,
               {OptionalTensor("weight"),
                OptionalTensor("bias"),
                OptionalTensor("running_mean"),
                OptionalTensor("running_var"),
                {"training", ArgKind::kBool, std::nullopt},
                {"momentum", ArgKind::kFloat, std::nullopt},
                eps},
               BatchNorm, kFloatTypes, Refused(), "normalization");
  AddComposite(table, "aten.native_batch_norm_backward.default", 2, 7,
               {OptionalTensor("weight"),
                OptionalTensor("running_mean"),
                OptionalTensor("running_var"),
                OptionalTensor("save_mean"),
                OptionalTensor("save_invstd"),
                {"train", ArgKind::kBool, std::nullopt},
                eps,
                output_mask},
               BatchNormBackward, kFloatTypes, Refused(), "normalization");
  normalization::AddGroupNormOps(table);
  AddComposite(table, "aten._weight_norm_interface.default", 2, 2,
               {{"dim", ArgKind::kInt, ir::ArgValue(int64_t{0})}}, WeightNorm,
               {DType::kFloat32, DType::kFloat64, DType::kBFloat16},
               {DType::kFloat16, DType::kInt64, DType::kBool}, "normalization");
}

}  // namespace kiln::ops
