// Composite ops: each rewrites itself into core ops (passes/decompose.h).
// 16-bit float inputs are computed in float32 and rounded once at the end,
// as eager's kernels do, so no intermediate is stored at half precision.
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;
using Args = std::map<std::string, ir::ArgValue>;

// Every dim of `value`'s rank listed in `dims` (wrapped).
absl::StatusOr<std::vector<int64_t>> WrapDims(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> wrapped;
  for (int64_t dim : dims) {
    ASSIGN_OR_RETURN(const int d, WrapDim(dim, std::max<int64_t>(rank, 1)));
    wrapped.push_back(d);
  }
  return wrapped;
}

// How many elements `dims` (all of them when empty) hold.
ir::SymExpr Count(const ir::TensorType& type, std::vector<int64_t> dims) {
  if (dims.empty()) {
    for (int64_t d = 0; d < type.rank(); ++d) dims.push_back(d);
  }
  return ElementCount(type, dims);
}

// softmax(x, dim) = exp(x - max) / sum(exp(x - max)).
//
// The max (kiln.softmax_max) skips NaN tests and the exp
// (kiln.exp_nonpositive) assumes x - max <= 0. Both hold in a row without a
// NaN. In a row with one, the max can come out below the row's largest value
// (a NaN resets the lane it lands in), x - max can be positive and the
// cheaper exp wrong there, but the NaN's own exp is NaN, so the sum is NaN,
// and every output is a product with its reciprocal (softmax) or a
// difference with its log (log_softmax): all NaN, as in eager. Whatever
// reads `exp` or `shifted` must go through the sum for this to hold.
absl::StatusOr<std::vector<int>> Softmax(GraphBuilder& b, const ir::Node& node) {
  const DType out = b.type(node.inputs[0]).dtype;
  ASSIGN_OR_RETURN(int x, b.Cast(node.inputs[0], ComputeType(out)));
  const std::vector<int64_t> dim = {IntArg(node, "dim")};
  ASSIGN_OR_RETURN(const int max,
                   b.Add("kiln.softmax_max.default", {x}, {{"dim", dim}, {"keepdim", true}}));
  ASSIGN_OR_RETURN(const int shifted, b.Add("aten.sub.Tensor", {x, max}));
  const bool log = node.op == "aten._log_softmax.default";
  ASSIGN_OR_RETURN(const int exp, b.Add("kiln.exp_nonpositive.default", {shifted}));
  ASSIGN_OR_RETURN(const int sum,
                   b.Add("aten.sum.dim_IntList", {exp}, {{"dim", dim}, {"keepdim", true}}));
  int result;
  if (log) {
    ASSIGN_OR_RETURN(const int log_sum, b.Add("aten.log.default", {sum}));
    ASSIGN_OR_RETURN(result, b.Add("aten.sub.Tensor", {shifted, log_sum}));
  } else {
    // exp * (1 / sum), as eager's vectorized softmax computes it: one
    // division per row, not per element.
    ASSIGN_OR_RETURN(const int inverse, b.Add("aten.reciprocal.default", {sum}));
    ASSIGN_OR_RETURN(result, b.Add("aten.mul.Tensor", {exp, inverse}));
  }
  ASSIGN_OR_RETURN(result, b.Cast(result, out));
  return std::vector<int>{result};
}

// mean = sum / count, in the input's floating type.
absl::StatusOr<int> Mean(GraphBuilder& b, int x, const std::vector<int64_t>& dims, bool keepdim) {
  const ir::TensorType type = b.type(x);
  ASSIGN_OR_RETURN(const std::vector<int64_t> wrapped, WrapDims(dims, type.rank()));
  ASSIGN_OR_RETURN(const int sum,
                   b.Add("aten.sum.dim_IntList", {x}, {{"dim", wrapped}, {"keepdim", keepdim}}));
  return ByCount(b, "aten.div.Tensor", sum, Count(type, wrapped));
}

absl::StatusOr<std::vector<int>> MeanOp(GraphBuilder& b, const ir::Node& node) {
  const DType out = DTypeArg(node, b.type(node.inputs[0]).dtype);
  ASSIGN_OR_RETURN(const int x, b.Cast(node.inputs[0], ComputeType(out)));
  ASSIGN_OR_RETURN(int mean, Mean(b, x, DimsArg(node), BoolArg(node, "keepdim")));
  ASSIGN_OR_RETURN(mean, b.Cast(mean, out));
  return std::vector<int>{mean};
}

// var = sum((x - mean)^2) / (count - correction); std = sqrt(var).
absl::StatusOr<std::vector<int>> VarOp(GraphBuilder& b, const ir::Node& node) {
  const DType out = b.type(node.inputs[0]).dtype;
  // In double, as eager accumulates float32 (so squares of x ~ 1e38 do not
  // overflow); 16-bit floats too, so their results are float32's rounded.
  ASSIGN_OR_RETURN(const int x, b.Cast(node.inputs[0], DType::kFloat64));
  const ir::TensorType type = b.type(x);
  ASSIGN_OR_RETURN(const std::vector<int64_t> dims, WrapDims(DimsArg(node), type.rank()));
  const double correction = Present(node, "correction") ? ScalarArgAsDouble(node, "correction") : 1;
  ASSIGN_OR_RETURN(const int mean, Mean(b, x, dims, /*keepdim=*/true));
  ASSIGN_OR_RETURN(const int centered, b.Add("aten.sub.Tensor", {x, mean}));
  ASSIGN_OR_RETURN(const int squared, b.Add("aten.mul.Tensor", {centered, centered}));
  ASSIGN_OR_RETURN(const int sum, b.Add("aten.sum.dim_IntList", {squared},
                                        {{"dim", dims}, {"keepdim", BoolArg(node, "keepdim")}}));
  const ir::SymExpr count = Count(type, dims);
  int result;
  if (count.is_constant()) {
    const double divisor = std::max(0.0, static_cast<double>(count.constant()) - correction);
    ASSIGN_OR_RETURN(result, b.Add("aten.div.Tensor", {sum}, {{"other", divisor}}));
  } else if (correction == std::floor(correction) && correction <= 2 && correction > -(1 << 30)) {
    // A symbolic count is >= 2, so count - correction >= 0, as eager's
    // max(0, count - correction) would be.
    ASSIGN_OR_RETURN(result,
                     ByCount(b, "aten.div.Tensor", sum,
                             count + ir::SymExpr::Constant(-static_cast<int64_t>(correction))));
  } else {
    return absl::UnimplementedError(
        "a correction above 2 or fractional over a symbolic count is not supported");
  }
  if (node.op.rfind("aten.std.", 0) == 0) {
    ASSIGN_OR_RETURN(result, b.Add("aten.sqrt.default", {result}));
  }
  ASSIGN_OR_RETURN(result, b.Cast(result, out));
  return std::vector<int>{result};
}

// var_mean(x, dims, correction, keepdim) = (var, mean), each as its own op.
absl::StatusOr<std::vector<int>> VarMean(GraphBuilder& b, const ir::Node& node) {
  ASSIGN_OR_RETURN(const std::vector<int> var, VarOp(b, node));
  ASSIGN_OR_RETURN(const std::vector<int> mean, MeanOp(b, node));
  return std::vector<int>{var[0], mean[0]};
}

// count_nonzero(x, dims) = the sum of x != 0 (int64) over dims (all when
// none).
absl::StatusOr<std::vector<int>> CountNonzero(GraphBuilder& b, const ir::Node& node) {
  ASSIGN_OR_RETURN(const int nonzero,
                   b.Add("aten.ne.Scalar", {node.inputs[0]}, {{"other", int64_t{0}}}));
  ASSIGN_OR_RETURN(const int count, b.Add("aten.sum.dim_IntList", {nonzero},
                                          {{"dim", DimsArg(node)}, {"keepdim", false}}));
  return std::vector<int>{count};
}

// A loss's elements reduced as the node's `reduction` says: each element
// (0), their mean (1, the default) or their sum (2).
absl::StatusOr<int> Reduced(GraphBuilder& b, const ir::Node& node, int elements) {
  switch (IntArg(node, "reduction")) {
    case 0:
      return elements;
    case 1:
      return Mean(b, elements, {}, /*keepdim=*/false);
    case 2:
      return b.Add("aten.sum.default", {elements});
  }
  return absl::InvalidArgumentError(
      absl::StrCat("reduction ", IntArg(node, "reduction"), " is not 0, 1 or 2"));
}

// A loss gradient's elements divided by the element count of `x` when the
// loss was a mean.
absl::StatusOr<int> ByReduction(GraphBuilder& b, const ir::Node& node, int elements, int x) {
  const int64_t reduction = IntArg(node, "reduction");
  if (reduction < 0 || reduction > 2) {
    return absl::InvalidArgumentError(absl::StrCat("reduction ", reduction, " is not 0, 1 or 2"));
  }
  if (reduction != 1) return elements;
  return ByCount(b, "aten.div.Tensor", elements, Count(b.type(x), {}));
}

// mse_loss(x, target, reduction) = (x - target)^2, reduced.
absl::StatusOr<std::vector<int>> MseLoss(GraphBuilder& b, const ir::Node& node) {
  ASSIGN_OR_RETURN(const int difference, b.Add("aten.sub.Tensor", node.inputs));
  ASSIGN_OR_RETURN(const int squared, b.Add("aten.mul.Tensor", {difference, difference}));
  ASSIGN_OR_RETURN(const int loss, Reduced(b, node, squared));
  return std::vector<int>{loss};
}

// mse_loss_backward(grad, x, target, reduction) = grad * 2 (x - target),
// divided by the element count for a mean.
absl::StatusOr<std::vector<int>> MseLossBackward(GraphBuilder& b, const ir::Node& node) {
  const int x = node.inputs[1];
  ASSIGN_OR_RETURN(const int difference, b.Add("aten.sub.Tensor", {x, node.inputs[2]}));
  ASSIGN_OR_RETURN(int scaled, b.Add("aten.mul.Tensor", {difference}, {{"other", 2.0}}));
  ASSIGN_OR_RETURN(scaled, ByReduction(b, node, scaled, x));
  ASSIGN_OR_RETURN(const int grad, b.Add("aten.mul.Tensor", {scaled, node.inputs[0]}));
  return std::vector<int>{grad};
}

// smooth_l1_loss(x, target, reduction, beta): z = |x - target|, then
// z < beta ? 0.5 z z / beta : z - 0.5 beta (z itself for beta 0), reduced.
// huber_loss(x, target, reduction, delta): z < delta ? 0.5 z z
// : delta (z - 0.5 delta), reduced. In eager's order of operations.
absl::StatusOr<std::vector<int>> SmoothLoss(GraphBuilder& b, const ir::Node& node) {
  const bool huber = node.op == "aten.huber_loss.default";
  const double width = ScalarArgAsDouble(node, huber ? "delta" : "beta");
  if (width < 0 || (huber && width == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(huber ? "delta " : "beta ", width,
                                                   huber ? " is not positive" : " is negative"));
  }
  ASSIGN_OR_RETURN(const int difference, b.Add("aten.sub.Tensor", node.inputs));
  ASSIGN_OR_RETURN(const int z, b.Add("aten.abs.default", {difference}));
  int elements = z;
  if (width > 0) {
    ASSIGN_OR_RETURN(const int inside, b.Add("aten.lt.Scalar", {z}, {{"other", width}}));
    ASSIGN_OR_RETURN(const int half, b.Add("aten.mul.Tensor", {z}, {{"other", 0.5}}));
    ASSIGN_OR_RETURN(int square, b.Add("aten.mul.Tensor", {half, z}));
    int linear;
    if (huber) {
      ASSIGN_OR_RETURN(const int shifted, b.Add("aten.sub.Tensor", {z}, {{"other", 0.5 * width}}));
      ASSIGN_OR_RETURN(linear, b.Add("aten.mul.Tensor", {shifted}, {{"other", width}}));
    } else {
      ASSIGN_OR_RETURN(square, b.Add("aten.div.Tensor", {square}, {{"other", width}}));
      ASSIGN_OR_RETURN(linear, b.Add("aten.sub.Tensor", {z}, {{"other", 0.5 * width}}));
    }
    ASSIGN_OR_RETURN(elements, b.Add("aten.where.self", {inside, square, linear}));
  }
  ASSIGN_OR_RETURN(const int loss, Reduced(b, node, elements));
  return std::vector<int>{loss};
}

// Their gradients, d = x - target: d <= -w ? -grad s : (d >= w ? grad s
// : d grad s'), with w = beta, s = 1, s' = 1 / beta (smooth_l1) or
// w = delta, s = delta, s' = 1 (huber); over the count for a mean.
absl::StatusOr<std::vector<int>> SmoothLossBackward(GraphBuilder& b, const ir::Node& node) {
  const bool huber = node.op == "aten.huber_loss_backward.default";
  const double width = ScalarArgAsDouble(node, huber ? "delta" : "beta");
  const int grad = node.inputs[0], x = node.inputs[1];
  ASSIGN_OR_RETURN(const int d, b.Add("aten.sub.Tensor", {x, node.inputs[2]}));
  ASSIGN_OR_RETURN(const int low, b.Add("aten.le.Scalar", {d}, {{"other", -width}}));
  ASSIGN_OR_RETURN(const int high, b.Add("aten.ge.Scalar", {d}, {{"other", width}}));
  const double outer = huber ? width : 1.0;
  ASSIGN_OR_RETURN(const int positive, b.Add("aten.mul.Tensor", {grad}, {{"other", outer}}));
  ASSIGN_OR_RETURN(const int negative, b.Add("aten.mul.Tensor", {grad}, {{"other", -outer}}));
  ASSIGN_OR_RETURN(int inner, b.Add("aten.mul.Tensor", {d, grad}));
  if (!huber) {
    if (width == 0) {
      return absl::UnimplementedError("smooth_l1_loss_backward with beta 0 (l1_loss's gradient)");
    }
    ASSIGN_OR_RETURN(inner, b.Add("aten.div.Tensor", {inner}, {{"other", width}}));
  }
  ASSIGN_OR_RETURN(int result, b.Add("aten.where.self", {high, positive, inner}));
  ASSIGN_OR_RETURN(result, b.Add("aten.where.self", {low, negative, result}));
  ASSIGN_OR_RETURN(result, ByReduction(b, node, result, x));
  return std::vector<int>{result};
}

// The dims a layer norm normalizes: the input's last, which must have the
// sizes normalized_shape says (a symbolic one is not checked), as eager
// requires.
absl::StatusOr<std::vector<int64_t>> NormalizedDims(const ir::TensorType& type,
                                                    const ir::Node& node) {
  const std::vector<int64_t> shape = IntListArg(node, "normalized_shape");
  const int64_t rank = type.rank(), count = static_cast<int64_t>(shape.size());
  const std::string named = absl::StrCat("normalized_shape [", absl::StrJoin(shape, ", "), "]");
  if (count == 0 || count > rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        named, " must name 1 to ", rank, " of the input's last dims (it has ", rank, ")"));
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t d = rank - count + i;
    const ir::Dim& size = type.sizes[d];
    if (!size.is_symbolic() && size.constant != shape[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat(named, " does not match the input's dim ", d, ", of size ", size.constant));
    }
    dims.push_back(d);
  }
  return dims;
}

// native_layer_norm(x, shape, weight?, bias?, eps) -> (out, mean, rstd) over
// the last len(shape) dims; weight and bias are the node's 2nd and 3rd
// inputs when present.
absl::StatusOr<std::vector<int>> LayerNorm(GraphBuilder& b, const ir::Node& node) {
  const DType out = b.type(node.inputs[0]).dtype;
  ASSIGN_OR_RETURN(const int x, b.Cast(node.inputs[0], ComputeType(out)));
  ASSIGN_OR_RETURN(const std::vector<int64_t> dims, NormalizedDims(b.type(x), node));
  ASSIGN_OR_RETURN(const int mean, Mean(b, x, dims, /*keepdim=*/true));
  ASSIGN_OR_RETURN(const int centered, b.Add("aten.sub.Tensor", {x, mean}));
  ASSIGN_OR_RETURN(const int squared, b.Add("aten.mul.Tensor", {centered, centered}));
  ASSIGN_OR_RETURN(const int variance, Mean(b, squared, dims, /*keepdim=*/true));
  ASSIGN_OR_RETURN(const int shifted, b.Add("aten.add.Tensor", {variance},
                                            {{"other", ScalarArgAsDouble(node, "eps")}}));
  ASSIGN_OR_RETURN(const int rstd, b.Add("aten.rsqrt.default", {shifted}));
  ASSIGN_OR_RETURN(int result, b.Add("aten.mul.Tensor", {centered, rstd}));
  const bool has_weight = Present(node, "weight");
  const bool has_bias = Present(node, "bias");
  size_t next = 1;
  if (has_weight) {
    ASSIGN_OR_RETURN(result, b.Add("aten.mul.Tensor", {result, node.inputs[next++]}));
  }
  if (has_bias) {
    ASSIGN_OR_RETURN(result, b.Add("aten.add.Tensor", {result, node.inputs[next++]}));
  }
  ASSIGN_OR_RETURN(result, b.Cast(result, out));
  // mean and rstd: eager's CPU kernel returns them in the input's dtype;
  // float16 graphs (traced with meta kernels) declare float32.
  const DType statistics = out == DType::kFloat16 ? DType::kFloat32 : out;
  ASSIGN_OR_RETURN(const int mean_out, b.Cast(mean, statistics));
  ASSIGN_OR_RETURN(const int rstd_out, b.Cast(rstd, statistics));
  return std::vector<int>{result, mean_out, rstd_out};
}

// native_layer_norm_backward(grad, x, shape, mean, rstd, weight?, bias?,
// output_mask) -> (grad_x, grad_weight, grad_bias), over the last
// len(shape) dims (N elements per row), with x_hat = (x - mean) * rstd and
// g = grad * weight:
//   grad_x = rstd / N * (N g - sum(g) - x_hat sum(g x_hat)),
//   grad_weight = sum over rows of grad * x_hat, grad_bias = of grad.
// All three are computed whatever output_mask says (unused ones are dead).
absl::StatusOr<std::vector<int>> LayerNormBackward(GraphBuilder& b, const ir::Node& node) {
  const DType out = b.type(node.inputs[1]).dtype;
  const DType compute = ComputeType(out);
  std::vector<int> in;
  for (int input : node.inputs) {
    ASSIGN_OR_RETURN(const int converted, b.Cast(input, compute));
    in.push_back(converted);
  }
  const int grad = in[0], x = in[1], mean = in[2], rstd = in[3];
  const bool has_weight = Present(node, "weight");
  ASSIGN_OR_RETURN(const std::vector<int64_t> row_dims, NormalizedDims(b.type(x), node));
  std::vector<int64_t> lead_dims;
  for (int64_t d = 0; d < row_dims.front(); ++d) lead_dims.push_back(d);
  const ir::SymExpr count = Count(b.type(x), row_dims);
  auto add = [&](const char* op, std::vector<int> inputs,
                 std::map<std::string, ir::ArgValue> args = {}) {
    return b.Add(op, std::move(inputs), std::move(args));
  };
  auto row_sum = [&](int value) {
    return add("aten.sum.dim_IntList", {value}, {{"dim", row_dims}, {"keepdim", true}});
  };
  // Over the leading dims; none (rank == len(shape)) means no reduction.
  auto lead_sum = [&](int value) -> absl::StatusOr<int> {
    if (lead_dims.empty()) return value;
    return add("aten.sum.dim_IntList", {value}, {{"dim", lead_dims}, {"keepdim", false}});
  };
  ASSIGN_OR_RETURN(const int centered, add("aten.sub.Tensor", {x, mean}));
  ASSIGN_OR_RETURN(const int x_hat, add("aten.mul.Tensor", {centered, rstd}));
  int g = grad;
  if (has_weight) {
    ASSIGN_OR_RETURN(g, add("aten.mul.Tensor", {grad, in[4]}));
  }
  ASSIGN_OR_RETURN(const int sum_g, row_sum(g));
  ASSIGN_OR_RETURN(const int g_x_hat, add("aten.mul.Tensor", {g, x_hat}));
  ASSIGN_OR_RETURN(const int sum_g_x_hat, row_sum(g_x_hat));
  ASSIGN_OR_RETURN(const int scaled, ByCount(b, "aten.mul.Tensor", g, count));
  ASSIGN_OR_RETURN(const int minus_sum, add("aten.sub.Tensor", {scaled, sum_g}));
  ASSIGN_OR_RETURN(const int projection, add("aten.mul.Tensor", {x_hat, sum_g_x_hat}));
  ASSIGN_OR_RETURN(const int inner, add("aten.sub.Tensor", {minus_sum, projection}));
  ASSIGN_OR_RETURN(const int factor, ByCount(b, "aten.div.Tensor", rstd, count));
  ASSIGN_OR_RETURN(int grad_x, add("aten.mul.Tensor", {factor, inner}));
  ASSIGN_OR_RETURN(const int grad_x_hat, add("aten.mul.Tensor", {grad, x_hat}));
  ASSIGN_OR_RETURN(int grad_weight, lead_sum(grad_x_hat));
  ASSIGN_OR_RETURN(int grad_bias, lead_sum(grad));
  ASSIGN_OR_RETURN(grad_x, b.Cast(grad_x, out));
  ASSIGN_OR_RETURN(grad_weight, b.Cast(grad_weight, out));
  ASSIGN_OR_RETURN(grad_bias, b.Cast(grad_bias, out));
  return std::vector<int>{grad_x, grad_weight, grad_bias};
}

// addmm(bias, a, b, beta, alpha) = beta * bias + alpha * (a @ b). 16-bit
// floats: the whole of it in float32, rounded once at the end (as eager's
// BLAS path does).
absl::StatusOr<std::vector<int>> Addmm(GraphBuilder& b, const ir::Node& node) {
  const DType out = b.type(node.inputs[1]).dtype;
  if (ComputeType(out) != out) {
    std::vector<int> wide;
    for (int input : node.inputs) {
      ASSIGN_OR_RETURN(const int converted, b.Cast(input, DType::kFloat32));
      wide.push_back(converted);
    }
    std::map<std::string, ir::ArgValue> args(node.args.begin(), node.args.end());
    ASSIGN_OR_RETURN(const int result, b.Add(node.op, wide, args));
    ASSIGN_OR_RETURN(const int rounded, b.Cast(result, out));
    return std::vector<int>{rounded};
  }
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

// linear(x, weight, bias?) = x @ weight.T + bias, over x's last dim (make_fx
// decomposes it itself; other tracers may not).
absl::StatusOr<std::vector<int>> Linear(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType x = b.type(node.inputs[0]);
  const ir::TensorType weight = b.type(node.inputs[1]);
  if (x.rank() < 1 || weight.rank() != 2) {
    return absl::InvalidArgumentError("linear needs an input of rank >= 1 and a 2-D weight");
  }
  if (x.sizes.back().is_symbolic() || !weight.is_static()) {
    return absl::UnimplementedError("linear over a symbolic feature dim is not supported yet");
  }
  const int64_t in = x.sizes.back().constant, out = weight.sizes[0].constant;
  ASSIGN_OR_RETURN(const int transposed, b.Add("aten.t.default", {node.inputs[1]}));
  ASSIGN_OR_RETURN(const int flat, b.Add("aten.reshape.default", {node.inputs[0]},
                                         {{"size", std::vector<int64_t>{-1, in}}}));
  int product;
  if (node.inputs.size() == 3) {
    ASSIGN_OR_RETURN(product, b.Add("aten.addmm.default", {node.inputs[2], flat, transposed}));
  } else {
    ASSIGN_OR_RETURN(product, b.Add("aten.mm.default", {flat, transposed}));
  }
  std::vector<int64_t> sizes;  // a symbolic dim is the reshape's -1 (two: Unimplemented there)
  for (int64_t d = 0; d + 1 < x.rank(); ++d) {
    sizes.push_back(x.sizes[d].is_symbolic() ? -1 : x.sizes[d].constant);
  }
  sizes.push_back(out);
  ASSIGN_OR_RETURN(const int result, b.Add("aten.reshape.default", {product}, {{"size", sizes}}));
  return std::vector<int>{result};
}

// prelu's weight (the node's input `input`, one value or one per channel:
// dim 1 of x, the input before it) reshaped to broadcast against x; and
// whether it is one value.
absl::StatusOr<std::pair<int, bool>> PreluWeight(GraphBuilder& b, const ir::Node& node, int input) {
  const ir::TensorType x = b.type(node.inputs[input - 1]);
  const ir::TensorType weight = b.type(node.inputs[input]);
  const bool single =
      weight.rank() == 0 || (weight.rank() == 1 && weight.sizes[0] == ir::Dim::Constant(1));
  if (!single && (weight.rank() != 1 || x.rank() < 2 || weight.sizes[0] != x.sizes[1])) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight ", ir::ToString(weight, b.graph()),
                     " is neither one value nor one per channel (dim 1) of the input ",
                     ir::ToString(x, b.graph())));
  }
  std::vector<ir::SymExpr> shape;
  if (!single) {
    shape.push_back(ir::SymExpr::Of(weight.sizes[0]));
    for (int64_t d = 2; d < x.rank(); ++d) shape.push_back(ir::SymExpr::Constant(1));
  }
  ASSIGN_OR_RETURN(const int w,
                   b.Add("aten.reshape.default", {node.inputs[input]}, {{"size", shape}}));
  return std::make_pair(w, single);
}

// prelu(x, weight) = x > 0 ? x : weight * x.
absl::StatusOr<std::vector<int>> Prelu(GraphBuilder& b, const ir::Node& node) {
  ASSIGN_OR_RETURN(const auto weight, PreluWeight(b, node, 1));
  const int x = node.inputs[0];
  ASSIGN_OR_RETURN(const int positive, b.Add("aten.gt.Scalar", {x}, {{"other", int64_t{0}}}));
  ASSIGN_OR_RETURN(const int scaled, b.Add("aten.mul.Tensor", {weight.first, x}));
  ASSIGN_OR_RETURN(const int result, b.Add("aten.where.self", {positive, x, scaled}));
  return std::vector<int>{result};
}

// prelu_backward(grad, x, weight) = (x > 0 ? grad : weight * grad, the sum
// of (x > 0 ? 0 : x * grad) over every dim but the channels, in weight's
// shape).
absl::StatusOr<std::vector<int>> PreluBackward(GraphBuilder& b, const ir::Node& node) {
  ASSIGN_OR_RETURN(const auto weight, PreluWeight(b, node, 2));
  const int grad = node.inputs[0], x = node.inputs[1];
  const ir::TensorType type = b.type(x);
  ASSIGN_OR_RETURN(const int positive, b.Add("aten.gt.Scalar", {x}, {{"other", int64_t{0}}}));
  ASSIGN_OR_RETURN(const int scaled, b.Add("aten.mul.Tensor", {weight.first, grad}));
  ASSIGN_OR_RETURN(const int grad_x, b.Add("aten.where.self", {positive, grad, scaled}));
  ASSIGN_OR_RETURN(const int product, b.Add("aten.mul.Tensor", {x, grad}));
  ASSIGN_OR_RETURN(const int collected,
                   b.Add("aten.masked_fill.Scalar", {product, positive}, {{"value", int64_t{0}}}));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < type.rank(); ++d) {
    if (weight.second || d != 1) dims.push_back(d);
  }
  ASSIGN_OR_RETURN(int grad_weight,
                   b.Add("aten.sum.dim_IntList", {collected}, {{"dim", dims}, {"keepdim", false}}));
  std::vector<ir::SymExpr> shape;
  for (const ir::Dim& size : b.type(node.inputs[2]).sizes) shape.push_back(ir::SymExpr::Of(size));
  ASSIGN_OR_RETURN(grad_weight, b.Add("aten.reshape.default", {grad_weight}, {{"size", shape}}));
  return std::vector<int>{grad_x, grad_weight};
}

// _softmax_backward_data(grad, out, dim) = out * (grad - sum(grad * out, dim)).
absl::StatusOr<std::vector<int>> SoftmaxBackward(GraphBuilder& b, const ir::Node& node) {
  const DType out = b.type(node.inputs[0]).dtype;
  const DType compute = ComputeType(out);
  ASSIGN_OR_RETURN(const int grad, b.Cast(node.inputs[0], compute));
  ASSIGN_OR_RETURN(const int output, b.Cast(node.inputs[1], compute));
  const std::vector<int64_t> dim = {IntArg(node, "dim")};
  ASSIGN_OR_RETURN(const int product, b.Add("aten.mul.Tensor", {grad, output}));
  ASSIGN_OR_RETURN(const int sum,
                   b.Add("aten.sum.dim_IntList", {product}, {{"dim", dim}, {"keepdim", true}}));
  ASSIGN_OR_RETURN(const int difference, b.Add("aten.sub.Tensor", {grad, sum}));
  ASSIGN_OR_RETURN(int result, b.Add("aten.mul.Tensor", {output, difference}));
  ASSIGN_OR_RETURN(result, b.Cast(result, out));
  return std::vector<int>{result};
}

const ArgSpec kDim{"dim", ArgKind::kInt, std::nullopt};
const ArgSpec kDimList{"dim", ArgKind::kIntList, ir::ArgValue(ir::None{})};
const ArgSpec kKeepdim{"keepdim", ArgKind::kBool, ir::ArgValue(false)};

}  // namespace

void RegisterCompositeOps(OpTable& table) {
  const std::vector<DType> integral = {DType::kInt64, DType::kBool};
  const ArgSpec half_to_float{"half_to_float", ArgKind::kBool, ir::ArgValue(false)};
  AddComposite(table, "aten._softmax.default", 1, 1, {kDim, half_to_float}, Softmax, kFloatTypes,
               integral);
  AddComposite(table, "aten._log_softmax.default", 1, 1, {kDim, half_to_float}, Softmax,
               kFloatTypes, integral);
  AddComposite(table, "aten.mean.dim", 1, 1,
               {kDimList, kKeepdim, {"dtype", ArgKind::kDType, ir::ArgValue(ir::None{})}}, MeanOp,
               kFloatTypes, integral);
  AddComposite(table, "aten.mean.default", 1, 1,
               {{"dtype", ArgKind::kDType, ir::ArgValue(ir::None{})}}, MeanOp, kFloatTypes,
               integral);
  for (const char* op : {"aten.var.correction", "aten.std.correction"}) {
    AddComposite(table, op, 1, 1,
                 {kDimList, {"correction", ArgKind::kScalar, ir::ArgValue(ir::None{})}, kKeepdim},
                 VarOp, kFloatTypes, integral);
  }
  const ArgSpec weight{"weight", ArgKind::kOptionalTensor, ir::ArgValue(true)};
  const ArgSpec bias{"bias", ArgKind::kOptionalTensor, ir::ArgValue(true)};
  const ArgSpec normalized_shape{"normalized_shape", ArgKind::kIntList, std::nullopt};
  AddComposite(table, "aten.native_layer_norm.default", 1, 3,
               {normalized_shape, weight, bias, {"eps", ArgKind::kFloat, std::nullopt}}, LayerNorm,
               kFloatTypes, integral);
  AddComposite(table, "aten.native_layer_norm_backward.default", 4, 6,
               {normalized_shape, weight, bias, {"output_mask", ArgKind::kBoolList, std::nullopt}},
               LayerNormBackward, kFloatTypes, integral);
  const ArgSpec reduction{"reduction", ArgKind::kInt, ir::ArgValue(int64_t{1})};
  AddComposite(table, "aten.mse_loss.default", 2, 2, {reduction}, MseLoss,
               {DType::kFloat32, DType::kFloat64}, integral);
  AddComposite(table, "aten.mse_loss_backward.default", 3, 3, {reduction}, MseLossBackward,
               {DType::kFloat32, DType::kFloat64}, integral);
  for (const char* op : {"aten.smooth_l1_loss.default", "aten.huber_loss.default"}) {
    const bool huber = std::string(op) == "aten.huber_loss.default";
    AddComposite(table, op, 2, 2,
                 {reduction, {huber ? "delta" : "beta", ArgKind::kFloat, ir::ArgValue(1.0)}},
                 SmoothLoss, kFloatTypes, integral);
  }
  // Eager has no float16 kernels for these gradients.
  const std::vector<DType> not_float16 = {DType::kFloat32, DType::kFloat64, DType::kBFloat16};
  AddComposite(table, "aten.smooth_l1_loss_backward.default", 3, 3,
               {reduction, {"beta", ArgKind::kFloat, std::nullopt}}, SmoothLossBackward,
               not_float16, integral);
  AddComposite(table, "aten.huber_loss_backward.default", 3, 3,
               {reduction, {"delta", ArgKind::kFloat, std::nullopt}}, SmoothLossBackward,
               not_float16, integral);
  AddComposite(table, "aten.var_mean.correction", 1, 1,
               {kDimList, {"correction", ArgKind::kScalar, ir::ArgValue(ir::None{})}, kKeepdim},
               VarMean, kFloatTypes, integral);
  AddComposite(table, "aten.count_nonzero.default", 1, 1,
               {{"dim", ArgKind::kInt, ir::ArgValue(ir::None{})}}, CountNonzero, kAllTypes);
  AddComposite(table, "aten.count_nonzero.dim_IntList", 1, 1,
               {{"dim", ArgKind::kIntList, std::nullopt}}, CountNonzero, kAllTypes);
  const std::vector<ArgSpec> scale = {{"beta", ArgKind::kScalar, ir::ArgValue(int64_t{1})},
                                      {"alpha", ArgKind::kScalar, ir::ArgValue(int64_t{1})}};
  AddComposite(table, "aten.addmm.default", 3, 3, scale, Addmm, kFloatTypes, {DType::kBool});
  AddComposite(table, "aten.baddbmm.default", 3, 3, scale, Addmm, kFloatTypes, {DType::kBool});
  AddComposite(table, "aten.linear.default", 2, 3, {bias}, Linear, kFloatTypes, {DType::kBool});
  AddComposite(table, "aten._softmax_backward_data.default", 2, 2,
               {kDim, {"input_dtype", ArgKind::kDType, ir::ArgValue(ir::None{})}}, SoftmaxBackward,
               kFloatTypes, integral);
  AddComposite(table, "aten.prelu.default", 2, 2, {}, Prelu, kFloatTypes, integral);
  AddComposite(table, "aten.prelu_backward.default", 3, 3, {}, PreluBackward, kFloatTypes,
               integral);
}

}  // namespace kiln::ops
