#include "codegen/ops/pointwise_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::ops {

using ir::DType;

const std::vector<DType> kAllTypes = {
    DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt64,
    DType::kBool,    DType::kInt8,    DType::kUInt8,   DType::kInt16,    DType::kInt32};
const std::vector<DType> kFloatTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                        DType::kBFloat16};
const std::vector<DType> kNoBool = {DType::kFloat32,  DType::kFloat64, DType::kFloat16,
                                    DType::kBFloat16, DType::kInt64,   DType::kInt8,
                                    DType::kUInt8,    DType::kInt16,   DType::kInt32};
const std::vector<DType> kIntegral = {DType::kInt64, DType::kBool,  DType::kInt8,
                                      DType::kUInt8, DType::kInt16, DType::kInt32};
const std::vector<DType> kIntegers = {DType::kInt64, DType::kInt8, DType::kUInt8, DType::kInt16,
                                      DType::kInt32};

namespace {

int FloatRank(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16:
      return 1;
    case DType::kFloat32:
      return 2;
    case DType::kFloat64:
      return 3;
    default:
      return 0;
  }
}

// Integer ranks in c10's promotion lattice: bool, the 8-bit types, int16,
// int32, int64.
int IntRank(DType dtype) {
  switch (dtype) {
    case DType::kInt64:
      return 5;
    case DType::kInt32:
      return 4;
    case DType::kInt16:
      return 3;
    case DType::kInt8:
    case DType::kUInt8:
      return 2;
    default:
      return 1;
  }
}

}  // namespace

DType PromoteTensors(DType a, DType b) {
  if (a == b) return a;
  const int fa = FloatRank(a), fb = FloatRank(b);
  if (fa == 1 && fb == 1) return DType::kFloat32;  // float16 with bfloat16
  if (fa != fb) return fa > fb ? a : b;
  // uint8 and int8: neither holds the other's values.
  if ((a == DType::kUInt8 && b == DType::kInt8) || (a == DType::kInt8 && b == DType::kUInt8)) {
    return DType::kInt16;
  }
  return IntRank(a) >= IntRank(b) ? a : b;
}

DType PromoteOperands(const std::vector<const ir::TensorType*>& operands) {
  std::optional<DType> dimensioned, zero_dim;
  for (const ir::TensorType* type : operands) {
    std::optional<DType>& tier = type->rank() > 0 ? dimensioned : zero_dim;
    tier = tier ? PromoteTensors(*tier, type->dtype) : type->dtype;
  }
  if (!dimensioned) return zero_dim.value_or(DType::kFloat32);
  if (!zero_dim) return *dimensioned;
  // c10's combine_categories.
  if (ir::IsFloatingPoint(*dimensioned)) return *dimensioned;
  if (*dimensioned == DType::kBool || ir::IsFloatingPoint(*zero_dim)) {
    return PromoteTensors(*dimensioned, *zero_dim);
  }
  return *dimensioned;
}

DType PromoteWithScalar(DType tensor, const ir::ArgValue& scalar) {
  if (std::holds_alternative<double>(scalar) && !ir::IsFloatingPoint(tensor)) {
    return DType::kFloat32;
  }
  const bool integer =
      std::holds_alternative<int64_t>(scalar) || std::holds_alternative<ir::SymExpr>(scalar);
  if (integer && tensor == DType::kBool) return DType::kInt64;
  return tensor;
}

DType ToFloating(DType dtype) { return ir::IsFloatingPoint(dtype) ? dtype : DType::kFloat32; }

double RoundScalar(double value, DType dtype) {
  const float single = static_cast<float>(value);
  switch (dtype) {
    case DType::kFloat32:
      return single;
    case DType::kFloat16:
      return static_cast<float>(static_cast<_Float16>(single));
    case DType::kBFloat16: {
      if (std::isnan(single)) return single;
      uint32_t bits;
      std::memcpy(&bits, &single, sizeof(bits));
      bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;  // nearest, ties to even
      float rounded;
      std::memcpy(&rounded, &bits, sizeof(rounded));
      return rounded;
    }
    default:
      return value;
  }
}

absl::StatusOr<std::vector<ir::Dim>> BroadcastShapes(const std::vector<ir::Dim>& a,
                                                     const std::vector<ir::Dim>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<ir::Dim> result(rank);
  const ir::Dim one = ir::Dim::Constant(1);
  for (size_t d = 0; d < rank; ++d) {
    const ir::Dim da = d + a.size() >= rank ? a[d + a.size() - rank] : one;
    const ir::Dim db = d + b.size() >= rank ? b[d + b.size() - rank] : one;
    if (da == db || db == one) {
      result[d] = da;
    } else if (da == one) {
      result[d] = db;
    } else {
      auto text = [](const std::vector<ir::Dim>& dims) {
        return absl::StrJoin(dims, ", ", [](std::string* out, const ir::Dim& dim) {
          absl::StrAppend(out, ir::ToString(ir::SymExpr::Of(dim), ir::Graph()));
        });
      };
      return absl::InvalidArgumentError(
          absl::StrCat("shapes [", text(a), "] and [", text(b), "] cannot be broadcast together"));
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

bool HasNoElements(const std::vector<ir::Dim>& sizes) {
  return std::any_of(sizes.begin(), sizes.end(),
                     [](const ir::Dim& size) { return size == ir::Dim::Constant(0); });
}

int ExprBuilder::Push(ir::Expr expr) {
  definition_.exprs.push_back(std::move(expr));
  return static_cast<int>(definition_.exprs.size()) - 1;
}

int ExprBuilder::Load(const ir::Graph& graph, int value, int rank, DType dtype) {
  return LoadAt(value, ir::AffineMap::Broadcast(graph.values[value].sizes, rank), dtype);
}

int ExprBuilder::LoadAt(int value, ir::AffineMap index, DType dtype) {
  ir::Expr expr;
  expr.kind = ir::Expr::Kind::kLoad;
  expr.dtype = dtype;
  expr.value = value;
  expr.index = std::move(index);
  return Push(std::move(expr));
}

int ExprBuilder::BoundedLoad(int value, ir::AffineMap index, DType dtype, double fill) {
  const int load = LoadAt(value, std::move(index), dtype);
  definition_.exprs[load].bounded = true;
  definition_.exprs[load].fill = fill;
  return load;
}

int ExprBuilder::GatheredLoad(int value, ir::AffineMap index, int coordinate, int position,
                              DType dtype, double fill) {
  index.coefficients[coordinate].assign(index.num_variables, 0);
  index.offsets[coordinate] = 0;
  const int load = LoadAt(value, std::move(index), dtype);
  ir::Expr& expr = definition_.exprs[load];
  expr.gathered = coordinate;
  expr.operands = {position};
  expr.fill = fill;
  return load;
}

int ExprBuilder::Constant(double value, DType dtype) {
  ir::Expr expr;
  expr.kind = ir::Expr::Kind::kConstant;
  expr.dtype = dtype;
  expr.constant = value;
  return Push(std::move(expr));
}

int ExprBuilder::Call(const std::string& function, std::vector<int> operands, DType dtype) {
  ir::Expr expr;
  expr.kind = ir::Expr::Kind::kCall;
  expr.dtype = dtype;
  expr.function = function;
  expr.operands = std::move(operands);
  return Push(std::move(expr));
}

int ExprBuilder::Index(int variable, DType dtype) {
  ir::Expr expr;
  expr.kind = ir::Expr::Kind::kIndex;
  expr.dtype = dtype;
  expr.variable = variable;
  return Push(std::move(expr));
}

int ExprBuilder::Size(ir::SymExpr size, DType dtype) {
  ir::Expr expr;
  expr.kind = ir::Expr::Kind::kSize;
  expr.dtype = dtype;
  expr.size = std::move(size);
  return Push(std::move(expr));
}

int ExprBuilder::Cast(int expr, DType dtype) {
  if (definition_.exprs[expr].dtype == dtype) return expr;
  return Call("cast", {expr}, dtype);
}

ir::Definition ExprBuilder::Finish(int root) {
  definition_.root = root;
  return std::move(definition_);
}

}  // namespace kiln::ops
