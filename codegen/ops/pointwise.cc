// Pointwise ops: one element of the result from the same element of each
// (broadcast) operand. Every entry is a Spec: its schema, its result dtype,
// and the expression that computes one element; the emitter's function
// table (emit/functions.cc) says how each named function is computed.
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// The element of a pointwise op, given its operands (tensor loads in tensor
// order, then a scalar `other` if the node has one) in `compute`.
using Body = std::function<absl::StatusOr<int>(ExprBuilder&, const ir::Node&,
                                               const std::vector<int>& operands, DType compute)>;

enum class Result {
  kPromoted,  // the promoted type of the operands (add, mul, where)
  kFloating,  // promoted, then integers become float32 (exp, div)
  kBool,      // comparisons and logical ops
};

struct Spec {
  std::string op;
  int min_inputs = 1;
  int max_inputs = 1;
  std::vector<ArgSpec> args;
  Result result = Result::kPromoted;
  // Name of a scalar argument standing in for the last tensor operand when
  // the node has fewer inputs ("other" for add(t, 1.0)); empty if none.
  std::string scalar_operand;
  Body body;
  std::vector<DType> dtypes = kAllTypes;
};

bool HasScalar(const Spec& spec, const ir::Node& node) {
  if (spec.scalar_operand.empty()) return false;
  auto it = node.args.find(spec.scalar_operand);
  return it != node.args.end() && !std::holds_alternative<ir::None>(it->second);
}

absl::StatusOr<DType> OperandType(const Spec& spec, const ir::Node& node, const InputTypes& inputs) {
  // where(cond, a, b) promotes a and b only; cond is bool.
  const size_t first = spec.op.rfind("aten.where.", 0) == 0 ? 1 : 0;
  if (first >= inputs.size()) return DType::kFloat32;
  DType type = inputs[first]->dtype;
  for (size_t i = first + 1; i < inputs.size(); ++i) type = PromoteTensors(type, inputs[i]->dtype);
  if (HasScalar(spec, node)) type = PromoteWithScalar(type, node.args.at(spec.scalar_operand));
  if (spec.result == Result::kFloating) type = ToFloating(type);
  return type;
}

void AddPointwise(OpTable& table, Spec spec) {
  OpDef def;
  def.name = spec.op;
  def.family = "pointwise";
  def.dtypes = spec.dtypes;
  def.min_inputs = spec.min_inputs;
  def.max_inputs = spec.max_inputs;
  def.args = spec.args;
  def.infer = [spec](const ir::Node& node,
                     const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const bool scalar = HasScalar(spec, node);
    if (!spec.scalar_operand.empty() &&
        static_cast<int>(inputs.size()) + (scalar ? 1 : 0) != spec.max_inputs) {
      return absl::InvalidArgumentError(absl::StrCat(
          "needs ", spec.max_inputs, " operands: tensor inputs, or a scalar '",
          spec.scalar_operand, "' for the last one"));
    }
    std::vector<ir::Dim> sizes;
    for (size_t i = 0; i < inputs.size(); ++i) {
      RETURN_IF_ERROR(RequireStatic(*inputs[i], absl::StrCat("input ", i)));
      ASSIGN_OR_RETURN(sizes, BroadcastShapes(sizes, inputs[i]->sizes));
    }
    ASSIGN_OR_RETURN(DType type, OperandType(spec, node, inputs));
    if (spec.result == Result::kBool) type = DType::kBool;
    return std::vector<ir::TensorType>{ContiguousType(type, std::move(sizes))};
  };
  def.lower = [spec](const ir::Graph& graph,
                     const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const ir::TensorType& result = graph.values[node.outputs[0]];
    const int rank = static_cast<int>(result.rank());
    InputTypes inputs;
    for (int input : node.inputs) inputs.push_back(&graph.values[input]);
    ASSIGN_OR_RETURN(const DType operand_type, OperandType(spec, node, inputs));
    const DType compute = ComputeType(operand_type);
    ExprBuilder builder;
    std::vector<int> operands;
    const bool where = spec.op.rfind("aten.where.", 0) == 0;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const DType dtype = where && i == 0 ? DType::kBool : compute;
      operands.push_back(builder.Load(graph, node.inputs[i], rank, dtype));
    }
    if (HasScalar(spec, node)) {
      operands.push_back(builder.Constant(ScalarArgAsDouble(node, spec.scalar_operand), compute));
    }
    ASSIGN_OR_RETURN(int root, spec.body(builder, node, operands, compute));
    root = builder.Cast(root, ComputeType(result.dtype));
    return std::vector<ir::Definition>{builder.Finish(root)};
  };
  table.Add(std::move(def));
}

// A body that applies one function of the emitter's table to the operands.
Body Apply(const std::string& function) {
  return [function](ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                    DType compute) -> absl::StatusOr<int> {
    return b.Call(function, operands, compute);
  };
}

// Comparisons compute in the operands' type and yield bool.
Body Compare(const std::string& function) {
  return [function](ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                    DType) -> absl::StatusOr<int> {
    return b.Call(function, operands, DType::kBool);
  };
}

// self op alpha * other (add, sub), alpha applied only when it is not 1.
Body WithAlpha(const std::string& function) {
  return [function](ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                    DType compute) -> absl::StatusOr<int> {
    int other = operands[1];
    const double alpha = ScalarArgAsDouble(node, "alpha");
    if (alpha != 1.0) other = b.Call("mul", {other, b.Constant(alpha, compute)}, compute);
    return b.Call(function, {operands[0], other}, compute);
  };
}

// pow with a scalar exponent: the special cases eager computes exactly.
absl::StatusOr<int> PowScalar(ExprBuilder& b, const ir::Node& node,
                              const std::vector<int>& operands, DType compute) {
  const double exponent = ScalarArgAsDouble(node, "exponent");
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

const ArgSpec kAlpha{"alpha", ArgKind::kScalar, ir::ArgValue(int64_t{1})};
const ArgSpec kOther{"other", ArgKind::kScalar, ir::ArgValue(ir::None{})};

}  // namespace

void RegisterPointwiseOps(OpTable& table) {
  // Arithmetic: `other` is a second tensor or a scalar argument.
  for (const char* overload : {"Tensor", "Scalar"}) {
    const std::string suffix = overload;
    AddPointwise(table, {"aten.add." + suffix, 1, 2, {kOther, kAlpha}, Result::kPromoted, "other",
                         WithAlpha("add")});
    AddPointwise(table, {"aten.sub." + suffix, 1, 2, {kOther, kAlpha}, Result::kPromoted, "other",
                         WithAlpha("sub")});
    AddPointwise(table,
                 {"aten.mul." + suffix, 1, 2, {kOther}, Result::kPromoted, "other", Apply("mul")});
    AddPointwise(table,
                 {"aten.div." + suffix, 1, 2, {kOther}, Result::kFloating, "other", Apply("div")});
    for (const char* compare : {"eq", "ne", "lt", "le", "gt", "ge"}) {
      AddPointwise(table, {absl::StrCat("aten.", compare, ".", suffix), 1, 2, {kOther},
                           Result::kBool, "other", Compare(compare)});
    }
  }
  // rsub(self, other, alpha) = other - alpha * self.
  AddPointwise(table, {"aten.rsub.Scalar", 1, 2, {kOther, kAlpha}, Result::kPromoted, "other",
                       [](ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                          DType compute) -> absl::StatusOr<int> {
                         return WithAlpha("sub")(b, node, {operands[1], operands[0]}, compute);
                       }});
  AddPointwise(table, {"aten.maximum.default", 2, 2, {}, Result::kPromoted, "", Apply("maximum")});
  AddPointwise(table, {"aten.minimum.default", 2, 2, {}, Result::kPromoted, "", Apply("minimum")});
  AddPointwise(table, {"aten.pow.Tensor_Tensor", 2, 2, {}, Result::kPromoted, "", Apply("pow"),
                       kFloatTypes});
  AddPointwise(table, {"aten.pow.Tensor_Scalar", 1, 1,
                       {{"exponent", ArgKind::kScalar, std::nullopt}}, Result::kPromoted, "",
                       PowScalar, kFloatTypes});
  for (const char* logical : {"logical_and", "logical_or", "logical_xor"}) {
    AddPointwise(table, {absl::StrCat("aten.", logical, ".default"), 2, 2, {}, Result::kBool, "",
                         Compare(logical)});
  }
  AddPointwise(table, {"aten.logical_not.default", 1, 1, {}, Result::kBool, "",
                       Compare("logical_not")});

  // Unary, same type in and out.
  for (const char* function : {"neg", "abs", "relu"}) {
    AddPointwise(table, {absl::StrCat("aten.", function, ".default"), 1, 1, {}, Result::kPromoted,
                         "", Apply(function)});
  }
  for (const char* function : {"floor", "ceil", "round", "trunc"}) {
    AddPointwise(table, {absl::StrCat("aten.", function, ".default"), 1, 1, {}, Result::kPromoted,
                         "", Apply(function), kFloatTypes});
  }
  // Unary, floating results (integers compute in float32).
  for (const char* function : {"exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "reciprocal",
                               "tanh", "erf", "sigmoid", "sin", "cos", "silu"}) {
    AddPointwise(table, {absl::StrCat("aten.", function, ".default"), 1, 1, {}, Result::kFloating,
                         "", Apply(function), kFloatTypes});
  }
  AddPointwise(table,
               {"aten.gelu.default", 1, 1, {{"approximate", ArgKind::kString, ir::ArgValue(std::string("none"))}},
                Result::kFloating, "",
                [](ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                   DType compute) -> absl::StatusOr<int> {
                  const std::string approximate = std::get<std::string>(node.args.at("approximate"));
                  if (approximate != "none" && approximate != "tanh") {
                    return absl::InvalidArgumentError(
                        absl::StrCat("approximate='", approximate, "' is not 'none' or 'tanh'"));
                  }
                  return b.Call(approximate == "none" ? "gelu" : "gelu_tanh", operands, compute);
                },
                kFloatTypes});

  // Selection.
  AddPointwise(table, {"aten.where.self", 3, 3, {}, Result::kPromoted, "", Apply("where")});
  AddPointwise(table, {"aten.masked_fill.Scalar", 2, 2, {{"value", ArgKind::kScalar, std::nullopt}},
                       Result::kPromoted, "",
                       [](ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                          DType compute) -> absl::StatusOr<int> {
                         const int mask = b.Cast(operands[1], DType::kBool);
                         const int value = b.Constant(ScalarArgAsDouble(node, "value"), compute);
                         return b.Call("where", {mask, value, operands[0]}, compute);
                       }});
  auto clamp = [](ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                  DType compute) -> absl::StatusOr<int> {
    int x = operands[0];
    for (const char* bound : {"min", "max"}) {
      auto it = node.args.find(bound);
      if (it == node.args.end() || std::holds_alternative<ir::None>(it->second)) continue;
      const int limit = b.Constant(ScalarArgAsDouble(node, bound), compute);
      x = b.Call(std::string("clamp_") + bound, {x, limit}, compute);
    }
    return x;
  };
  AddPointwise(table, {"aten.clamp.default", 1, 1,
                       {{"min", ArgKind::kScalar, ir::ArgValue(ir::None{})},
                        {"max", ArgKind::kScalar, ir::ArgValue(ir::None{})}},
                       Result::kPromoted, "", clamp});
  AddPointwise(table, {"aten.clamp_min.default", 1, 1, {{"min", ArgKind::kScalar, std::nullopt}},
                       Result::kPromoted, "", clamp});
  AddPointwise(table, {"aten.clamp_max.default", 1, 1, {{"max", ArgKind::kScalar, std::nullopt}},
                       Result::kPromoted, "", clamp});

  // Backward ops that are pointwise.
  AddPointwise(table, {"aten.threshold_backward.default", 2, 2,
                       {{"threshold", ArgKind::kScalar, std::nullopt}}, Result::kPromoted, "",
                       [](ExprBuilder& b, const ir::Node& node, const std::vector<int>& operands,
                          DType compute) -> absl::StatusOr<int> {
                         // self <= threshold ? 0 : grad (a NaN self keeps grad).
                         const int threshold = b.Constant(ScalarArgAsDouble(node, "threshold"), compute);
                         const int drop = b.Call("le", {operands[1], threshold}, DType::kBool);
                         return b.Call("where", {drop, b.Constant(0, compute), operands[0]}, compute);
                       }});
}

}  // namespace kiln::ops
