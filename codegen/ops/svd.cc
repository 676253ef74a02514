// The singular value and symmetric eigenvalue decompositions through
// LAPACK (kiln.linalg's SVD and EIGH: gesdd and syevd, the drivers eager
// calls on the CPU). A batch of matrices is flattened into one batch dim
// (symbolic ones too) and the results get their batch dims back. The
// vectors' signs are the LAPACK's choice, as eager's are.
#include "abi/kiln_abi.h"
#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/linalg_util.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

// The results of kiln.linalg `routine` on A's matrices, those with
// `vectors` false as eager's empty [0] tensors.
absl::StatusOr<std::vector<int>> Decompose(GraphBuilder& b, int a, int routine, int64_t flags,
                                           const std::vector<bool>& vectors) {
  const ir::TensorType type = b.type(a);
  ASSIGN_OR_RETURN(const int flat, Flatten(b, a, 2));
  ASSIGN_OR_RETURN(const std::vector<int> results, Linalg(b, routine, {flat}, flags));
  std::vector<int> unflattened;
  for (size_t i = 0; i < results.size(); ++i) {
    if (vectors[i] && !(flags & KILN_LINALG_VECTORS)) {
      ASSIGN_OR_RETURN(const int empty,
                       b.Add("aten.reshape.default", {results[i]},
                             {{"size", std::vector<ir::SymExpr>{ir::SymExpr::Constant(0)}}}));
      unflattened.push_back(empty);
      continue;
    }
    ASSIGN_OR_RETURN(const int value, Unflatten(b, results[i], BatchDims(type, 2)));
    unflattened.push_back(value);
  }
  return unflattened;
}

// _linalg_svd(A, full_matrices, compute_uv, driver) -> (U, S, Vh).
absl::StatusOr<std::vector<int>> Svd(GraphBuilder& b, const ir::Node& node) {
  RETURN_IF_ERROR(RequireMatrix(b.type(node.inputs[0]), "svd"));
  if (Present(node, "driver")) {
    return absl::InvalidArgumentError(
        "svd: keyword argument `driver=` is only supported on CUDA inputs with the cuSOLVER "
        "backend (as eager's): leave it out on the CPU");
  }
  const int64_t flags = (BoolArg(node, "compute_uv") ? KILN_LINALG_VECTORS : 0) |
                        (BoolArg(node, "full_matrices") ? KILN_LINALG_FULL : 0);
  return Decompose(b, node.inputs[0], KILN_LINALG_SVD, flags, {true, false, true});
}

// _linalg_eigh(A, UPLO, compute_v) -> (eigenvalues, eigenvectors), of the
// symmetric matrix A's lower (UPLO "L") or upper ("U") triangle.
absl::StatusOr<std::vector<int>> Eigh(GraphBuilder& b, const ir::Node& node) {
  RETURN_IF_ERROR(RequireSquare(b.type(node.inputs[0]), "eigh"));
  const std::string& uplo = std::get<std::string>(Arg(node, "UPLO"));
  if (uplo != "L" && uplo != "U") {
    return absl::InvalidArgumentError(
        absl::StrCat("eigh: UPLO is 'L' or 'U' (the triangle read), got '", uplo, "'"));
  }
  const int64_t flags = (BoolArg(node, "compute_v") ? KILN_LINALG_VECTORS : 0) |
                        (uplo == "U" ? KILN_LINALG_UPPER : 0);
  return Decompose(b, node.inputs[0], KILN_LINALG_EIGH, flags, {false, true});
}

ArgSpec Flag(const char* name, bool value) { return {name, ArgKind::kBool, ir::ArgValue(value)}; }

}  // namespace

void RegisterSpectralOps(OpTable& table) {
  const std::vector<ir::DType> lapack_types = {ir::DType::kFloat32, ir::DType::kFloat64};
  AddComposite(table, "aten._linalg_svd.default", 1, 1,
               {Flag("full_matrices", false),
                Flag("compute_uv", true),
                {"driver", ArgKind::kString, ir::ArgValue(ir::None{})}},
               Svd, lapack_types, {}, "linalg");
  AddComposite(
      table, "aten._linalg_eigh.default", 1, 1,
      {{"UPLO", ArgKind::kString, ir::ArgValue(std::string("L"))}, Flag("compute_v", true)}, Eigh,
      lapack_types, {}, "linalg");
}

}  // namespace kiln::ops
