// linalg_matrix_exp through the runtime (client/runtime/matrix_exp.h):
// scaling and squaring with a Pade approximant over OpenBLAS's GEMM and
// LAPACK's gesv.
//
// The core op is kiln.matrix_exp (A [batch, n, n] -> exp(A) [batch, n, n]),
// lowered to the runtime's linalg call; the aten op flattens its leading
// batch dims (symbolic ones too) into one and gives the result them back.
#include "abi/kiln_abi.h"
#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/batched_matrices.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

absl::StatusOr<std::vector<ir::TensorType>> InferMatrixExp(const ir::Node&,
                                                           const InputTypes& inputs) {
  const ir::TensorType& a = *inputs[0];
  if (a.rank() != 3 || a.sizes[1] != a.sizes[2]) {
    return absl::InvalidArgumentError(
        absl::StrCat("kiln.matrix_exp of ", ir::DTypeName(a.dtype), Shape(a)));
  }
  if (a.dtype != ir::DType::kFloat32 && a.dtype != ir::DType::kFloat64) {
    return absl::UnimplementedError(
        absl::StrCat("matrix_exp of ", ir::DTypeName(a.dtype), ": float32 and float64 only"));
  }
  return std::vector<ir::TensorType>{ContiguousType(a.dtype, a.sizes)};
}

void AddMatrixExpCore(OpTable& table) {
  OpDef def;
  def.name = "kiln.matrix_exp.default";
  def.family = "linalg";
  def.dtypes = kLapackTypes;
  def.min_inputs = 1;
  def.max_inputs = 1;
  // The runtime routine, which the linalg call's emitter reads.
  def.args = {{"routine", ArgKind::kInt, ir::ArgValue(int64_t{KILN_LINALG_MATRIX_EXP})},
              {"flags", ArgKind::kInt, ir::ArgValue(int64_t{0})}};
  def.infer = InferMatrixExp;
  def.lower = [](const ir::Graph&,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kExtern;
    definition.function = "linalg";
    definition.operands = node.inputs;
    return std::vector<ir::Definition>{definition};
  };
  table.Add(std::move(def));
}

// linalg_matrix_exp(A) -> exp(A).
absl::StatusOr<std::vector<int>> MatrixExp(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType a = b.type(node.inputs[0]);
  RETURN_IF_ERROR(RequireMatrix(a, "linalg.matrix_exp"));
  if (a.sizes[a.rank() - 1] != a.sizes[a.rank() - 2]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "linalg.matrix_exp: A must be batches of square matrices, but they are ", Shape(a)));
  }
  ASSIGN_OR_RETURN(const int flat, Flatten(b, node.inputs[0], 2));
  ASSIGN_OR_RETURN(const int exponential, b.Add("kiln.matrix_exp.default", {flat}));
  ASSIGN_OR_RETURN(const int result, Unflatten(b, exponential, BatchDims(a, 2)));
  return std::vector<int>{result};
}

}  // namespace

void RegisterMatrixExpOps(OpTable& table) {
  AddMatrixExpCore(table);
  AddComposite(table, "aten.linalg_matrix_exp.default", 1, 1, {}, MatrixExp, kLapackTypes, {},
               "linalg");
}

}  // namespace kiln::ops
