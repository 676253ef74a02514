// Householder QR through LAPACK (client/runtime/qr.h), as eager's CPU
// kernels: geqrf packs R and the reflectors, orgqr (householder_product)
// forms Q from them, ormqr applies Q to a matrix.
//
// The core op is kiln.qr (a routine of kiln_abi.h's KILN_LINALG_GEQRF,
// HOUSEHOLDER_PRODUCT or ORMQR on a batch of matrices: operands [batch,
// rows, cols], tau [batch, k]), lowered to the runtime's linalg call. The
// aten ops are composites over it: leading batch dims are flattened into
// one (symbolic ones too), and results get their batch dims back.
// linalg_qr is eager's linalg_qr_out_helper: geqrf, R the upper triangle
// of its result, Q the product of its reflectors (for a complete Q of a
// tall matrix, of the reflectors padded with zero columns to a square).
#include "abi/kiln_abi.h"
#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/batched_matrices.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

// kiln.qr's results for `routine` on its operands (client/runtime/qr.h).
absl::StatusOr<std::vector<ir::TensorType>> InferQr(const ir::Node& node,
                                                    const InputTypes& inputs) {
  const int64_t routine = IntArg(node, "routine");
  const size_t expected = routine == KILN_LINALG_GEQRF                 ? 1
                          : routine == KILN_LINALG_HOUSEHOLDER_PRODUCT ? 2
                          : routine == KILN_LINALG_ORMQR               ? 3
                                                                       : 0;
  if (expected == 0 || inputs.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("kiln.qr routine ", routine, " with ", inputs.size(), " operands"));
  }
  const ir::TensorType& a = *inputs[0];
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::TensorType& operand = *inputs[i];
    if (operand.rank() != (i == 1 ? 2 : 3) || operand.sizes[0] != a.sizes[0] ||
        operand.dtype != a.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("kiln.qr operand ", i, " is ",
                                                     ir::DTypeName(operand.dtype), Shape(operand)));
    }
  }
  if (a.dtype != ir::DType::kFloat32 && a.dtype != ir::DType::kFloat64) {
    return absl::UnimplementedError(
        absl::StrCat("QR of ", ir::DTypeName(a.dtype), ": LAPACK takes float32 and float64"));
  }
  const ir::Dim batch = a.sizes[0], rows = a.sizes[1], cols = a.sizes[2];
  if (routine == KILN_LINALG_GEQRF) {
    ASSIGN_OR_RETURN(const ir::Dim k, MinDim(rows, cols, a, "geqrf"));
    return std::vector<ir::TensorType>{ContiguousType(a.dtype, {batch, rows, cols}),
                                       ContiguousType(a.dtype, {batch, k})};
  }
  const ir::Dim k = inputs[1]->sizes[1];
  if (!AtLeast(rows, cols) || !AtLeast(cols, k)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the reflectors ", Shape(a), " and tau ", Shape(*inputs[1]),
                     ": a product of Householder reflectors needs rows >= columns >= tau's "
                     "length (known when the sizes are static or equal)"));
  }
  if (routine == KILN_LINALG_HOUSEHOLDER_PRODUCT) {
    return std::vector<ir::TensorType>{ContiguousType(a.dtype, {batch, rows, cols})};
  }
  const ir::TensorType& c = *inputs[2];
  if (k != cols || c.sizes[1] != rows) {
    return absl::InvalidArgumentError(absl::StrCat("ormqr of the reflectors ", Shape(a), ", tau ",
                                                   Shape(*inputs[1]), " and ", Shape(c),
                                                   ": tau has one element a column, C A's rows"));
  }
  return std::vector<ir::TensorType>{ContiguousType(a.dtype, {batch, rows, c.sizes[2]})};
}

void AddQrCore(OpTable& table) {
  table.Add(LapackCallOp("kiln.qr.default", 1, 3, std::nullopt, InferQr));
}

// --- the aten composites -------------------------------------------------

// value[..., :end] along `dim` (-1 or -2), or value itself when it ends there.
absl::StatusOr<int> Prefix(GraphBuilder& b, int value, int64_t dim, const ir::Dim& end) {
  const ir::TensorType type = b.type(value);
  if (type.sizes[type.rank() + dim] == end) return value;
  return b.Add("aten.slice.Tensor", {value},
               {{"dim", dim}, {"start", int64_t{0}}, {"end", end.constant}, {"step", int64_t{1}}});
}

// kiln.qr of `routine` on the matrices `operands` (the second, tau, a batch
// of vectors), all of the first's batch dims; results with them again.
absl::StatusOr<std::vector<int>> Qr(GraphBuilder& b, int routine, const std::vector<int>& operands,
                                    int64_t flags = 0) {
  const ir::TensorType a = b.type(operands[0]);
  for (size_t i = 1; i < operands.size(); ++i) {
    const ir::TensorType operand = b.type(operands[i]);
    const int matrix_rank = i == 1 ? 1 : 2;
    if (operand.rank() < matrix_rank || BatchDims(operand, matrix_rank) != BatchDims(a, 2)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the batch dims of ", Shape(operand), " do not match those of ", Shape(a)));
    }
  }
  std::vector<int> flat;
  for (size_t i = 0; i < operands.size(); ++i) {
    ASSIGN_OR_RETURN(const int value, Flatten(b, operands[i], i == 1 ? 1 : 2));
    flat.push_back(value);
  }
  ASSIGN_OR_RETURN(
      std::vector<int> results,
      b.AddNode("kiln.qr.default", flat, {{"routine", int64_t{routine}}, {"flags", flags}}));
  for (int& result : results) {
    ASSIGN_OR_RETURN(result, Unflatten(b, result, BatchDims(a, 2)));
  }
  return results;
}

// geqrf(A) -> (QR, tau).
absl::StatusOr<std::vector<int>> Geqrf(GraphBuilder& b, const ir::Node& node) {
  RETURN_IF_ERROR(RequireMatrix(b.type(node.inputs[0]), "geqrf"));
  return Qr(b, KILN_LINALG_GEQRF, {node.inputs[0]});
}

// linalg_householder_product(A, tau) -> Q.
absl::StatusOr<std::vector<int>> HouseholderProduct(GraphBuilder& b, const ir::Node& node) {
  RETURN_IF_ERROR(RequireMatrix(b.type(node.inputs[0]), "householder_product"));
  return Qr(b, KILN_LINALG_HOUSEHOLDER_PRODUCT, {node.inputs[0], node.inputs[1]});
}

// ormqr(A, tau, C, left, transpose) -> Q C, Q^T C, C Q or C Q^T, Q the
// product of tau's reflectors (A's first columns). C Q = (Q^T C^T)^T.
absl::StatusOr<std::vector<int>> Ormqr(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType a = b.type(node.inputs[0]), tau = b.type(node.inputs[1]);
  RETURN_IF_ERROR(RequireMatrix(a, "ormqr"));
  RETURN_IF_ERROR(RequireMatrix(b.type(node.inputs[2]), "ormqr"));
  if (tau.rank() < 1 || !AtLeast(a.sizes.back(), tau.sizes.back())) {
    return absl::InvalidArgumentError(absl::StrCat("ormqr: tau ", Shape(tau),
                                                   " has more elements than the reflectors ",
                                                   Shape(a), " have columns"));
  }
  ASSIGN_OR_RETURN(const int reflectors, Prefix(b, node.inputs[0], -1, tau.sizes.back()));
  const bool left = BoolArg(node, "left");
  int c = node.inputs[2];
  if (!left) {
    ASSIGN_OR_RETURN(c, Transpose(b, c));
  }
  const bool transpose = BoolArg(node, "transpose") != !left;
  ASSIGN_OR_RETURN(std::vector<int> results,
                   Qr(b, KILN_LINALG_ORMQR, {reflectors, node.inputs[1], c},
                      transpose ? KILN_LINALG_ADJOINT : 0));
  if (!left) {
    ASSIGN_OR_RETURN(results[0], Transpose(b, results[0]));
  }
  return results;
}

// linalg_qr(A, mode) -> (Q, R): "reduced" Q m x k and R k x n (k =
// min(m, n)), "complete" Q m x m and R m x n, "r" R only (Q empty).
absl::StatusOr<std::vector<int>> LinalgQr(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType a = b.type(node.inputs[0]);
  RETURN_IF_ERROR(RequireMatrix(a, "qr"));
  const std::string mode = std::get<std::string>(node.args.at("mode"));
  if (mode != "reduced" && mode != "complete" && mode != "r") {
    return absl::InvalidArgumentError(
        absl::StrCat("qr received unrecognized mode '", mode,
                     "' but expected one of 'reduced' (default), 'r', or 'complete'"));
  }
  const ir::Dim m = a.sizes[a.rank() - 2], n = a.sizes[a.rank() - 1];
  ASSIGN_OR_RETURN(const ir::Dim k, MinDim(m, n, a, "qr"));
  ASSIGN_OR_RETURN(const std::vector<int> packed, Qr(b, KILN_LINALG_GEQRF, {node.inputs[0]}));
  const bool complete = mode == "complete";
  ASSIGN_OR_RETURN(int r, Prefix(b, packed[0], -2, complete ? m : k));
  ASSIGN_OR_RETURN(r, b.Add("aten.triu.default", {r}, {{"diagonal", int64_t{0}}}));
  int q;
  if (mode == "r") {
    ASSIGN_OR_RETURN(q, b.Add("aten.zeros.default", {},
                              {{"size", std::vector<int64_t>{0}}, {"dtype", a.dtype}}));
  } else if (complete && m != k) {
    // A tall matrix's complete Q: n reflectors in the first columns of m.
    std::vector<ir::SymExpr> padding;
    for (const ir::Dim& dim : BatchDims(a, 1)) padding.push_back(ir::SymExpr::Of(dim));
    padding.push_back(ir::SymExpr::Constant(m.constant - n.constant));
    ASSIGN_OR_RETURN(const int zeros,
                     b.Add("aten.zeros.default", {}, {{"size", padding}, {"dtype", a.dtype}}));
    ASSIGN_OR_RETURN(const int square,
                     b.Add("aten.cat.default", {packed[0], zeros}, {{"dim", int64_t{-1}}}));
    ASSIGN_OR_RETURN(const std::vector<int> product,
                     Qr(b, KILN_LINALG_HOUSEHOLDER_PRODUCT, {square, packed[1]}));
    q = product[0];
  } else {
    ASSIGN_OR_RETURN(const int reflectors, Prefix(b, packed[0], -1, k));
    ASSIGN_OR_RETURN(const std::vector<int> product,
                     Qr(b, KILN_LINALG_HOUSEHOLDER_PRODUCT, {reflectors, packed[1]}));
    q = product[0];
  }
  return std::vector<int>{q, r};
}

}  // namespace

void RegisterQrOps(OpTable& table) {
  AddQrCore(table);
  auto add = [&](const char* op, int inputs, std::vector<ArgSpec> args, Decomposition decompose) {
    AddComposite(table, op, inputs, inputs, std::move(args), std::move(decompose), kLapackTypes, {},
                 "linalg");
  };
  add("aten.geqrf.default", 1, {}, Geqrf);
  add("aten.linalg_householder_product.default", 2, {}, HouseholderProduct);
  add("aten.ormqr.default", 3,
      {{"left", ArgKind::kBool, ir::ArgValue(true)},
       {"transpose", ArgKind::kBool, ir::ArgValue(false)}},
      Ormqr);
  add("aten.linalg_qr.default", 1,
      {{"mode", ArgKind::kString, ir::ArgValue(std::string("reduced"))}}, LinalgQr);
}

}  // namespace kiln::ops
