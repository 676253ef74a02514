// Pointwise ops: one element of the result from the same element of each
// (broadcast) operand. Each entry names a function of the emitter's table
// (emit/functions.cc), which says how that function is computed.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

const std::vector<DType> kFloatTypes = {DType::kFloat32, DType::kFloat64};

// Storage dtypes compute in themselves, except 16-bit floats (float32).
DType ComputeType(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 ? DType::kFloat32 : dtype;
}

int FloatRank(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16: return 1;
    case DType::kFloat32: return 2;
    case DType::kFloat64: return 3;
    default: return 0;
  }
}

// PyTorch's promotion for two tensors of the same category or across them.
DType PromoteTensors(DType a, DType b) {
  if (a == b) return a;
  const int fa = FloatRank(a), fb = FloatRank(b);
  if (fa == 1 && fb == 1) return DType::kFloat32;  // float16 with bfloat16
  if (fa != fb) return fa > fb ? a : b;
  auto int_rank = [](DType t) { return t == DType::kInt64 ? 3 : t == DType::kInt32 ? 2 : 1; };
  return int_rank(a) >= int_rank(b) ? a : b;
}

// A Python scalar only changes the category: float scalar + int tensor is
// float32 (the default dtype); int scalar + bool tensor is int64.
DType PromoteWithScalar(DType tensor, const ir::ArgValue& scalar) {
  if (std::holds_alternative<double>(scalar) && !ir::IsFloatingPoint(tensor)) {
    return DType::kFloat32;
  }
  if (std::holds_alternative<int64_t>(scalar) && tensor == DType::kBool) return DType::kInt64;
  return tensor;
}

absl::StatusOr<std::vector<ir::Dim>> BroadcastShapes(const std::vector<ir::Dim>& a,
                                                     const std::vector<ir::Dim>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<ir::Dim> result(rank);
  for (size_t d = 0; d < rank; ++d) {
    const ir::Dim one = ir::Dim::Constant(1);
    const ir::Dim da = d + a.size() >= rank ? a[d + a.size() - rank] : one;
    const ir::Dim db = d + b.size() >= rank ? b[d + b.size() - rank] : one;
    if (da == db || db == one) {
      result[d] = da;
    } else if (da == one) {
      result[d] = db;
    } else {
      auto dims = [](const std::vector<ir::Dim>& dims) {
        return absl::StrJoin(dims, ", ", [](std::string* out, const ir::Dim& dim) {
          absl::StrAppend(out, dim.is_symbolic() ? "s" : "", dim.is_symbolic() ? dim.symbol : dim.constant);
        });
      };
      return absl::InvalidArgumentError(absl::StrCat("shapes [", dims(a), "] and [", dims(b),
                                                     "] cannot be broadcast together (dim ", d, ")"));
    }
  }
  return result;
}

ir::TensorType ContiguousType(DType dtype, std::vector<ir::Dim> sizes) {
  ir::TensorType type;
  type.dtype = dtype;
  type.strides = ir::ContiguousStrides(sizes);
  type.sizes = std::move(sizes);
  return type;
}

absl::Status RequireFloat(const ir::TensorType& type, absl::string_view what) {
  if (type.dtype != DType::kFloat32 && type.dtype != DType::kFloat64) {
    return absl::UnimplementedError(absl::StrCat(what, " has dtype ", ir::DTypeName(type.dtype),
                                                 "; only float32 and float64 are supported yet"));
  }
  return absl::OkStatus();
}

// Appends a load of `value` broadcast to `rank` and returns its index.
int AddLoad(ir::Definition& definition, const ir::Graph& graph, int value, int rank, DType compute) {
  ir::Expr load;
  load.kind = ir::Expr::Kind::kLoad;
  load.dtype = compute;
  load.value = value;
  load.index = ir::AffineMap::Broadcast(graph.values[value].sizes, rank);
  definition.exprs.push_back(std::move(load));
  return static_cast<int>(definition.exprs.size()) - 1;
}

int AddConstant(ir::Definition& definition, double constant, DType compute) {
  ir::Expr expr;
  expr.kind = ir::Expr::Kind::kConstant;
  expr.dtype = compute;
  expr.constant = constant;
  definition.exprs.push_back(std::move(expr));
  return static_cast<int>(definition.exprs.size()) - 1;
}

int AddCall(ir::Definition& definition, const std::string& function, std::vector<int> operands,
            DType compute) {
  ir::Expr expr;
  expr.kind = ir::Expr::Kind::kCall;
  expr.dtype = compute;
  expr.function = function;
  expr.operands = std::move(operands);
  definition.exprs.push_back(std::move(expr));
  return static_cast<int>(definition.exprs.size()) - 1;
}

// add/sub/mul/div: `other` is a second tensor input, or a scalar argument.
void AddBinary(OpTable& table, const std::string& op, const std::string& function,
               bool has_alpha) {
  OpDef def;
  def.name = op;
  def.family = "pointwise";
  def.dtypes = kFloatTypes;
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.args = {{"other", ArgKind::kScalar, ir::ArgValue(ir::None{})}};
  if (has_alpha) def.args.push_back({"alpha", ArgKind::kScalar, ir::ArgValue(int64_t{1})});
  const bool true_divide = function == "div";
  def.infer = [true_divide](const ir::Node& node,
                            const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const bool scalar_other = std::holds_alternative<ir::None>(Arg(node, "other")) == false;
    if (inputs.size() == 2 && scalar_other) {
      return absl::InvalidArgumentError("has both a tensor and a scalar 'other'");
    }
    if (inputs.size() == 1 && !scalar_other) {
      return absl::InvalidArgumentError("needs a second tensor input or a scalar 'other'");
    }
    RETURN_IF_ERROR(RequireFloat(*inputs[0], "input 0"));
    DType dtype;
    std::vector<ir::Dim> sizes = inputs[0]->sizes;
    if (inputs.size() == 2) {
      RETURN_IF_ERROR(RequireFloat(*inputs[1], "input 1"));
      dtype = PromoteTensors(inputs[0]->dtype, inputs[1]->dtype);
      ASSIGN_OR_RETURN(sizes, BroadcastShapes(inputs[0]->sizes, inputs[1]->sizes));
    } else {
      dtype = PromoteWithScalar(inputs[0]->dtype, Arg(node, "other"));
    }
    if (true_divide && !ir::IsFloatingPoint(dtype)) dtype = DType::kFloat32;
    return std::vector<ir::TensorType>{ContiguousType(dtype, std::move(sizes))};
  };
  def.lower = [function, has_alpha](const ir::Graph& graph,
                                    const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const ir::TensorType& result = graph.values[node.outputs[0]];
    const int rank = static_cast<int>(result.rank());
    const DType compute = ComputeType(result.dtype);
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kPointwise;
    const int lhs = AddLoad(definition, graph, node.inputs[0], rank, compute);
    int rhs = node.inputs.size() == 2
                  ? AddLoad(definition, graph, node.inputs[1], rank, compute)
                  : AddConstant(definition, ScalarArgAsDouble(node, "other"), compute);
    if (has_alpha) {
      const double alpha = ScalarArgAsDouble(node, "alpha");
      if (alpha != 1.0) {
        rhs = AddCall(definition, "mul", {rhs, AddConstant(definition, alpha, compute)}, compute);
      }
    }
    definition.root = AddCall(definition, function, {lhs, rhs}, compute);
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

void AddUnary(OpTable& table, const std::string& op, const std::string& function) {
  OpDef def;
  def.name = op;
  def.family = "pointwise";
  def.dtypes = kFloatTypes;
  def.infer = [](const ir::Node&,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    RETURN_IF_ERROR(RequireFloat(*inputs[0], "input 0"));
    return std::vector<ir::TensorType>{ContiguousType(inputs[0]->dtype, inputs[0]->sizes)};
  };
  def.lower = [function](const ir::Graph& graph,
                         const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const ir::TensorType& result = graph.values[node.outputs[0]];
    const DType compute = ComputeType(result.dtype);
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kPointwise;
    const int operand = AddLoad(definition, graph, node.inputs[0], result.rank(), compute);
    definition.root = AddCall(definition, function, {operand}, compute);
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

}  // namespace

void RegisterPointwiseOps(OpTable& table) {
  AddBinary(table, "aten.add.Tensor", "add", /*has_alpha=*/true);
  AddBinary(table, "aten.sub.Tensor", "sub", /*has_alpha=*/true);
  AddBinary(table, "aten.mul.Tensor", "mul", /*has_alpha=*/false);
  AddBinary(table, "aten.div.Tensor", "div", /*has_alpha=*/false);
  AddUnary(table, "aten.relu.default", "relu");
}

}  // namespace kiln::ops
