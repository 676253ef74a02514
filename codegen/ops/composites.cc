// Composite ops: each rewrites itself into core ops (passes/decompose.h).
// 16-bit float inputs are computed in float32 and rounded once at the end,
// as eager's kernels do, so no intermediate is stored at half precision.
#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;
using Args = std::map<std::string, ir::ArgValue>;

bool IsHalf(DType dtype) { return dtype == DType::kFloat16 || dtype == DType::kBFloat16; }

absl::StatusOr<int> ToType(GraphBuilder& b, int value, DType dtype) {
  if (b.type(value).dtype == dtype) return value;
  return b.Add("aten._to_copy.default", {value}, {{"dtype", dtype}});
}

// Every dim of `value`'s rank listed in `dims` (wrapped).
absl::StatusOr<std::vector<int64_t>> WrapDims(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> wrapped;
  for (int64_t dim : dims) {
    ASSIGN_OR_RETURN(const int d, WrapDim(dim, std::max<int64_t>(rank, 1)));
    wrapped.push_back(d);
  }
  return wrapped;
}

int64_t Count(const ir::TensorType& type, const std::vector<int64_t>& dims) {
  if (dims.empty()) return type.NumElements();
  int64_t count = 1;
  for (int64_t d : dims) count *= type.sizes[d].constant;
  return count;
}

std::vector<int64_t> DimsArg(const ir::Node& node) {
  auto it = node.args.find("dim");
  if (it == node.args.end()) return {};
  if (const auto* list = std::get_if<std::vector<int64_t>>(&it->second)) return *list;
  if (const auto* one = std::get_if<int64_t>(&it->second)) return {*one};
  return {};
}

bool BoolArg(const ir::Node& node, const std::string& name) {
  auto it = node.args.find(name);
  return it != node.args.end() && std::holds_alternative<bool>(it->second) &&
         std::get<bool>(it->second);
}

// softmax(x, dim) = exp(x - max) / sum(exp(x - max)).
absl::StatusOr<std::vector<int>> Softmax(GraphBuilder& b, const ir::Node& node) {
  const DType out = b.graph().values[node.outputs.empty() ? node.inputs[0] : node.inputs[0]].dtype;
  ASSIGN_OR_RETURN(int x, ToType(b, node.inputs[0], IsHalf(out) ? DType::kFloat32 : out));
  const std::vector<int64_t> dim = {IntArg(node, "dim")};
  ASSIGN_OR_RETURN(const int max, b.Add("aten.amax.default", {x}, {{"dim", dim}, {"keepdim", true}}));
  ASSIGN_OR_RETURN(const int shifted, b.Add("aten.sub.Tensor", {x, max}));
  const bool log = node.op == "aten._log_softmax.default";
  ASSIGN_OR_RETURN(const int exp, b.Add("aten.exp.default", {shifted}));
  ASSIGN_OR_RETURN(const int sum,
                   b.Add("aten.sum.dim_IntList", {exp}, {{"dim", dim}, {"keepdim", true}}));
  int result;
  if (log) {
    ASSIGN_OR_RETURN(const int log_sum, b.Add("aten.log.default", {sum}));
    ASSIGN_OR_RETURN(result, b.Add("aten.sub.Tensor", {shifted, log_sum}));
  } else {
    ASSIGN_OR_RETURN(result, b.Add("aten.div.Tensor", {exp, sum}));
  }
  ASSIGN_OR_RETURN(result, ToType(b, result, out));
  return std::vector<int>{result};
}

// mean = sum / count, in the input's floating type.
absl::StatusOr<int> Mean(GraphBuilder& b, int x, const std::vector<int64_t>& dims, bool keepdim) {
  const ir::TensorType type = b.type(x);
  ASSIGN_OR_RETURN(const std::vector<int64_t> wrapped, WrapDims(dims, type.rank()));
  ASSIGN_OR_RETURN(const int sum, b.Add("aten.sum.dim_IntList", {x},
                                        {{"dim", wrapped}, {"keepdim", keepdim}}));
  return b.Add("aten.div.Tensor", {sum}, {{"other", static_cast<double>(Count(type, wrapped))}});
}

absl::StatusOr<std::vector<int>> MeanOp(GraphBuilder& b, const ir::Node& node) {
  const DType out = [&] {
    auto it = node.args.find("dtype");
    if (it != node.args.end() && std::holds_alternative<DType>(it->second)) {
      return std::get<DType>(it->second);
    }
    return b.type(node.inputs[0]).dtype;
  }();
  ASSIGN_OR_RETURN(const int x, ToType(b, node.inputs[0], IsHalf(out) ? DType::kFloat32 : out));
  ASSIGN_OR_RETURN(int mean, Mean(b, x, DimsArg(node), BoolArg(node, "keepdim")));
  ASSIGN_OR_RETURN(mean, ToType(b, mean, out));
  return std::vector<int>{mean};
}

// var = sum((x - mean)^2) / (count - correction); std = sqrt(var).
absl::StatusOr<std::vector<int>> VarOp(GraphBuilder& b, const ir::Node& node) {
  const DType out = b.type(node.inputs[0]).dtype;
  ASSIGN_OR_RETURN(const int x, ToType(b, node.inputs[0], IsHalf(out) ? DType::kFloat32 : out));
  const ir::TensorType type = b.type(x);
  ASSIGN_OR_RETURN(const std::vector<int64_t> dims, WrapDims(DimsArg(node), type.rank()));
  double correction = 1;
  auto it = node.args.find("correction");
  if (it != node.args.end() && !std::holds_alternative<ir::None>(it->second)) {
    correction = ScalarArgAsDouble(node, "correction");
  }
  ASSIGN_OR_RETURN(const int mean, Mean(b, x, dims, /*keepdim=*/true));
  ASSIGN_OR_RETURN(const int centered, b.Add("aten.sub.Tensor", {x, mean}));
  ASSIGN_OR_RETURN(const int squared, b.Add("aten.mul.Tensor", {centered, centered}));
  ASSIGN_OR_RETURN(const int sum, b.Add("aten.sum.dim_IntList", {squared},
                                        {{"dim", dims}, {"keepdim", BoolArg(node, "keepdim")}}));
  const double divisor = std::max(0.0, static_cast<double>(Count(type, dims)) - correction);
  ASSIGN_OR_RETURN(int result, b.Add("aten.div.Tensor", {sum}, {{"other", divisor}}));
  if (node.op.rfind("aten.std.", 0) == 0) {
    ASSIGN_OR_RETURN(result, b.Add("aten.sqrt.default", {result}));
  }
  ASSIGN_OR_RETURN(result, ToType(b, result, out));
  return std::vector<int>{result};
}

// native_layer_norm(x, shape, weight?, bias?, eps) -> (out, mean, rstd) over
// the last len(shape) dims; weight and bias are the node's 2nd and 3rd
// inputs when present.
absl::StatusOr<std::vector<int>> LayerNorm(GraphBuilder& b, const ir::Node& node) {
  const DType out = b.type(node.inputs[0]).dtype;
  ASSIGN_OR_RETURN(const int x, ToType(b, node.inputs[0], IsHalf(out) ? DType::kFloat32 : out));
  const int64_t rank = b.type(x).rank();
  const int64_t normalized = static_cast<int64_t>(IntListArg(node, "normalized_shape").size());
  std::vector<int64_t> dims;
  for (int64_t d = rank - normalized; d < rank; ++d) dims.push_back(d);
  ASSIGN_OR_RETURN(const int mean, Mean(b, x, dims, /*keepdim=*/true));
  ASSIGN_OR_RETURN(const int centered, b.Add("aten.sub.Tensor", {x, mean}));
  ASSIGN_OR_RETURN(const int squared, b.Add("aten.mul.Tensor", {centered, centered}));
  ASSIGN_OR_RETURN(const int variance, Mean(b, squared, dims, /*keepdim=*/true));
  ASSIGN_OR_RETURN(const int shifted, b.Add("aten.add.Tensor", {variance},
                                            {{"other", ScalarArgAsDouble(node, "eps")}}));
  ASSIGN_OR_RETURN(const int rstd, b.Add("aten.rsqrt.default", {shifted}));
  ASSIGN_OR_RETURN(int result, b.Add("aten.mul.Tensor", {centered, rstd}));
  const bool has_weight = !std::holds_alternative<ir::None>(node.args.at("weight"));
  const bool has_bias = !std::holds_alternative<ir::None>(node.args.at("bias"));
  size_t next = 1;
  if (has_weight) {
    ASSIGN_OR_RETURN(result, b.Add("aten.mul.Tensor", {result, node.inputs[next++]}));
  }
  if (has_bias) {
    ASSIGN_OR_RETURN(result, b.Add("aten.add.Tensor", {result, node.inputs[next++]}));
  }
  ASSIGN_OR_RETURN(result, ToType(b, result, out));
  return std::vector<int>{result, mean, rstd};
}

// addmm(bias, a, b, beta, alpha) = beta * bias + alpha * (a @ b).
absl::StatusOr<std::vector<int>> Addmm(GraphBuilder& b, const ir::Node& node) {
  const bool batched = node.op == "aten.baddbmm.default";
  ASSIGN_OR_RETURN(int product, b.Add(batched ? "aten.bmm.default" : "aten.mm.default",
                                      {node.inputs[1], node.inputs[2]}));
  const double alpha = ScalarArgAsDouble(node, "alpha"), beta = ScalarArgAsDouble(node, "beta");
  if (alpha != 1) {
    ASSIGN_OR_RETURN(product, b.Add("aten.mul.Tensor", {product}, {{"other", alpha}}));
  }
  if (beta == 0) return std::vector<int>{product};  // bias ignored, as eager (even NaN)
  int bias = node.inputs[0];
  if (beta != 1) {
    ASSIGN_OR_RETURN(bias, b.Add("aten.mul.Tensor", {bias}, {{"other", beta}}));
  }
  ASSIGN_OR_RETURN(const int result, b.Add("aten.add.Tensor", {bias, product}));
  return std::vector<int>{result};
}

// _softmax_backward_data(grad, out, dim) = out * (grad - sum(grad * out, dim)).
absl::StatusOr<std::vector<int>> SoftmaxBackward(GraphBuilder& b, const ir::Node& node) {
  const std::vector<int64_t> dim = {IntArg(node, "dim")};
  ASSIGN_OR_RETURN(const int product, b.Add("aten.mul.Tensor", {node.inputs[0], node.inputs[1]}));
  ASSIGN_OR_RETURN(const int sum,
                   b.Add("aten.sum.dim_IntList", {product}, {{"dim", dim}, {"keepdim", true}}));
  ASSIGN_OR_RETURN(const int difference, b.Add("aten.sub.Tensor", {node.inputs[0], sum}));
  ASSIGN_OR_RETURN(const int result, b.Add("aten.mul.Tensor", {node.inputs[1], difference}));
  return std::vector<int>{result};
}

using Decomposition = std::function<absl::StatusOr<std::vector<int>>(GraphBuilder&, const ir::Node&)>;

void AddComposite(OpTable& table, const std::string& op, int min_inputs, int max_inputs,
                  std::vector<ArgSpec> args, Decomposition decompose,
                  std::vector<DType> dtypes = kFloatTypes) {
  OpDef def;
  def.name = op;
  def.family = "composite";
  def.dtypes = std::move(dtypes);
  def.min_inputs = min_inputs;
  def.max_inputs = max_inputs;
  def.args = std::move(args);
  // The result types are those of the decomposition, built on a scratch
  // graph holding just the inputs.
  def.infer = [decompose](const ir::Node& node,
                          const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    ir::Graph scratch;
    ir::Node copy = node;
    copy.inputs.clear();
    for (const ir::TensorType* type : inputs) {
      copy.inputs.push_back(scratch.AddValue(*type, -1));
      scratch.inputs.push_back(copy.inputs.back());
    }
    GraphBuilder builder(scratch);
    ASSIGN_OR_RETURN(const std::vector<int> results, decompose(builder, copy));
    std::vector<ir::TensorType> types;
    for (int result : results) {
      ir::TensorType type = scratch.values[result];
      type.strides = ir::ContiguousStrides(type.sizes);
      types.push_back(std::move(type));
    }
    return types;
  };
  def.decompose = std::move(decompose);
  table.Add(std::move(def));
}

const ArgSpec kDim{"dim", ArgKind::kInt, std::nullopt};
const ArgSpec kDimList{"dim", ArgKind::kIntList, ir::ArgValue(ir::None{})};
const ArgSpec kKeepdim{"keepdim", ArgKind::kBool, ir::ArgValue(false)};

}  // namespace

void RegisterCompositeOps(OpTable& table) {
  const ArgSpec half_to_float{"half_to_float", ArgKind::kBool, ir::ArgValue(false)};
  AddComposite(table, "aten._softmax.default", 1, 1, {kDim, half_to_float}, Softmax);
  AddComposite(table, "aten._log_softmax.default", 1, 1, {kDim, half_to_float}, Softmax);
  AddComposite(table, "aten.mean.dim", 1, 1,
               {kDimList, kKeepdim, {"dtype", ArgKind::kDType, ir::ArgValue(ir::None{})}}, MeanOp);
  AddComposite(table, "aten.mean.default", 1, 1,
               {{"dtype", ArgKind::kDType, ir::ArgValue(ir::None{})}}, MeanOp);
  for (const char* op : {"aten.var.correction", "aten.std.correction"}) {
    AddComposite(table, op, 1, 1,
                 {kDimList, {"correction", ArgKind::kScalar, ir::ArgValue(ir::None{})}, kKeepdim},
                 VarOp);
  }
  AddComposite(table, "aten.native_layer_norm.default", 1, 3,
               {{"normalized_shape", ArgKind::kIntList, std::nullopt},
                {"weight", ArgKind::kOptionalTensor, ir::ArgValue(true)},
                {"bias", ArgKind::kOptionalTensor, ir::ArgValue(true)},
                {"eps", ArgKind::kFloat, std::nullopt}},
               LayerNorm);
  const std::vector<ArgSpec> scale = {{"beta", ArgKind::kScalar, ir::ArgValue(int64_t{1})},
                                      {"alpha", ArgKind::kScalar, ir::ArgValue(int64_t{1})}};
  AddComposite(table, "aten.addmm.default", 3, 3, scale, Addmm);
  AddComposite(table, "aten.baddbmm.default", 3, 3, scale, Addmm);
  AddComposite(table, "aten._softmax_backward_data.default", 2, 2,
               {kDim, {"input_dtype", ArgKind::kDType, ir::ArgValue(ir::None{})}}, SoftmaxBackward);
}

}  // namespace kiln::ops
