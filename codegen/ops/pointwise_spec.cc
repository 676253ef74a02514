// AddPointwise: a pointwise Spec (pointwise.h) as an op-table entry: its type rule, dtype
// checks and operand loads.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

bool Contains(const std::vector<DType>& dtypes, DType dtype) {
  return std::find(dtypes.begin(), dtypes.end(), dtype) != dtypes.end();
}

bool HasScalar(const Spec& spec, const ir::Node& node) {
  return !spec.scalar_operand.empty() && Present(node, spec.scalar_operand);
}

// Inputs that are masks (where's condition, masked_fill's mask): bool, and
// outside promotion.
bool IsMask(const Spec& spec, size_t input) {
  if (spec.op.rfind("aten.where.", 0) == 0) return input == 0;
  if (spec.op.rfind("aten.masked_fill.", 0) == 0) return input == 1;
  return false;
}

absl::StatusOr<DType> OperandType(const Spec& spec, const ir::Node& node,
                                  const InputTypes& inputs) {
  InputTypes operands;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!IsMask(spec, i)) operands.push_back(inputs[i]);
  }
  if (operands.empty()) return absl::InternalError("a pointwise op without operands");
  if (spec.result == Result::kFirst) return operands[0]->dtype;
  DType type = PromoteOperands(operands);
  if (HasScalar(spec, node)) type = PromoteWithScalar(type, node.args.at(spec.scalar_operand));
  for (const std::string& name : spec.promoting_scalars) {
    if (Present(node, name)) type = PromoteWithScalar(type, node.args.at(name));
  }
  if (spec.result == Result::kFloating) type = ToFloating(type);
  return type;
}

// Every operand dtype must be one the op computes.
absl::Status CheckOperandTypes(const Spec& spec, const ir::Node& node, const InputTypes& inputs) {
  std::vector<DType> dtypes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!IsMask(spec, i)) dtypes.push_back(inputs[i]->dtype);
  }
  if (HasScalar(spec, node) && std::holds_alternative<bool>(node.args.at(spec.scalar_operand))) {
    dtypes.push_back(DType::kBool);
  }
  for (DType dtype : dtypes) {
    if (Contains(spec.refused, dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("does not take ", ir::DTypeName(dtype),
                                                     " operands (neither does eager PyTorch)"));
    }
    if (!Contains(spec.dtypes, dtype)) {
      return absl::UnimplementedError(
          absl::StrCat(ir::DTypeName(dtype), " operands are not supported yet"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// The emitter's function that rounds a float32 value to `dtype` (16-bit).
std::string RoundingFunction(DType dtype) {
  return dtype == DType::kBFloat16 ? "round_to_bfloat16" : "round_to_float16";
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
      return absl::InvalidArgumentError(absl::StrCat("needs ", spec.max_inputs,
                                                     " operands: tensor inputs, or a scalar '",
                                                     spec.scalar_operand, "' for the last one"));
    }
    std::vector<ir::Dim> sizes;
    for (size_t i = 0; i < inputs.size(); ++i) {
      ASSIGN_OR_RETURN(sizes, BroadcastShapes(sizes, inputs[i]->sizes));
    }
    RETURN_IF_ERROR(CheckOperandTypes(spec, node, inputs));
    ASSIGN_OR_RETURN(DType type, OperandType(spec, node, inputs));
    // The body over stand-in operands, so that an argument it refuses
    // (gelu's approximate, div's rounding_mode) is named here, when the
    // graph is checked, not when it is lowered. An empty result computes
    // nothing, as eager (an integer division of no elements by zero).
    if (!HasNoElements(sizes)) {
      ExprBuilder scratch;
      const Types types{type, ComputeType(type)};
      std::vector<int> operands;
      for (size_t i = 0; i < inputs.size() + (scalar ? 1 : 0); ++i) {
        operands.push_back(scratch.Constant(0, IsMask(spec, i) ? DType::kBool : types.compute));
      }
      RETURN_IF_ERROR(spec.body(scratch, node, operands, types).status());
    }
    if (spec.result == Result::kBool) type = DType::kBool;
    return std::vector<ir::TensorType>{ContiguousType(type, std::move(sizes))};
  };
  def.lower = [spec](const ir::Graph& graph,
                     const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const ir::TensorType& result = graph.values[node.outputs[0]];
    if (HasNoElements(result.sizes)) {
      ExprBuilder empty;
      return std::vector<ir::Definition>{
          empty.Finish(empty.Constant(0, ComputeType(result.dtype)))};
    }
    const int rank = static_cast<int>(result.rank());
    InputTypes inputs;
    for (int input : node.inputs) inputs.push_back(&graph.values[input]);
    ASSIGN_OR_RETURN(const DType operand_type, OperandType(spec, node, inputs));
    const Types types{operand_type, ComputeType(operand_type)};
    ExprBuilder builder;
    std::vector<int> operands;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (IsMask(spec, i)) {
        operands.push_back(builder.Load(graph, node.inputs[i], rank, DType::kBool));
        continue;
      }
      int operand = builder.Load(graph, node.inputs[i], rank, types.compute);
      // Eager converts every operand to the common dtype before computing:
      // an int64 or a float32 0-dim operand of a bfloat16 op is rounded to
      // bfloat16 first.
      if (inputs[i]->dtype != types.operand && types.operand != types.compute) {
        operand = builder.Call(RoundingFunction(types.operand), {operand}, types.compute);
      }
      operands.push_back(operand);
    }
    if (HasScalar(spec, node)) {
      const ir::ArgValue& scalar = node.args.at(spec.scalar_operand);
      if (const auto* size = std::get_if<ir::SymExpr>(&scalar)) {  // whole: exact below 2^24
        operands.push_back(builder.Size(size->Canonicalized(), types.compute));
      } else {
        const double value = ScalarArgAsDouble(node, spec.scalar_operand);
        operands.push_back(builder.Constant(RoundScalar(value, types.operand), types.compute));
      }
    }
    ASSIGN_OR_RETURN(int root, spec.body(builder, node, operands, types));
    root = builder.Cast(root, ComputeType(result.dtype));
    return std::vector<ir::Definition>{builder.Finish(root)};
  };
  table.Add(std::move(def));
}

int ScalarConstant(ExprBuilder& b, const ir::Node& node, const std::string& name, Types types) {
  return b.Constant(RoundScalar(ScalarArgAsDouble(node, name), types.operand), types.compute);
}

}  // namespace kiln::ops
