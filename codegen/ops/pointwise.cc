// Pointwise ops: one element of the result from the same element of each
// (broadcast) operand, never from its position (passes rely on this:
// transpose_linear.h). Every entry is a Spec (pointwise.h); the clamp-style
// activations and their backward ops are in activations.cc.
#include "codegen/ops/pointwise.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// A body that applies one function of the emitter's table to the operands.
Body Apply(const std::string& function) {
  return [function](ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                    Types types) -> absl::StatusOr<int> {
    return b.Call(function, operands, types.compute);
  };
}

// floor, ceil, round, trunc: the identity on integers.
Body Rounding(const std::string& function) {
  return [function](ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                    Types types) -> absl::StatusOr<int> {
    if (!ir::IsFloatingPoint(types.compute)) return operands[0];
    return b.Call(function, operands, types.compute);
  };
}

// Comparisons compute in the operands' type and yield bool.
Body Compare(const std::string& function) {
  return
      [function](ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                 Types) -> absl::StatusOr<int> { return b.Call(function, operands, DType::kBool); };
}

// self op alpha * other (add, sub), alpha applied only when it is not 1.
Body WithAlpha(const std::string& function) {
  return [function](ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                    Types types) -> absl::StatusOr<int> {
    int other = operands[1];
    if (ScalarArgAsDouble(node, "alpha") != 1.0) {
      other = b.Call("mul", {other, ScalarConstant(b, node, "alpha", types)}, types.compute);
    }
    return b.Call(function, {operands[0], other}, types.compute);
  };
}

// pow with a scalar exponent: the special cases eager computes exactly.
absl::StatusOr<int> PowScalar(ExprBuilder& b, const ir::Node& node,
                              const std::vector<int>& operands, Types types) {
  const double exponent = RoundScalar(ScalarArgAsDouble(node, "exponent"), types.operand);
  const DType compute = types.compute;
  const int x = operands[0];
  if (exponent == 1) return x;
  if (exponent == 2) return b.Call("square", {x}, compute);
  if (exponent == 3) return b.Call("cube", {x}, compute);
  if (exponent == 0.5) return b.Call("sqrt", {x}, compute);
  if (exponent == -0.5) return b.Call("rsqrt", {x}, compute);
  if (exponent == -1) return b.Call("reciprocal", {x}, compute);
  if (exponent == -2) return b.Call("reciprocal", {b.Call("square", {x}, compute)}, compute);
  if (exponent == 0) return b.Constant(1, compute);
  return b.Call("pow", {x, b.Constant(exponent, compute)}, compute);
}

// clamp, clamp_min, clamp_max: whichever bounds the node has. A NaN bound
// makes every result NaN, as eager.
absl::StatusOr<int> Clamp(ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                          Types types) {
  int x = operands[0];
  for (const char* bound : {"min", "max"}) {
    if (!Present(node, bound)) continue;
    if (std::isnan(ScalarArgAsDouble(node, bound))) return b.Constant(NAN, types.compute);
    int limit = ScalarConstant(b, node, bound, types);
    const DType t = types.compute;
    if (t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kInt32) {
      // Eager compares with the bound as given: one outside the dtype's
      // range saturates to it (clamp(uint8, -1) is the identity), where a
      // converted Python int would wrap.
      const int bits = 8 * static_cast<int>(ir::DTypeSize(t));
      const double lowest = t == DType::kUInt8 ? 0 : -std::ldexp(1.0, bits - 1);
      const double highest =
          t == DType::kUInt8 ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits - 1) - 1;
      limit = b.Constant(std::clamp(ScalarArgAsDouble(node, bound), lowest, highest), t);
    }
    x = b.Call(std::string("clamp_") + bound, {x, limit}, t);
  }
  return x;
}

// d/dx gelu(x) times grad. Exact gelu: cdf + x * pdf with
// cdf = 0.5 (1 + erf(x / sqrt 2)), pdf = exp(-x^2 / 2) / sqrt(2 pi)
// (float32: one function sharing the exp, kiln_gelu_derivative). Tanh
// gelu: the derivative of 0.5 x (1 + tanh(beta (x + kappa x^3))).
int GeluBackward(ExprBuilder& b, bool tanh, int grad, int x, DType t) {
  auto c = [&](double value) { return b.Constant(value, t); };
  auto mul = [&](int l, int r) { return b.Call("mul", {l, r}, t); };
  auto add = [&](int l, int r) { return b.Call("add", {l, r}, t); };
  if (!tanh && t == DType::kFloat32) return mul(grad, b.Call("gelu_derivative", {x}, t));
  const int x_squared = mul(x, x);
  if (!tanh) {
    const int cdf = mul(c(0.5), add(c(1), b.Call("erf_for_gelu", {mul(x, c(M_SQRT1_2))}, t)));
    // -x^2 / 2 is never positive: exp_nonpositive, exp's bits in fewer
    // instructions.
    const int pdf = mul(c(M_2_SQRTPI * M_SQRT1_2 * 0.5),
                        b.Call("exp_nonpositive", {mul(x_squared, c(-0.5))}, t));
    return mul(grad, add(cdf, mul(x, pdf)));
  }
  const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
  const int inner = mul(c(beta), add(x, mul(c(kappa), mul(x, x_squared))));
  const int tanh_inner = b.Call("tanh", {inner}, t);
  const int left = mul(c(0.5), x);
  const int left_derivative = mul(c(0.5), add(c(1), tanh_inner));
  const int tanh_derivative = b.Call("sub", {c(1), mul(tanh_inner, tanh_inner)}, t);
  const int inner_derivative = mul(c(beta), add(c(1), mul(mul(c(3), c(kappa)), x_squared)));
  const int right_derivative = mul(mul(left, tanh_derivative), inner_derivative);
  return mul(grad, add(left_derivative, right_derivative));
}

// sign(x) = (0 < x) - (x < 0): 0 for a NaN and for -0.0; a bool is its own.
absl::StatusOr<int> Sign(ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                         Types types) {
  const DType t = types.compute;
  if (t == DType::kBool) return operands[0];
  const int x = operands[0], zero = b.Constant(0, t);
  const int negative =
      b.Call("where", {b.Call("lt", {x, zero}, DType::kBool), b.Constant(-1, t), zero}, t);
  return b.Call("where", {b.Call("gt", {x, zero}, DType::kBool), b.Constant(1, t), negative}, t);
}

// xlogy(x, y) = y is NaN ? NaN : (x == 0 ? 0 : x * log(y)), as eager.
absl::StatusOr<int> Xlogy(ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                          Types types) {
  const DType t = types.compute;
  const int x = operands[0], y = operands[1];
  const int product = b.Call("mul", {x, b.Call("log", {y}, t)}, t);
  const int zero = b.Constant(0, t);
  const int by_x = b.Call("where", {b.Call("eq", {x, zero}, DType::kBool), zero, product}, t);
  return b.Call("where", {b.Call("ne", {y, y}, DType::kBool), b.Constant(NAN, t), by_x}, t);
}

// lerp(start, end, w) = |w| < 0.5 ? start + w (end - start)
//                                 : end - (end - start) (1 - w),
// exact at both ends; a scalar w in the compute type (eager's opmath).
absl::StatusOr<int> Lerp(ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                         Types types) {
  const DType t = types.compute;
  const int start = operands[0], end = operands[1];
  const int difference = b.Call("sub", {end, start}, t);
  auto near_start = [&](int w) {
    return b.Call("add", {start, b.Call("mul", {w, difference}, t)}, t);
  };
  auto near_end = [&](int w) {
    return b.Call(
        "sub", {end, b.Call("mul", {difference, b.Call("sub", {b.Constant(1, t), w}, t)}, t)}, t);
  };
  if (operands.size() == 2) {
    const double weight = RoundScalar(ScalarArgAsDouble(node, "weight"), t);
    const int w = b.Constant(weight, t);
    return std::abs(weight) < 0.5 ? near_start(w) : near_end(w);
  }
  const int w = operands[2];
  const int small = b.Call("lt", {b.Call("abs", {w}, t), b.Constant(0.5, t)}, DType::kBool);
  return b.Call("where", {small, near_start(w), near_end(w)}, t);
}

// An integer division's divisor: eager raises on a zero one, which a
// kernel cannot, so it must be a nonzero constant (`other` as a number). A
// tensor divisor, or zero, is Unimplemented: the client runs that division
// through torch, which raises as eager does (or divides nothing when the
// dividend is empty).
absl::Status CheckIntegerDivisor(const ir::Node& node, Types types) {
  if (ir::IsFloatingPoint(types.compute)) return absl::OkStatus();
  const auto other = node.args.find("other");
  const int64_t* divisor = node.inputs.size() == 1 && other != node.args.end()
                               ? std::get_if<int64_t>(&other->second)
                               : nullptr;
  if (divisor == nullptr) {
    return absl::UnimplementedError(
        "an integer division by a tensor or a size: eager raises on a zero divisor, which a "
        "kernel cannot; divide by a constant, or in floating point");
  }
  if (*divisor == 0) return absl::UnimplementedError("an integer division by zero");
  return absl::OkStatus();
}

// fmod, remainder and floor_divide: `function`, on integers by a nonzero
// constant only.
Body Divides(const std::string& function) {
  return [function](ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                    Types types) -> absl::StatusOr<int> {
    RETURN_IF_ERROR(CheckIntegerDivisor(node, types));
    return b.Call(function, operands, types.compute);
  };
}

// div with a rounding_mode: None, "trunc" or "floor".
absl::StatusOr<int> DivMode(ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                            Types types) {
  const DType t = types.compute;
  const ir::ArgValue& mode = node.args.at("rounding_mode");
  if (std::holds_alternative<ir::None>(mode)) {
    if (!ir::IsFloatingPoint(t)) {
      return absl::InvalidArgumentError(
          "div with rounding_mode None divides integers into floats: trace torch.div(a, b)");
    }
    return b.Call("div", operands, t);
  }
  RETURN_IF_ERROR(CheckIntegerDivisor(node, types));
  const std::string* name = std::get_if<std::string>(&mode);
  // C's integer division truncates.
  if (name != nullptr && *name == "trunc" && !ir::IsFloatingPoint(t)) {
    return b.Call("div", operands, t);
  }
  if (name != nullptr && *name == "trunc") {
    // Eager truncates the quotient as stored: a 16-bit one rounded first.
    int quotient = b.Call("div", operands, t);
    if (types.operand != t) quotient = b.Call(RoundingFunction(types.operand), {quotient}, t);
    return b.Call("trunc", {quotient}, t);
  }
  if (name != nullptr && *name == "floor") return b.Call("floor_divide", operands, t);
  return absl::InvalidArgumentError("rounding_mode is not None, 'trunc' or 'floor'");
}

const ArgSpec kAlpha{"alpha", ArgKind::kScalar, ir::ArgValue(int64_t{1})};
const ArgSpec kOther{"other", ArgKind::kScalarOrSize, ir::ArgValue(ir::None{})};

}  // namespace

void RegisterPointwiseOps(OpTable& table) {
  // Arithmetic: `other` is a second tensor or a scalar argument.
  for (const char* overload : {"Tensor", "Scalar"}) {
    const std::string suffix = overload;
    AddPointwise(table, {"aten.add." + suffix,
                         1,
                         2,
                         {kOther, kAlpha},
                         Result::kPromoted,
                         "other",
                         WithAlpha("add")});
    AddPointwise(table, {"aten.sub." + suffix,
                         1,
                         2,
                         {kOther, kAlpha},
                         Result::kPromoted,
                         "other",
                         WithAlpha("sub"),
                         kNoBool,
                         {DType::kBool}});
    AddPointwise(table,
                 {"aten.mul." + suffix, 1, 2, {kOther}, Result::kPromoted, "other", Apply("mul")});
    AddPointwise(table,
                 {"aten.div." + suffix, 1, 2, {kOther}, Result::kFloating, "other", Apply("div")});
    for (const char* compare : {"eq", "ne", "lt", "le", "gt", "ge"}) {
      AddPointwise(table, {absl::StrCat("aten.", compare, ".", suffix),
                           1,
                           2,
                           {kOther},
                           Result::kBool,
                           "other",
                           Compare(compare)});
    }
  }
  // rsub(self, other, alpha) = other - alpha * self.
  AddPointwise(table, {"aten.rsub.Scalar",
                       1,
                       2,
                       {kOther, kAlpha},
                       Result::kPromoted,
                       "other",
                       [](ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                          Types types) -> absl::StatusOr<int> {
                         return WithAlpha("sub")(b, node, {operands[1], operands[0]}, types);
                       },
                       kNoBool,
                       {DType::kBool}});
  AddPointwise(table, {"aten.maximum.default", 2, 2, {}, Result::kPromoted, "", Apply("maximum")});
  AddPointwise(table, {"aten.minimum.default", 2, 2, {}, Result::kPromoted, "", Apply("minimum")});
  AddPointwise(
      table,
      {"aten.pow.Tensor_Tensor", 2, 2, {}, Result::kPromoted, "", Apply("pow"), kFloatTypes});
  AddPointwise(table, {"aten.pow.Tensor_Scalar",
                       1,
                       1,
                       {{"exponent", ArgKind::kScalar, std::nullopt}},
                       Result::kPromoted,
                       "",
                       PowScalar,
                       kFloatTypes,
                       {},
                       {"exponent"}});
  for (const char* logical : {"logical_and", "logical_or", "logical_xor"}) {
    AddPointwise(table, {absl::StrCat("aten.", logical, ".default"),
                         2,
                         2,
                         {},
                         Result::kBool,
                         "",
                         Compare(logical)});
  }
  AddPointwise(table,
               {"aten.logical_not.default", 1, 1, {}, Result::kBool, "", Compare("logical_not")});

  AddPointwise(table, {"aten.sign.default", 1, 1, {}, Result::kPromoted, "", Sign});
  AddPointwise(table, {"aten.atan2.default", 2, 2, {}, Result::kFloating, "", Apply("atan2")});
  // C's fmod, Python's modulo and floor division; integers divide by a
  // nonzero constant only (CheckIntegerDivisor), which traces as the
  // argument `other` (fmod.Scalar, floor_divide(x, 2)).
  for (const char* overload : {"Tensor", "Scalar"}) {
    const std::string suffix = overload;
    const std::vector<DType>& dtypes = suffix == "Scalar" ? kNoBool : kFloatTypes;
    AddPointwise(table, {"aten.fmod." + suffix,
                         1,
                         2,
                         {kOther},
                         Result::kPromoted,
                         "other",
                         Divides("fmod"),
                         dtypes});
    AddPointwise(table, {"aten.remainder." + suffix,
                         1,
                         2,
                         {kOther},
                         Result::kPromoted,
                         "other",
                         Divides("remainder"),
                         dtypes});
  }
  AddPointwise(table, {"aten.floor_divide.default",
                       1,
                       2,
                       {kOther},
                       Result::kPromoted,
                       "other",
                       Divides("floor_divide"),
                       kNoBool});
  // div(a, b, rounding_mode): true division (None), trunc(a / b), or floor
  // division.
  AddPointwise(table, {"aten.div.Tensor_mode",
                       1,
                       2,
                       {kOther, {"rounding_mode", ArgKind::kString, ir::ArgValue(ir::None{})}},
                       Result::kPromoted,
                       "other",
                       DivMode,
                       kNoBool});
  for (const char* overload : {"Tensor", "Scalar_Other"}) {
    AddPointwise(
        table,
        {absl::StrCat("aten.xlogy.", overload), 1, 2, {kOther}, Result::kFloating, "other", Xlogy});
  }
  AddPointwise(table, {"aten.lerp.Scalar",
                       2,
                       2,
                       {{"weight", ArgKind::kScalar, std::nullopt}},
                       Result::kPromoted,
                       "",
                       Lerp,
                       kFloatTypes,
                       kIntegral});
  AddPointwise(table,
               {"aten.lerp.Tensor", 3, 3, {}, Result::kPromoted, "", Lerp, kFloatTypes, kIntegral});

  // Unary, same type in and out.
  for (const char* function : {"neg", "abs", "relu"}) {
    AddPointwise(table, {absl::StrCat("aten.", function, ".default"),
                         1,
                         1,
                         {},
                         Result::kPromoted,
                         "",
                         Apply(function),
                         kNoBool,
                         {DType::kBool}});
  }
  for (const char* function : {"floor", "ceil", "round", "trunc"}) {
    AddPointwise(table, {absl::StrCat("aten.", function, ".default"),
                         1,
                         1,
                         {},
                         Result::kPromoted,
                         "",
                         Rounding(function),
                         kNoBool,
                         {DType::kBool}});
  }
  // Unary, floating results (integers and bool compute in float32).
  for (const char* function :
       {"exp",  "expm1",   "log",   "log1p", "sqrt",  "rsqrt", "reciprocal", "tanh",
        "erf",  "sigmoid", "sin",   "cos",   "tan",   "asin",  "acos",       "atan",
        "sinh", "cosh",    "asinh", "acosh", "atanh", "log2",  "log10",      "exp2"}) {
    AddPointwise(table, {absl::StrCat("aten.", function, ".default"),
                         1,
                         1,
                         {},
                         Result::kFloating,
                         "",
                         Apply(function)});
  }
  // softmax's exp(x - max), whose argument is <= 0 but in rows holding a
  // NaN (composites.cc Softmax): kiln_expf_nonpositive, kiln_expf's bits
  // there in fewer instructions.
  AddPointwise(table, {"kiln.exp_nonpositive.default",
                       1,
                       1,
                       {},
                       Result::kFloating,
                       "",
                       Apply("exp_nonpositive"),
                       kFloatTypes});
  AddPointwise(table, {"aten.silu.default",
                       1,
                       1,
                       {},
                       Result::kFloating,
                       "",
                       Apply("silu"),
                       kFloatTypes,
                       kIntegral});
  const ArgSpec approximate{"approximate", ArgKind::kString, ir::ArgValue(std::string("none"))};
  auto gelu_function = [](const ir::Node& node,
                          const std::string& base) -> absl::StatusOr<std::string> {
    const std::string approximate = std::get<std::string>(node.args.at("approximate"));
    if (approximate != "none" && approximate != "tanh") {
      return absl::InvalidArgumentError(
          absl::StrCat("approximate='", approximate, "' is not 'none' or 'tanh'"));
    }
    return approximate == "none" ? base : base + "_tanh";
  };
  AddPointwise(table, {"aten.gelu.default",
                       1,
                       1,
                       {approximate},
                       Result::kFloating,
                       "",
                       [gelu_function](ExprBuilder& b, const ir::Node& node,
                                       const std::vector<int>& operands,
                                       Types types) -> absl::StatusOr<int> {
                         ASSIGN_OR_RETURN(const std::string function, gelu_function(node, "gelu"));
                         return b.Call(function, operands, types.compute);
                       },
                       kFloatTypes,
                       kIntegral});

  // Selection.
  AddPointwise(table, {"aten.where.self", 3, 3, {}, Result::kPromoted, "", Apply("where")});
  AddPointwise(table, {"aten.masked_fill.Scalar",
                       2,
                       2,
                       {{"value", ArgKind::kScalar, std::nullopt}},
                       Result::kPromoted,
                       "",
                       [](ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                          Types types) -> absl::StatusOr<int> {
                         const int value = ScalarConstant(b, node, "value", types);
                         return b.Call("where", {operands[1], value, operands[0]}, types.compute);
                       }});
  // masked_fill.Tensor: the value is a 0-dim tensor, converted to self's
  // dtype (no promotion).
  AddPointwise(table, {"aten.masked_fill.Tensor",
                       3,
                       3,
                       {},
                       Result::kFirst,
                       "",
                       [](ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                          Types types) -> absl::StatusOr<int> {
                         return b.Call("where", {operands[1], operands[2], operands[0]},
                                       types.compute);
                       }});
  const ArgSpec min{"min", ArgKind::kScalar, ir::ArgValue(ir::None{})};
  const ArgSpec max{"max", ArgKind::kScalar, ir::ArgValue(ir::None{})};
  AddPointwise(table, {"aten.clamp.default",
                       1,
                       1,
                       {min, max},
                       Result::kPromoted,
                       "",
                       Clamp,
                       kAllTypes,
                       {},
                       {"min", "max"}});
  AddPointwise(table, {"aten.clamp_min.default",
                       1,
                       1,
                       {{"min", ArgKind::kScalar, std::nullopt}},
                       Result::kPromoted,
                       "",
                       Clamp,
                       kAllTypes,
                       {},
                       {"min"}});
  AddPointwise(table, {"aten.clamp_max.default",
                       1,
                       1,
                       {{"max", ArgKind::kScalar, std::nullopt}},
                       Result::kPromoted,
                       "",
                       Clamp,
                       kAllTypes,
                       {},
                       {"max"}});

  // Backward ops that are pointwise.
  AddPointwise(table, {"aten.threshold_backward.default",
                       2,
                       2,
                       {{"threshold", ArgKind::kScalar, std::nullopt}},
                       Result::kPromoted,
                       "",
                       [](ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                          Types types) -> absl::StatusOr<int> {
                         // self <= threshold ? 0 : grad (a NaN self keeps grad).
                         const int threshold = ScalarConstant(b, node, "threshold", types);
                         const int drop = b.Call("le", {operands[1], threshold}, DType::kBool);
                         return b.Call("where", {drop, b.Constant(0, types.compute), operands[0]},
                                       types.compute);
                       },
                       kNoBool,
                       {DType::kBool}});
  // gelu_backward(grad, self): grad * d/dx gelu(self), in eager's order of
  // operations (GeluKernel.cpp).
  AddPointwise(
      table,
      {"aten.gelu_backward.default",
       2,
       2,
       {approximate},
       Result::kPromoted,
       "",
       [gelu_function](ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                       Types types) -> absl::StatusOr<int> {
         ASSIGN_OR_RETURN(const std::string function, gelu_function(node, "gelu"));
         return GeluBackward(b, function == "gelu_tanh", operands[0], operands[1], types.compute);
       },
       kFloatTypes,
       kIntegral});
}

}  // namespace kiln::ops
