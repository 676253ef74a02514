// linalg_ldl_factor_ex and linalg_ldl_solve through LAPACK's Bunch-Kaufman
// sytrf and sytrs (client/runtime/ldl.h), as eager's CPU kernels for real
// matrices: `hermitian` changes nothing for them.
//
// The core op is kiln.ldl (routine LDL_FACTOR: A [batch, n, n] -> LD [batch,
// n, n], pivots [batch, n] (int32), info [batch] (int32); LDL_SOLVE: LD,
// pivots, B [batch, n, k] -> X [batch, n, k]), lowered to the runtime's
// linalg call. The aten ops flatten leading batch dims into one (symbolic
// ones too; ldl_solve broadcasts B's and the factors' as eager's) and give
// the results them back.
#include "abi/kiln_abi.h"
#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/batched_matrices.h"
#include "codegen/ops/linalg_util.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

absl::StatusOr<std::vector<ir::TensorType>> InferLdl(const ir::Node& node,
                                                     const InputTypes& inputs) {
  const int64_t routine = IntArg(node, "routine");
  const size_t expected = routine == KILN_LINALG_LDL_FACTOR  ? 1
                          : routine == KILN_LINALG_LDL_SOLVE ? 3
                                                             : 0;
  if (expected == 0 || inputs.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("kiln.ldl routine ", routine, " with ", inputs.size(), " operands"));
  }
  const ir::TensorType& a = *inputs[0];
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::TensorType& operand = *inputs[i];
    const bool pivots = i == 1;
    if (operand.rank() != (pivots ? 2 : 3) || operand.sizes[0] != a.sizes[0] ||
        operand.sizes[1] != a.sizes[1] || operand.dtype != (pivots ? ir::DType::kInt32 : a.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("kiln.ldl operand ", i, " is ",
                                                     ir::DTypeName(operand.dtype), Shape(operand)));
    }
  }
  if (a.sizes[1] != a.sizes[2]) {
    return absl::InvalidArgumentError(absl::StrCat("kiln.ldl of ", Shape(a), ": not square"));
  }
  if (a.dtype != ir::DType::kFloat32 && a.dtype != ir::DType::kFloat64) {
    return absl::UnimplementedError(absl::StrCat("an LDL factorization of ", ir::DTypeName(a.dtype),
                                                 ": LAPACK takes float32 and float64"));
  }
  const ir::Dim batch = a.sizes[0], n = a.sizes[1];
  if (routine == KILN_LINALG_LDL_SOLVE) {
    return std::vector<ir::TensorType>{ContiguousType(a.dtype, {batch, n, inputs[2]->sizes[2]})};
  }
  return std::vector<ir::TensorType>{ContiguousType(a.dtype, {batch, n, n}),
                                     ContiguousType(ir::DType::kInt32, {batch, n}),
                                     ContiguousType(ir::DType::kInt32, {batch})};
}

absl::StatusOr<std::vector<int>> Ldl(GraphBuilder& b, int routine, std::vector<int> operands) {
  return b.AddNode("kiln.ldl.default", std::move(operands),
                   {{"routine", int64_t{routine}}, {"flags", int64_t{0}}});
}

// linalg_ldl_factor_ex(A, hermitian, check_errors) -> (LD, pivots, info).
absl::StatusOr<std::vector<int>> LdlFactorEx(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType a = b.type(node.inputs[0]);
  RETURN_IF_ERROR(RequireSquare(a, "torch.linalg.ldl_factor_ex"));
  ASSIGN_OR_RETURN(const int flat, Flatten(b, node.inputs[0], 2));
  ASSIGN_OR_RETURN(std::vector<int> results, Ldl(b, KILN_LINALG_LDL_FACTOR, {flat}));
  for (int& result : results) {
    ASSIGN_OR_RETURN(result, Unflatten(b, result, BatchDims(a, 2)));
  }
  RETURN_IF_ERROR(CheckErrors(b, BoolArg(node, "check_errors"), node.inputs[0], results[2],
                              "torch.linalg.ldl_factor_ex"));
  return results;
}

// linalg_ldl_solve(LD, pivots, B, hermitian) -> X with A X = B.
absl::StatusOr<std::vector<int>> LdlSolve(GraphBuilder& b, const ir::Node& node) {
  const int ld = node.inputs[0], pivots = node.inputs[1], rhs = node.inputs[2];
  RETURN_IF_ERROR(RequireSquare(b.type(ld), "torch.linalg.ldl_solve"));
  RETURN_IF_ERROR(RequireMatrix(b.type(rhs), "torch.linalg.ldl_solve"));
  ASSIGN_OR_RETURN(const std::vector<ir::Dim> batch,
                   BroadcastBatch(b, {ld, pivots, rhs}, {2, 1, 2}));
  ASSIGN_OR_RETURN(const int flat_ld, ExpandAndFlatten(b, ld, 2, batch));
  ASSIGN_OR_RETURN(const int flat_pivots, ExpandAndFlatten(b, pivots, 1, batch));
  ASSIGN_OR_RETURN(const int flat_rhs, ExpandAndFlatten(b, rhs, 2, batch));
  ASSIGN_OR_RETURN(const std::vector<int> solved,
                   Ldl(b, KILN_LINALG_LDL_SOLVE, {flat_ld, flat_pivots, flat_rhs}));
  ASSIGN_OR_RETURN(const int x, Unflatten(b, solved[0], batch));
  return std::vector<int>{x};
}

}  // namespace

void RegisterLdlOps(OpTable& table) {
  table.Add(LapackCallOp("kiln.ldl.default", 1, 3, std::nullopt, InferLdl));
  AddComposite(table, "aten.linalg_ldl_factor_ex.default", 1, 1,
               {{"hermitian", ArgKind::kBool, ir::ArgValue(false)},
                {"check_errors", ArgKind::kBool, ir::ArgValue(false)}},
               LdlFactorEx, kLapackTypes, {}, "linalg");
  AddComposite(table, "aten.linalg_ldl_solve.default", 3, 3,
               {{"hermitian", ArgKind::kBool, ir::ArgValue(false)}}, LdlSolve, kLapackTypes, {},
               "linalg", /*checked_inputs=*/1);  // the pivots (int32): kiln.ldl's
}

}  // namespace kiln::ops
