// Clamp-style activations and the backward ops autograd emits for them in a
// training graph (make_fx, torch 2.15): hardtanh (ReLU6 is hardtanh(0, 6)),
// hardswish, hardsigmoid, leaky_relu and elu (selu traces to elu; celu's
// gradient is elu_backward, though its forward, aten.celu, is not here), and
// the shrinks (hardshrink, softshrink).
//
// Each element follows eager's CPU kernel (ATen/native/cpu/Activation.cpp)
// operation for operation, so IEEE arithmetic gives eager's bits: x * r / 6
// is not x * (r / 6), and hardsigmoid_backward's 1/6 is the float 1.0f / 6.0f
// even for float64. Where eager's vectorized and scalar loops disagree (a NaN
// input of hardtanh_backward, hardswish_backward and elu_backward;
// hardswish_backward at exactly 3), Kiln follows the vectorized loop: what
// eager computes for contiguous tensors.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// One element's arithmetic in the compute type, so that the bodies below
// read like eager's kernels.
class Element {
 public:
  Element(ExprBuilder& builder, DType compute) : b_(builder), t_(compute) {}

  int Constant(double value) { return b_.Constant(value, t_); }
  int Add(int l, int r) { return b_.Call("add", {l, r}, t_); }
  int Sub(int l, int r) { return b_.Call("sub", {l, r}, t_); }
  int Mul(int l, int r) { return b_.Call("mul", {l, r}, t_); }
  int Div(int l, int r) { return b_.Call("div", {l, r}, t_); }
  int Exp(int x) { return b_.Call("exp", {x}, t_); }
  // x * factor; x * 1 is x in IEEE arithmetic (NaN, infinities and -0.0
  // included), so eager's multiplications by a unit factor are left out.
  int Scale(int x, double factor) { return factor == 1 ? x : Mul(x, Constant(factor)); }
  // NaN-propagating, as eager's vectorized minimum(maximum(x, low), high).
  int Clamp(int x, double low, double high) {
    return b_.Call("clamp_max", {b_.Call("clamp_min", {x, Constant(low)}, t_), Constant(high)}, t_);
  }
  int Greater(int l, int r) { return b_.Call("gt", {l, r}, DType::kBool); }
  int GreaterEqual(int l, int r) { return b_.Call("ge", {l, r}, DType::kBool); }
  int Less(int l, int r) { return b_.Call("lt", {l, r}, DType::kBool); }
  int LessEqual(int l, int r) { return b_.Call("le", {l, r}, DType::kBool); }
  int And(int l, int r) { return b_.Call("logical_and", {l, r}, DType::kBool); }
  int Select(int condition, int yes, int no) { return b_.Call("where", {condition, yes, no}, t_); }

 private:
  ExprBuilder& b_;
  DType t_;
};

// A scalar argument as eager's activation kernels take it: converted to the
// compute type (float for 16-bit tensors, never rounded to 16 bits first).
// hardtanh is the exception: it is clamp, whose bounds are ScalarConstants.
double ComputeScalar(const ir::Node& node, const std::string& name, Types types) {
  return RoundScalar(ScalarArgAsDouble(node, name), types.compute);
}

// elu's coefficients, as the kernel computes them: alpha * scale in the
// compute type (exact in double, then rounded once like float * float).
struct EluCoefficients {
  double negative, positive, input;
};
EluCoefficients Coefficients(const ir::Node& node, Types types) {
  const double alpha = ComputeScalar(node, "alpha", types);
  const double scale = ComputeScalar(node, "scale", types);
  return {RoundScalar(alpha * scale, types.compute), scale,
          ComputeScalar(node, "input_scale", types)};
}

// hardtanh(x, min_val, max_val) is eager's clamp: bounds rounded to x's
// dtype (an integer x truncates them, as c10::Scalar::to<int64_t> does).
absl::StatusOr<int> Hardtanh(ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                             Types types) {
  auto bound = [&](const std::string& name) {
    if (ir::IsFloatingPoint(types.compute)) return ScalarConstant(b, node, name, types);
    return b.Constant(std::trunc(ScalarArgAsDouble(node, name)), types.compute);
  };
  const int low = bound("min_val");
  const int high = bound("max_val");
  return b.Call("clamp_max", {b.Call("clamp_min", {operands[0], low}, types.compute), high},
                types.compute);
}

// hardswish(x) = x * min(max(x + 3, 0), 6) / 6.
absl::StatusOr<int> Hardswish(ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                              Types types) {
  Element e(b, types.compute);
  const int x = operands[0];
  return e.Div(e.Mul(x, e.Clamp(e.Add(x, e.Constant(3)), 0, 6)), e.Constant(6));
}

// hardsigmoid(x) = min(max(x + 3, 0), 6) / 6.
absl::StatusOr<int> Hardsigmoid(ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                                Types types) {
  Element e(b, types.compute);
  return e.Div(e.Clamp(e.Add(operands[0], e.Constant(3)), 0, 6), e.Constant(6));
}

// leaky_relu(x) = x > 0 ? x : x * negative_slope.
absl::StatusOr<int> LeakyRelu(ExprBuilder& b, const ir::Node& node,
                              const std::vector<int>& operands, Types types) {
  Element e(b, types.compute);
  const int x = operands[0];
  const double slope = ComputeScalar(node, "negative_slope", types);
  return e.Select(e.Greater(x, e.Constant(0)), x, e.Scale(x, slope));
}

// hardshrink(x) = -lambd <= x <= lambd ? 0 : x, lambd in x's dtype (eager
// converts it to the tensor's type, 16-bit ones included).
absl::StatusOr<int> Hardshrink(ExprBuilder& b, const ir::Node& node,
                               const std::vector<int>& operands, Types types) {
  Element e(b, types.compute);
  const int x = operands[0];
  const double lambd = RoundScalar(ScalarArgAsDouble(node, "lambd"), types.operand);
  const int inside =
      e.And(e.GreaterEqual(x, e.Constant(-lambd)), e.LessEqual(x, e.Constant(lambd)));
  return e.Select(inside, e.Constant(0), x);
}

// softshrink(x) = -lambd <= x <= lambd ? 0 : (x > lambd ? x - lambd :
// x + lambd), NaN for NaN, lambd converted to x's dtype and computed in the
// compute type, as eager's vectorized loop (its scalar loop gives -0 for a
// negative x inside).
absl::StatusOr<int> Softshrink(ExprBuilder& b, const ir::Node& node,
                               const std::vector<int>& operands, Types types) {
  Element e(b, types.compute);
  const int x = operands[0];
  const double lambd = RoundScalar(ScalarArgAsDouble(node, "lambd"), types.operand);
  const int high = e.Constant(lambd), low = e.Constant(-lambd);
  return e.Select(e.And(e.GreaterEqual(x, low), e.LessEqual(x, high)), e.Constant(0),
                  e.Select(e.Greater(x, high), e.Sub(x, high), e.Add(x, high)));
}

// elu(x) = x <= 0 ? (exp(x * input_scale) - 1) * alpha * scale : x * scale;
// exp - 1, not expm1, as eager.
absl::StatusOr<int> Elu(ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                        Types types) {
  Element e(b, types.compute);
  const int x = operands[0];
  const EluCoefficients c = Coefficients(node, types);
  const int negative = e.Scale(e.Sub(e.Exp(e.Scale(x, c.input)), e.Constant(1)), c.negative);
  return e.Select(e.LessEqual(x, e.Constant(0)), negative, e.Scale(x, c.positive));
}

// hardtanh_backward(grad, self) = min_val < self < max_val ? grad : 0; a
// NaN self gives 0 (eager's vectorized loop).
absl::StatusOr<int> HardtanhBackward(ExprBuilder& b, const ir::Node& node,
                                     const std::vector<int>& operands, Types types) {
  Element e(b, types.compute);
  const int grad = operands[0], self = operands[1];
  const int low = e.Constant(ComputeScalar(node, "min_val", types));
  const int high = e.Constant(ComputeScalar(node, "max_val", types));
  return e.Select(e.And(e.Greater(self, low), e.Less(self, high)), grad, e.Constant(0));
}

// hardswish_backward(grad, self) = self <= -3 ? 0 : self >= 3 ? grad :
// grad * (self / 3 + 0.5). A NaN self gives NaN (eager's vectorized loop;
// its scalar loop gives grad).
absl::StatusOr<int> HardswishBackward(ExprBuilder& b, const ir::Node&,
                                      const std::vector<int>& operands, Types types) {
  Element e(b, types.compute);
  const int grad = operands[0], self = operands[1];
  const int inside = e.Mul(grad, e.Add(e.Div(self, e.Constant(3)), e.Constant(0.5)));
  return e.Select(e.LessEqual(self, e.Constant(-3)), e.Constant(0),
                  e.Select(e.GreaterEqual(self, e.Constant(3)), grad, inside));
}

// hardsigmoid_backward(grad, self) = -3 < self < 3 ? grad * (1.0f / 6.0f) : 0.
absl::StatusOr<int> HardsigmoidBackward(ExprBuilder& b, const ir::Node&,
                                        const std::vector<int>& operands, Types types) {
  Element e(b, types.compute);
  const int grad = operands[0], self = operands[1];
  const int inside = e.And(e.Greater(self, e.Constant(-3)), e.Less(self, e.Constant(3)));
  return e.Select(inside, e.Mul(grad, e.Constant(1.0f / 6.0f)), e.Constant(0));
}

// leaky_relu_backward(grad, self) = self > 0 ? grad : grad * negative_slope.
// self_is_result (an in-place leaky_relu_) is the same formula, which eager
// refuses for a negative slope (the result's sign no longer tells self's).
absl::StatusOr<int> LeakyReluBackward(ExprBuilder& b, const ir::Node& node,
                                      const std::vector<int>& operands, Types types) {
  const double slope = ScalarArgAsDouble(node, "negative_slope");
  if (std::get<bool>(node.args.at("self_is_result")) && slope < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("self_is_result with negative_slope ", slope,
                     " (an in-place leaky_relu_ with a negative slope) cannot be differentiated "
                     "(neither can eager PyTorch): use the out-of-place leaky_relu"));
  }
  Element e(b, types.compute);
  const int grad = operands[0], self = operands[1];
  return e.Select(e.Greater(self, e.Constant(0)), grad,
                  e.Scale(grad, ComputeScalar(node, "negative_slope", types)));
}

// elu_backward(grad, self_or_result): grad * scale where self_or_result > 0;
// elsewhere grad * input_scale * (result + alpha * scale) when it is elu's
// result (is_result: an in-place elu_), else grad * input_scale * alpha *
// scale * exp(self * input_scale). A NaN gives NaN (eager's vectorized
// loop; its scalar loop gives grad * scale).
absl::StatusOr<int> EluBackward(ExprBuilder& b, const ir::Node& node,
                                const std::vector<int>& operands, Types types) {
  const bool is_result = std::get<bool>(node.args.at("is_result"));
  if (is_result && ScalarArgAsDouble(node, "alpha") < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("is_result with alpha ", ScalarArgAsDouble(node, "alpha"),
                     " (an in-place elu_ with a negative alpha) cannot be differentiated "
                     "(neither can eager PyTorch): use the out-of-place elu"));
  }
  Element e(b, types.compute);
  const int grad = operands[0], value = operands[1];
  const EluCoefficients c = Coefficients(node, types);
  const int scaled_grad = e.Scale(grad, c.input);
  const int negative =
      is_result ? e.Mul(scaled_grad, e.Add(value, e.Constant(c.negative)))
                : e.Mul(e.Scale(scaled_grad, c.negative), e.Exp(e.Scale(value, c.input)));
  return e.Select(e.Greater(value, e.Constant(0)), e.Scale(grad, c.positive), negative);
}

ArgSpec ScalarArg(const std::string& name) { return {name, ArgKind::kScalar, std::nullopt}; }
ArgSpec ScalarArg(const std::string& name, ir::ArgValue default_value) {
  return {name, ArgKind::kScalar, std::move(default_value)};
}

}  // namespace

void RegisterActivationOps(OpTable& table) {
  // Eager has no integer kernels for these but hardtanh (clamp), nor bool
  // ones at all.
  auto add = [&table](const std::string& op, int inputs, std::vector<ArgSpec> args, Body body) {
    AddPointwise(table, {op, inputs, inputs, std::move(args), Result::kFloating, "",
                         std::move(body), kFloatTypes, kIntegral});
  };
  AddPointwise(
      table, {"aten.hardtanh.default",
              1,
              1,
              {ScalarArg("min_val", int64_t{-1}), ScalarArg("max_val", int64_t{1})},
              Result::kPromoted,
              "",
              Hardtanh,
              {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt64},
              {DType::kBool}});
  add("aten.hardswish.default", 1, {}, Hardswish);
  add("aten.hardsigmoid.default", 1, {}, Hardsigmoid);
  add("aten.leaky_relu.default", 1, {ScalarArg("negative_slope", 0.01)}, LeakyRelu);
  add("aten.elu.default", 1,
      {ScalarArg("alpha", int64_t{1}), ScalarArg("scale", int64_t{1}),
       ScalarArg("input_scale", int64_t{1})},
      Elu);
  add("aten.hardshrink.default", 1, {ScalarArg("lambd", 0.5)}, Hardshrink);
  add("aten.softshrink.default", 1, {ScalarArg("lambd", 0.5)}, Softshrink);

  // Backward ops: (grad_output, self) in schema order; elu_backward's tensor
  // inputs are grad_output and self_or_result, its scalars in between.
  add("aten.hardtanh_backward.default", 2, {ScalarArg("min_val"), ScalarArg("max_val")},
      HardtanhBackward);
  add("aten.hardswish_backward.default", 2, {}, HardswishBackward);
  add("aten.hardsigmoid_backward.default", 2, {}, HardsigmoidBackward);
  add("aten.leaky_relu_backward.default", 2,
      {ScalarArg("negative_slope"), {"self_is_result", ArgKind::kBool, std::nullopt}},
      LeakyReluBackward);
  add("aten.elu_backward.default", 2,
      {ScalarArg("alpha"),
       ScalarArg("scale"),
       ScalarArg("input_scale"),
       {"is_result", ArgKind::kBool, std::nullopt}},
      EluBackward);
}

}  // namespace kiln::ops
