// Shared by the op families: dtype promotion, broadcasting, and a small
// builder for pointwise expression DAGs.
#ifndef KILN_CODEGEN_OPS_POINTWISE_UTIL_H_
#define KILN_CODEGEN_OPS_POINTWISE_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "codegen/loop_ir.h"

namespace kiln::ops {

extern const std::vector<ir::DType> kAllTypes;    // every dtype Kiln stores
extern const std::vector<ir::DType> kFloatTypes;  // the floating ones
extern const std::vector<ir::DType> kNoBool;      // every dtype but bool
extern const std::vector<ir::DType> kIntegral;    // the integer dtypes and bool
extern const std::vector<ir::DType> kIntegers;    // the integer dtypes

using ir::ComputeType;

// PyTorch's result type of two tensors.
ir::DType PromoteTensors(ir::DType a, ir::DType b);
// PyTorch's result type of several tensors: 0-dim tensors (scalar_tensor,
// a full reduction) change the result only when they are of a higher
// category (bool < integer < floating) than the dimensioned ones, so
// float16 x + a float32 0-dim tensor is float16.
ir::DType PromoteOperands(const std::vector<const ir::TensorType*>& operands);
// A Python scalar only changes the category: float scalar with an integer
// tensor is float32 (the default dtype); int scalar with bool is int64.
ir::DType PromoteWithScalar(ir::DType tensor, const ir::ArgValue& scalar);
// Integer and bool types become float32 (the default dtype).
ir::DType ToFloating(ir::DType dtype);
// A Python scalar as eager's kernels see it next to a tensor of `dtype`:
// converted to that dtype (through float for 16-bit floats, as
// c10::Scalar::to does), so bfloat16 x + 0.1 adds bfloat16(0.1).
double RoundScalar(double value, ir::DType dtype);

absl::StatusOr<std::vector<ir::Dim>> BroadcastShapes(const std::vector<ir::Dim>& a,
                                                     const std::vector<ir::Dim>& b);
ir::TensorType ContiguousType(ir::DType dtype, std::vector<ir::Dim> sizes);

// Whether `sizes` has a dim of constant size 0: a tensor with no elements,
// whose op computes nothing.
bool HasNoElements(const std::vector<ir::Dim>& sizes);

// Builds one pointwise (or reduction) definition's expression DAG.
class ExprBuilder {
 public:
  explicit ExprBuilder(ir::Definition::Kind kind = ir::Definition::Kind::kPointwise) {
    definition_.kind = kind;
  }
  // `value` broadcast to a result of rank `rank`, converted to `dtype`.
  int Load(const ir::Graph& graph, int value, int rank, ir::DType dtype);
  int LoadAt(int value, ir::AffineMap index, ir::DType dtype);
  // A load that yields `fill` where `index` falls outside `value`
  // (ir::Expr::bounded).
  int BoundedLoad(int value, ir::AffineMap index, ir::DType dtype, double fill);
  // A load whose coordinate `coordinate` is the int64 expression `position`
  // (index's row for it is ignored); `fill` where it falls outside `value`
  // (ir::Expr::gathered).
  int GatheredLoad(int value, ir::AffineMap index, int coordinate, int position, ir::DType dtype,
                   double fill);
  int Constant(double value, ir::DType dtype);
  int Call(const std::string& function, std::vector<int> operands, ir::DType dtype);
  int Index(int variable, ir::DType dtype);
  int Size(ir::SymExpr size, ir::DType dtype);
  ir::DType dtype(int expr) const { return definition_.exprs[expr].dtype; }
  // Converts `expr` to `dtype` unless it already is.
  int Cast(int expr, ir::DType dtype);
  ir::Definition Finish(int root);

 private:
  int Push(ir::Expr expr);
  ir::Definition definition_;
};

}  // namespace kiln::ops

#endif  // KILN_CODEGEN_OPS_POINTWISE_UTIL_H_
