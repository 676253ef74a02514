// Linear algebra through LAPACK: calls through the runtime table
// (kiln_runtime.linalg, client/runtime/linalg.h), which reaches the LAPACK
// Debian's OpenBLAS ships, the way GEMM reaches its BLAS.
//
// The core op is kiln.linalg (a routine of kiln_abi.h's KILN_LINALG_* on a
// batch of matrices: operands [batch, rows, cols], pivots [batch, n]). Each
// result the graph uses is one runtime call that computes it alone. The
// aten ops are composites over it: leading batch dims are broadcast and
// flattened into one (symbolic ones too), a right-hand solve is the
// transposed left-hand one, and the results get their batch dims back.
// float32 and float64, LAPACK's s and d routines, as eager's.
#include "abi/kiln_abi.h"
#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/linalg_util.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

// kiln.linalg's results for `routine` on its operands (kiln_abi.h,
// client/runtime/linalg.h).
absl::StatusOr<std::vector<ir::TensorType>> InferLinalg(const ir::Node& node,
                                                        const InputTypes& inputs) {
  const int64_t routine = IntArg(node, "routine");
  const int expected =
      routine == KILN_LINALG_LU_SOLVE                                                    ? 3
      : routine == KILN_LINALG_CHOLESKY_SOLVE || routine == KILN_LINALG_TRIANGULAR_SOLVE ? 2
                                                                                         : 1;
  if (routine < 0 || routine >= KILN_LINALG_COUNT || inputs.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("kiln.linalg routine ", routine, " with ", inputs.size(), " operands"));
  }
  const ir::TensorType& a = *inputs[0];
  const int b_index = static_cast<int>(inputs.size()) - 1;
  for (int i = 0; i < static_cast<int>(inputs.size()); ++i) {
    const bool pivots = routine == KILN_LINALG_LU_SOLVE && i == 1;
    const ir::TensorType& operand = *inputs[i];
    if (operand.rank() != (pivots ? 2 : 3) || operand.sizes[0] != a.sizes[0] ||
        operand.dtype != (pivots ? ir::DType::kInt32 : a.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("kiln.linalg operand ", i, " is ",
                                                     ir::DTypeName(operand.dtype), Shape(operand)));
    }
  }
  if (a.dtype != ir::DType::kFloat32 && a.dtype != ir::DType::kFloat64) {
    return absl::UnimplementedError(absl::StrCat("linear algebra on ", ir::DTypeName(a.dtype),
                                                 ": LAPACK takes float32 and float64"));
  }
  const ir::Dim batch = a.sizes[0], rows = a.sizes[1], cols = a.sizes[2];
  auto matrix = [&](ir::Dim r, ir::Dim c) { return ContiguousType(a.dtype, {batch, r, c}); };
  const ir::TensorType per_matrix = ContiguousType(a.dtype, {batch});
  const ir::TensorType info = ContiguousType(ir::DType::kInt32, {batch});
  if (routine == KILN_LINALG_LU) {
    ir::Dim k = rows;
    if (rows != cols) {
      if (rows.is_symbolic() || cols.is_symbolic()) {
        return absl::UnimplementedError(
            absl::StrCat("LU of ", Shape(a), ": a non-square matrix needs static sizes"));
      }
      k = ir::Dim::Constant(std::min(rows.constant, cols.constant));
    }
    return std::vector<ir::TensorType>{matrix(rows, cols),
                                       ContiguousType(ir::DType::kInt32, {batch, k}),
                                       info,
                                       per_matrix,
                                       per_matrix,
                                       per_matrix,
                                       matrix(rows, rows),
                                       matrix(rows, k),
                                       matrix(k, cols)};
  }
  const int64_t flags = IntArg(node, "flags");
  const bool vectors = flags & KILN_LINALG_VECTORS;
  if (routine == KILN_LINALG_SVD) {
    if (rows != cols && (rows.is_symbolic() || cols.is_symbolic())) {
      return absl::UnimplementedError(
          absl::StrCat("SVD of ", Shape(a), ": a non-square matrix needs static sizes"));
    }
    const ir::Dim k =
        rows == cols ? rows : ir::Dim::Constant(std::min(rows.constant, cols.constant));
    const bool full = flags & KILN_LINALG_FULL;
    const ir::Dim none = ir::Dim::Constant(0);
    return std::vector<ir::TensorType>{matrix(rows, vectors ? (full ? rows : k) : none),
                                       ContiguousType(a.dtype, {batch, k}),
                                       matrix(vectors ? (full ? cols : k) : none, cols)};
  }
  if (rows != cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("linear algebra expects square matrices, got ", Shape(a)));
  }
  if (b_index > 0 && inputs[b_index]->sizes[1] != rows) {
    return absl::InvalidArgumentError(absl::StrCat("the right-hand side ", Shape(*inputs[b_index]),
                                                   " does not match the matrix ", Shape(a)));
  }
  switch (routine) {
    case KILN_LINALG_EIGH:
      return std::vector<ir::TensorType>{ContiguousType(a.dtype, {batch, rows}),
                                         matrix(rows, vectors ? rows : ir::Dim::Constant(0))};
    case KILN_LINALG_CHOLESKY:
      return std::vector<ir::TensorType>{matrix(rows, rows), info};
    case KILN_LINALG_CHOLESKY_INVERSE:
      return std::vector<ir::TensorType>{matrix(rows, rows)};
    default:  // the solves
      return std::vector<ir::TensorType>{matrix(rows, inputs[b_index]->sizes[2])};
  }
}

void AddLinalgCore(OpTable& table) {
  table.Add(LapackCallOp("kiln.linalg.default", 1, 3, std::nullopt, InferLinalg));
}

}  // namespace

// --- the aten composites -------------------------------------------------

absl::StatusOr<std::vector<int>> Linalg(GraphBuilder& b, int routine, std::vector<int> operands,
                                        int64_t flags) {
  return b.AddNode("kiln.linalg.default", std::move(operands),
                   {{"routine", int64_t{routine}}, {"flags", flags}});
}

namespace {

// LU's results (client/runtime/linalg.h) with the input's batch dims.
enum LuResult { kLu = 0, kPivots, kInfo, kDet, kSign, kLogAbsDet, kP, kL, kU };

absl::StatusOr<std::vector<int>> Lu(GraphBuilder& b, int a, const std::vector<LuResult>& wanted) {
  const ir::TensorType type = b.type(a);
  RETURN_IF_ERROR(RequireMatrix(type, "LU"));
  ASSIGN_OR_RETURN(const int flat, Flatten(b, a, 2));
  ASSIGN_OR_RETURN(const std::vector<int> results, Linalg(b, KILN_LINALG_LU, {flat}));
  std::vector<int> unflattened;
  for (LuResult result : wanted) {
    ASSIGN_OR_RETURN(const int value, Unflatten(b, results[result], BatchDims(type, 2)));
    unflattened.push_back(value);
  }
  return unflattened;
}

}  // namespace

absl::Status RequireSquare(const ir::TensorType& type, const char* what) {
  RETURN_IF_ERROR(RequireMatrix(type, what));
  if (type.sizes[type.rank() - 1] != type.sizes[type.rank() - 2]) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " expects square matrices, got ", Shape(type)));
  }
  return absl::OkStatus();
}

namespace {

// X with A X = B (or A^T X = B when `adjoint`), or X A = B (X A^T = B)
// when not `left`, from A's LU factors; B a batch of matrices.
absl::StatusOr<int> LuSolve(GraphBuilder& b, int lu, int pivots, int rhs, bool left, bool adjoint) {
  if (!left) {
    ASSIGN_OR_RETURN(rhs, Transpose(b, rhs));
    adjoint = !adjoint;
  }
  ASSIGN_OR_RETURN(const std::vector<ir::Dim> batch,
                   BroadcastBatch(b, {lu, pivots, rhs}, {2, 1, 2}));
  ASSIGN_OR_RETURN(const int flat_lu, ExpandAndFlatten(b, lu, 2, batch));
  ASSIGN_OR_RETURN(const int flat_pivots, ExpandAndFlatten(b, pivots, 1, batch));
  ASSIGN_OR_RETURN(const int flat_rhs, ExpandAndFlatten(b, rhs, 2, batch));
  ASSIGN_OR_RETURN(const std::vector<int> solved,
                   Linalg(b, KILN_LINALG_LU_SOLVE, {flat_lu, flat_pivots, flat_rhs},
                          adjoint ? KILN_LINALG_ADJOINT : 0));
  ASSIGN_OR_RETURN(int x, Unflatten(b, solved[0], batch));
  if (!left) {
    ASSIGN_OR_RETURN(x, Transpose(b, x));
  }
  return x;
}

absl::Status RequirePivoting(const ir::Node& node) {
  if (Present(node, "pivot") && !BoolArg(node, "pivot")) {
    return absl::InvalidArgumentError(
        "LU without pivoting is not implemented on the CPU (eager refuses it too): pass "
        "pivot=True");
  }
  return absl::OkStatus();
}

// linalg_lu_factor_ex(A, pivot, check_errors) -> (LU, pivots, info).
absl::StatusOr<std::vector<int>> LuFactorEx(GraphBuilder& b, const ir::Node& node) {
  RETURN_IF_ERROR(RequirePivoting(node));
  ASSIGN_OR_RETURN(std::vector<int> results, Lu(b, node.inputs[0], {kLu, kPivots, kInfo}));
  RETURN_IF_ERROR(CheckErrors(b, BoolArg(node, "check_errors"), node.inputs[0], results[2],
                              "torch.linalg.lu_factor_ex"));
  return results;
}

// linalg_lu(A, pivot) -> (P, L, U).
absl::StatusOr<std::vector<int>> LuUnpacked(GraphBuilder& b, const ir::Node& node) {
  RETURN_IF_ERROR(RequirePivoting(node));
  return Lu(b, node.inputs[0], {kP, kL, kU});
}

// _linalg_det(A) -> (det, LU, pivots).
absl::StatusOr<std::vector<int>> Det(GraphBuilder& b, const ir::Node& node) {
  RETURN_IF_ERROR(RequireSquare(b.type(node.inputs[0]), "det"));
  return Lu(b, node.inputs[0], {kDet, kLu, kPivots});
}

// _linalg_slogdet(A) -> (sign, logabsdet, LU, pivots).
absl::StatusOr<std::vector<int>> Slogdet(GraphBuilder& b, const ir::Node& node) {
  RETURN_IF_ERROR(RequireSquare(b.type(node.inputs[0]), "slogdet"));
  return Lu(b, node.inputs[0], {kSign, kLogAbsDet, kLu, kPivots});
}

// linalg_lu_solve(LU, pivots, B, left, adjoint) -> X.
absl::StatusOr<std::vector<int>> LuSolveOp(GraphBuilder& b, const ir::Node& node) {
  RETURN_IF_ERROR(RequireSquare(b.type(node.inputs[0]), "lu_solve"));
  RETURN_IF_ERROR(RequireMatrix(b.type(node.inputs[2]), "lu_solve"));
  ASSIGN_OR_RETURN(const int x, LuSolve(b, node.inputs[0], node.inputs[1], node.inputs[2],
                                        BoolArg(node, "left"), BoolArg(node, "adjoint")));
  return std::vector<int>{x};
}

// A solve as eager's: A's LU factors, then the solve with them. Returns
// (X, LU, pivots, info).
absl::StatusOr<std::vector<int>> SolveByLu(GraphBuilder& b, int a, int rhs, bool left) {
  ASSIGN_OR_RETURN(const std::vector<int> factors, Lu(b, a, {kLu, kPivots, kInfo}));
  ASSIGN_OR_RETURN(const int x, LuSolve(b, factors[0], factors[1], rhs, left, /*adjoint=*/false));
  return std::vector<int>{x, factors[0], factors[1], factors[2]};
}

// _linalg_solve_ex(A, B, left, check_errors) -> (result, LU, pivots, info).
// B is a vector (or a batch of them) when it has one dim fewer than A and
// A's batch shape, as eager's linalg_solve_is_vector_rhs.
absl::StatusOr<std::vector<int>> SolveEx(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType a = b.type(node.inputs[0]), rhs = b.type(node.inputs[1]);
  RETURN_IF_ERROR(RequireSquare(a, "solve"));
  const bool vector =
      rhs.rank() == 1 || (rhs.rank() == a.rank() - 1 && BatchDims(rhs, 1) == BatchDims(a, 2));
  int matrix_rhs = node.inputs[1];
  if (vector) {
    ASSIGN_OR_RETURN(matrix_rhs, b.Add("aten.unsqueeze.default", {matrix_rhs},
                                       {{"dim", int64_t{BoolArg(node, "left") ? -1 : -2}}}));
  }
  ASSIGN_OR_RETURN(std::vector<int> results,
                   SolveByLu(b, node.inputs[0], matrix_rhs, BoolArg(node, "left")));
  if (vector) {
    ASSIGN_OR_RETURN(results[0], b.Add("aten.squeeze.dim", {results[0]},
                                       {{"dim", int64_t{BoolArg(node, "left") ? -1 : -2}}}));
  }
  RETURN_IF_ERROR(CheckErrors(b, BoolArg(node, "check_errors"), node.inputs[0], results[3],
                              "torch.linalg.solve_ex"));
  return results;
}

// linalg_inv_ex(A, check_errors) -> (inverse, info): eager's solve of
// A X = I.
absl::StatusOr<std::vector<int>> InvEx(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType a = b.type(node.inputs[0]);
  RETURN_IF_ERROR(RequireSquare(a, "inv"));
  const ir::SymExpr n = ir::SymExpr::Of(a.sizes.back());
  ASSIGN_OR_RETURN(const int rows,
                   b.Add("aten.arange.default", {}, {{"end", n}, {"dtype", ir::DType::kInt64}}));
  ASSIGN_OR_RETURN(const int columns,
                   b.Add("aten.unsqueeze.default", {rows}, {{"dim", int64_t{1}}}));
  ASSIGN_OR_RETURN(const int diagonal, b.Add("aten.eq.Tensor", {columns, rows}));
  ASSIGN_OR_RETURN(const int identity, b.Cast(diagonal, a.dtype));
  ASSIGN_OR_RETURN(const std::vector<int> results,
                   SolveByLu(b, node.inputs[0], identity, /*left=*/true));
  RETURN_IF_ERROR(
      CheckErrors(b, BoolArg(node, "check_errors"), node.inputs[0], results[3], "linalg.inv_ex"));
  return std::vector<int>{results[0], results[3]};
}

// linalg_cholesky_ex(A, upper, check_errors) -> (L, info).
absl::StatusOr<std::vector<int>> CholeskyEx(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType a = b.type(node.inputs[0]);
  RETURN_IF_ERROR(RequireSquare(a, "cholesky"));
  ASSIGN_OR_RETURN(const int flat, Flatten(b, node.inputs[0], 2));
  ASSIGN_OR_RETURN(
      const std::vector<int> results,
      Linalg(b, KILN_LINALG_CHOLESKY, {flat}, BoolArg(node, "upper") ? KILN_LINALG_UPPER : 0));
  ASSIGN_OR_RETURN(const int factor, Unflatten(b, results[0], BatchDims(a, 2)));
  ASSIGN_OR_RETURN(const int info, Unflatten(b, results[1], BatchDims(a, 2)));
  RETURN_IF_ERROR(
      CheckErrors(b, BoolArg(node, "check_errors"), node.inputs[0], info, "linalg.cholesky_ex"));
  return std::vector<int>{factor, info};
}

// A solve with a triangular or Cholesky factor `a` of the matrices `rhs`,
// batch dims broadcast.
absl::StatusOr<int> FactorSolve(GraphBuilder& b, int routine, int a, int rhs, int64_t flags) {
  ASSIGN_OR_RETURN(const std::vector<ir::Dim> batch, BroadcastBatch(b, {a, rhs}, {2, 2}));
  ASSIGN_OR_RETURN(const int flat_a, ExpandAndFlatten(b, a, 2, batch));
  ASSIGN_OR_RETURN(const int flat_rhs, ExpandAndFlatten(b, rhs, 2, batch));
  ASSIGN_OR_RETURN(const std::vector<int> solved, Linalg(b, routine, {flat_a, flat_rhs}, flags));
  return Unflatten(b, solved[0], batch);
}

// cholesky_solve(B, L, upper) -> X with L L^T X = B (U^T U X = B).
absl::StatusOr<std::vector<int>> CholeskySolve(GraphBuilder& b, const ir::Node& node) {
  RETURN_IF_ERROR(RequireMatrix(b.type(node.inputs[0]), "cholesky_solve"));
  RETURN_IF_ERROR(RequireSquare(b.type(node.inputs[1]), "cholesky_solve"));
  ASSIGN_OR_RETURN(const int x,
                   FactorSolve(b, KILN_LINALG_CHOLESKY_SOLVE, node.inputs[1], node.inputs[0],
                               BoolArg(node, "upper") ? KILN_LINALG_UPPER : 0));
  return std::vector<int>{x};
}

// cholesky_inverse(L, upper) -> (L L^T)^-1.
absl::StatusOr<std::vector<int>> CholeskyInverse(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType factor = b.type(node.inputs[0]);
  RETURN_IF_ERROR(RequireSquare(factor, "cholesky_inverse"));
  ASSIGN_OR_RETURN(const int flat, Flatten(b, node.inputs[0], 2));
  ASSIGN_OR_RETURN(const std::vector<int> results,
                   Linalg(b, KILN_LINALG_CHOLESKY_INVERSE, {flat},
                          BoolArg(node, "upper") ? KILN_LINALG_UPPER : 0));
  ASSIGN_OR_RETURN(const int inverse, Unflatten(b, results[0], BatchDims(factor, 2)));
  return std::vector<int>{inverse};
}

// A X = B with A triangular; X A = B when not `left` (A^T X^T = B^T, whose
// matrix has the other triangle); A^T X = B when `transpose`.
absl::StatusOr<int> TriangularSolve(GraphBuilder& b, int a, int rhs, bool upper, bool left,
                                    bool transpose, bool unit) {
  RETURN_IF_ERROR(RequireSquare(b.type(a), "triangular solve"));
  RETURN_IF_ERROR(RequireMatrix(b.type(rhs), "triangular solve"));
  if (!left) {
    ASSIGN_OR_RETURN(rhs, Transpose(b, rhs));
    transpose = !transpose;
  }
  if (transpose) {
    ASSIGN_OR_RETURN(a, Transpose(b, a));
    upper = !upper;
  }
  const int64_t flags = (upper ? KILN_LINALG_UPPER : 0) | (unit ? KILN_LINALG_UNIT : 0);
  ASSIGN_OR_RETURN(int x, FactorSolve(b, KILN_LINALG_TRIANGULAR_SOLVE, a, rhs, flags));
  if (!left) {
    ASSIGN_OR_RETURN(x, Transpose(b, x));
  }
  return x;
}

// linalg_solve_triangular(A, B, upper, left, unitriangular) -> X.
absl::StatusOr<std::vector<int>> SolveTriangular(GraphBuilder& b, const ir::Node& node) {
  ASSIGN_OR_RETURN(
      const int x,
      TriangularSolve(b, node.inputs[0], node.inputs[1], BoolArg(node, "upper"),
                      BoolArg(node, "left"), /*transpose=*/false, BoolArg(node, "unitriangular")));
  return std::vector<int>{x};
}

// triangular_solve(B, A, upper, transpose, unitriangular) -> (X, a copy of A).
absl::StatusOr<std::vector<int>> TriangularSolveOp(GraphBuilder& b, const ir::Node& node) {
  ASSIGN_OR_RETURN(
      const int x,
      TriangularSolve(b, node.inputs[1], node.inputs[0], BoolArg(node, "upper"), /*left=*/true,
                      BoolArg(node, "transpose"), BoolArg(node, "unitriangular")));
  ASSIGN_OR_RETURN(const int copy, b.Add("aten.clone.default", {node.inputs[1]}));
  return std::vector<int>{x, copy};
}

ArgSpec Flag(const char* name, bool value) { return {name, ArgKind::kBool, ir::ArgValue(value)}; }

}  // namespace

void RegisterLinalgOps(OpTable& table) {
  AddLinalgCore(table);
  const ArgSpec check_errors = Flag("check_errors", false);
  auto add = [&](const char* op, int inputs, std::vector<ArgSpec> args, Decomposition decompose,
                 int checked_inputs = -1) {
    AddComposite(table, op, inputs, inputs, std::move(args), std::move(decompose), kLapackTypes, {},
                 "linalg", checked_inputs);
  };
  add("aten.linalg_lu_factor_ex.default", 1, {Flag("pivot", true), check_errors}, LuFactorEx);
  add("aten.linalg_lu.default", 1, {Flag("pivot", true)}, LuUnpacked);
  add("aten._linalg_det.default", 1, {}, Det);
  add("aten._linalg_slogdet.default", 1, {}, Slogdet);
  // The pivots (int32) are checked by kiln.linalg.
  add("aten.linalg_lu_solve.default", 3, {Flag("left", true), Flag("adjoint", false)}, LuSolveOp,
      1);
  add("aten._linalg_solve_ex.default", 2, {Flag("left", true), check_errors}, SolveEx);
  add("aten.linalg_inv_ex.default", 1, {check_errors}, InvEx);
  add("aten.linalg_cholesky_ex.default", 1, {Flag("upper", false), check_errors}, CholeskyEx);
  add("aten.cholesky_solve.default", 2, {Flag("upper", false)}, CholeskySolve);
  add("aten.cholesky_inverse.default", 1, {Flag("upper", false)}, CholeskyInverse);
  add("aten.linalg_solve_triangular.default", 2,
      {{"upper", ArgKind::kBool, std::nullopt}, Flag("left", true), Flag("unitriangular", false)},
      SolveTriangular);
  add("aten.triangular_solve.default", 2,
      {Flag("upper", true), Flag("transpose", false), Flag("unitriangular", false)},
      TriangularSolveOp);
}

}  // namespace kiln::ops
