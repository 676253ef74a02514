// linalg_eig through LAPACK's geev (client/runtime/eig.h), as eager's CPU
// kernel for real matrices: complex eigenvalues and eigenvectors.
//
// The core op is kiln.eig (A [batch, n, n] -> eigenvalues [batch, n, 2],
// eigenvectors [batch, n, n, 2] as (real, imaginary) pairs of A's dtype,
// info [batch] (int32)), lowered to the runtime's linalg call. The aten op's
// results are complex, so its rule (AddEigRules) is the complex split's
// (passes/split_complex.h): it flattens leading batch dims into one
// (symbolic ones too), gives the pairs them back as what stands for the
// complex results, and raises eager's error where geev did not converge.
#include "abi/kiln_abi.h"
#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/batched_matrices.h"
#include "codegen/ops/complex_rules.h"
#include "codegen/ops/linalg_util.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

absl::StatusOr<std::vector<ir::TensorType>> InferEig(const ir::Node&, const InputTypes& inputs) {
  const ir::TensorType& a = *inputs[0];
  if (a.rank() != 3 || a.sizes[1] != a.sizes[2]) {
    return absl::InvalidArgumentError(
        absl::StrCat("kiln.eig of ", ir::DTypeName(a.dtype), Shape(a)));
  }
  if (a.dtype != ir::DType::kFloat32 && a.dtype != ir::DType::kFloat64) {
    return absl::UnimplementedError(absl::StrCat("the eigendecomposition of ",
                                                 ir::DTypeName(a.dtype),
                                                 ": LAPACK takes float32 and float64"));
  }
  const ir::Dim batch = a.sizes[0], n = a.sizes[1], pair = ir::Dim::Constant(2);
  return std::vector<ir::TensorType>{ContiguousType(a.dtype, {batch, n, pair}),
                                     ContiguousType(a.dtype, {batch, n, n, pair}),
                                     ContiguousType(ir::DType::kInt32, {batch})};
}

// linalg_eig's types: complex eigenvalues [batch..., n] and eigenvectors
// [batch..., n, n] of a real A [batch..., n, n].
absl::StatusOr<std::vector<ir::TensorType>> InferLinalgEig(const ir::Node&,
                                                           const InputTypes& inputs) {
  const ir::TensorType& a = *inputs[0];
  RETURN_IF_ERROR(RequireSquare(a, "linalg.eig"));
  if (a.dtype != ir::DType::kFloat32 && a.dtype != ir::DType::kFloat64) {
    return absl::UnimplementedError(
        absl::StrCat("linalg.eig of ", ir::DTypeName(a.dtype), ": float32 and float64 only"));
  }
  ASSIGN_OR_RETURN(const ir::DType complex, ComplexOf(a.dtype));
  std::vector<ir::Dim> values = a.sizes;
  values.pop_back();
  return std::vector<ir::TensorType>{ContiguousType(complex, values),
                                     ContiguousType(complex, a.sizes)};
}

// linalg_eig(A) -> (eigenvalues, eigenvectors) as their (real, imaginary)
// pairs, which stand for the complex results after the complex split.
absl::StatusOr<std::vector<int>> SplitLinalgEig(GraphBuilder& b, const ir::Node& node,
                                                const InputTypes& types) {
  const ir::TensorType& a = *types[0];
  ASSIGN_OR_RETURN(const int flat, Flatten(b, node.inputs[0], 2));
  ASSIGN_OR_RETURN(std::vector<int> results, b.AddNode("kiln.eig.default", {flat}));
  for (int& result : results) {
    ASSIGN_OR_RETURN(result, Unflatten(b, result, BatchDims(a, 2)));
  }
  RETURN_IF_ERROR(
      CheckErrors(b, /*check_errors=*/true, node.inputs[0], results[2], "torch.linalg.eig"));
  results.pop_back();
  return results;
}

}  // namespace

void AddEigRules(ComplexRules& rules) {
  rules["aten.linalg_eig.default"] = {InferLinalgEig, SplitLinalgEig};
}

void RegisterEigOps(OpTable& table) {
  table.Add(LapackCallOp("kiln.eig.default", 1, 1, int64_t{KILN_LINALG_EIG}, InferEig));
  // Its results are complex: the complex split rewrites it (AddEigRules)
  // before anything lowers.
  OpDef eig;
  eig.name = "aten.linalg_eig.default";
  eig.family = "linalg";
  eig.dtypes = kLapackTypes;
  eig.min_inputs = eig.max_inputs = 1;
  eig.infer = InferLinalgEig;
  eig.lower = [](const ir::Graph&,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    return absl::InternalError(absl::StrCat(node.op, " lowered before its complex split"));
  };
  table.Add(std::move(eig));
}

}  // namespace kiln::ops
