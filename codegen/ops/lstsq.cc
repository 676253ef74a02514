// linalg_lstsq through LAPACK's least-squares drivers (client/runtime/
// lstsq.h), as eager's CPU kernel: gelsy by default, gels, gelsd or gelss by
// the driver argument.
//
// The core op is kiln.lstsq (A [batch, m, n], rcond [batch, 1], B [batch,
// m, k] -> X [batch, n, k], residuals [batch, k], rank [batch] (int64),
// singular values [batch, min(m, n)], info [batch] (int32)), lowered to the runtime's linalg
// call. The aten op broadcasts A's and B's batch dims, flattens them into
// one (symbolic ones too) and gives eager's results their shapes: a result
// the driver does not compute is an empty tensor, as eager's (the rank for
// gels, the singular values but for gelsd and gelss, the residuals but for
// m > n with gels). gelsd's and gelss's residuals exist only when every
// matrix has full rank, a shape that depends on values: refused.
#include <algorithm>
#include <cfloat>

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

absl::StatusOr<std::vector<ir::TensorType>> InferLstsq(const ir::Node&, const InputTypes& inputs) {
  const ir::TensorType& a = *inputs[0];
  const std::vector<int64_t> ranks = {3, 2, 3};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::TensorType& operand = *inputs[i];
    if (operand.rank() != ranks[i] || operand.sizes[0] != a.sizes[0] || operand.dtype != a.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("kiln.lstsq operand ", i, " is ",
                                                     ir::DTypeName(operand.dtype), Shape(operand)));
    }
  }
  if (a.dtype != ir::DType::kFloat32 && a.dtype != ir::DType::kFloat64) {
    return absl::UnimplementedError(absl::StrCat("least squares of ", ir::DTypeName(a.dtype),
                                                 ": LAPACK takes float32 and float64"));
  }
  const ir::TensorType& rhs = *inputs[2];
  if (inputs[1]->sizes[1] != ir::Dim::Constant(1) || rhs.sizes[1] != a.sizes[1]) {
    return absl::InvalidArgumentError(absl::StrCat("kiln.lstsq of ", Shape(a), ", rcond ",
                                                   Shape(*inputs[1]), " and ", Shape(rhs)));
  }
  const ir::Dim batch = a.sizes[0], m = a.sizes[1], n = a.sizes[2], k = rhs.sizes[2];
  ASSIGN_OR_RETURN(const ir::Dim shorter, MinDim(m, n, a, "lstsq"));
  return std::vector<ir::TensorType>{
      ContiguousType(a.dtype, {batch, n, k}), ContiguousType(a.dtype, {batch, k}),
      ContiguousType(ir::DType::kInt64, {batch}), ContiguousType(a.dtype, {batch, shorter}),
      ContiguousType(ir::DType::kInt32, {batch})};
}

void AddLstsqCore(OpTable& table) {
  table.Add(LapackCallOp("kiln.lstsq.default", 3, 3, KILN_LINALG_LSTSQ, InferLstsq));
}

absl::StatusOr<int> Empty(GraphBuilder& b, ir::DType dtype) {
  return b.Add("aten.zeros.default", {}, {{"size", std::vector<int64_t>{0}}, {"dtype", dtype}});
}

// linalg_lstsq(A, B, rcond, driver) -> (solution, residuals, rank,
// singular_values). B is a vector (or a batch of them) when it has one dim
// fewer than A.
absl::StatusOr<std::vector<int>> Lstsq(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType a = b.type(node.inputs[0]), rhs = b.type(node.inputs[1]);
  RETURN_IF_ERROR(RequireMatrix(a, "torch.linalg.lstsq"));
  const int64_t dim_difference = a.rank() - rhs.rank();
  if (rhs.rank() < 1 || dim_difference < 0 || dim_difference > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
                     "(input.dim() - other.dim()) <= 1, got ",
                     Shape(a), " and ", Shape(rhs)));
  }
  const std::string driver =
      Present(node, "driver") ? std::get<std::string>(node.args.at("driver")) : "gelsy";
  const int64_t flags = driver == "gels"    ? KILN_LINALG_GELS
                        : driver == "gelsd" ? KILN_LINALG_GELSD
                        : driver == "gelss" ? KILN_LINALG_GELSS
                                            : 0;
  if (flags == 0 && driver != "gelsy") {
    return absl::InvalidArgumentError(absl::StrCat(
        "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), "
        "got '",
        driver, "'"));
  }
  const bool vector = dim_difference == 1;
  int other = node.inputs[1];
  if (vector) {
    ASSIGN_OR_RETURN(other, b.Add("aten.unsqueeze.default", {other}, {{"dim", int64_t{-1}}}));
  }
  const ir::Dim m = a.sizes[a.rank() - 2], n = a.sizes[a.rank() - 1];
  if (b.type(other).sizes[b.type(other).rank() - 2] != m) {
    return absl::InvalidArgumentError(
        absl::StrCat("torch.linalg.lstsq: input.size(-2) should match other.size(-2), got ",
                     Shape(a), " and ", Shape(rhs)));
  }
  if (m != n && (m.is_symbolic() || n.is_symbolic())) {
    return absl::UnimplementedError(
        absl::StrCat("lstsq of ", Shape(a), ": a non-square matrix needs static sizes"));
  }
  const bool tall = m != n && m.constant > n.constant;
  if (tall && (flags & (KILN_LINALG_GELSD | KILN_LINALG_GELSS))) {
    return absl::UnimplementedError(absl::StrCat(
        "lstsq of ", Shape(a), " with driver ", driver,
        ": its residuals exist only when every matrix has full rank, a shape that depends on "
        "the values; use driver 'gelsy' or 'gels'"));
  }
  ASSIGN_OR_RETURN(const std::vector<ir::Dim> batch,
                   BroadcastBatch(b, {node.inputs[0], other}, {2, 2}));
  ASSIGN_OR_RETURN(const int flat_a, ExpandAndFlatten(b, node.inputs[0], 2, batch));
  ASSIGN_OR_RETURN(const int flat_b, ExpandAndFlatten(b, other, 2, batch));
  // eager's default: the dtype's epsilon times the larger side.
  double rcond = Present(node, "rcond") ? ScalarArgAsDouble(node, "rcond") : 0;
  if (!Present(node, "rcond")) {
    if (m.is_symbolic()) {
      return absl::UnimplementedError(
          absl::StrCat("lstsq of ", Shape(a),
                       " without rcond: its default depends on a symbolic size; pass rcond"));
    }
    rcond = (a.dtype == ir::DType::kFloat64 ? DBL_EPSILON : FLT_EPSILON) *
            std::max(m.constant, n.constant);
  }
  ASSIGN_OR_RETURN(
      const int rcond_tensor,
      b.Add("aten.full.default", {},
            {{"size", std::vector<ir::SymExpr>{ir::SymExpr::Of(b.type(flat_a).sizes[0]),
                                               ir::SymExpr::Constant(1)}},
             {"fill_value", rcond},
             {"dtype", a.dtype}}));
  ASSIGN_OR_RETURN(
      std::vector<int> results,
      b.AddNode("kiln.lstsq.default", {flat_a, rcond_tensor, flat_b}, {{"flags", flags}}));
  for (int& result : results) {
    ASSIGN_OR_RETURN(result, Unflatten(b, result, batch));
  }
  // Eager raises where the driver failed (gels: A without full rank).
  RETURN_IF_ERROR(
      CheckErrors(b, /*check_errors=*/true, node.inputs[0], results[4], "torch.linalg.lstsq"));
  results.pop_back();
  if (vector) {
    ASSIGN_OR_RETURN(results[0], b.Add("aten.squeeze.dim", {results[0]}, {{"dim", int64_t{-1}}}));
  }
  if (!(tall && flags == KILN_LINALG_GELS)) {
    ASSIGN_OR_RETURN(results[1], Empty(b, a.dtype));
  }
  if (flags == KILN_LINALG_GELS) {
    ASSIGN_OR_RETURN(results[2], Empty(b, ir::DType::kInt64));
  }
  if (!(flags & (KILN_LINALG_GELSD | KILN_LINALG_GELSS))) {
    ASSIGN_OR_RETURN(results[3], Empty(b, a.dtype));
  }
  return results;
}

}  // namespace

void RegisterLstsqOps(OpTable& table) {
  AddLstsqCore(table);
  AddComposite(table, "aten.linalg_lstsq.default", 2, 2,
               {{"rcond", ArgKind::kFloat, ir::ArgValue(ir::None{})},
                {"driver", ArgKind::kString, ir::ArgValue(ir::None{})}},
               Lstsq, kLapackTypes, {}, "linalg");
}

}  // namespace kiln::ops
