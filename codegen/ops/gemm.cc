// GEMM-class ops: calls through the runtime table (client/runtime), which
// reaches a well-kept BLAS. Operands may have any strides (a transpose or an
// expand reaches the BLAS as strides, never as a copy).
//
// The core ops are kiln.mm / kiln.bmm (float32 and float64, what the BLAS
// has); aten.mm and aten.bmm are composites over them, so that 16-bit
// floats multiply in float32 and round once. addmm, baddbmm and linear are
// composites over these (composites.cc), addbmm over addmm.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

absl::StatusOr<std::vector<ir::TensorType>> InferMatmul(bool batched, const InputTypes& inputs) {
  const ir::TensorType& a = *inputs[0];
  const ir::TensorType& b = *inputs[1];
  const int rank = batched ? 3 : 2;
  if (a.rank() != rank || b.rank() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(batched ? "bmm" : "mm", " expects rank-", rank,
                                                   " operands, got ranks ", a.rank(), " and ",
                                                   b.rank()));
  }
  if (a.dtype != b.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("operands have dtypes ", ir::DTypeName(a.dtype),
                                                   " and ", ir::DTypeName(b.dtype)));
  }
  if (a.dtype != ir::DType::kFloat32 && a.dtype != ir::DType::kFloat64) {
    return absl::UnimplementedError(absl::StrCat("matrix products of dtype ",
                                                 ir::DTypeName(a.dtype), " are not supported yet"));
  }
  const int k = rank - 1;
  if (a.sizes[k] != b.sizes[k - 1] || (batched && a.sizes[0] != b.sizes[0])) {
    auto shape = [](const ir::TensorType& t) {
      std::string text;
      for (const ir::Dim& dim : t.sizes) {
        absl::StrAppend(&text, text.empty() ? "" : ", ",
                        ir::ToString(ir::SymExpr::Of(dim), ir::Graph()));
      }
      return absl::StrCat("[", text, "]");
    };
    return absl::InvalidArgumentError(
        absl::StrCat("shapes ", shape(a), " and ", shape(b), " cannot be multiplied"));
  }
  std::vector<ir::Dim> sizes;
  if (batched) sizes.push_back(a.sizes[0]);
  sizes.push_back(a.sizes[k - 1]);
  sizes.push_back(b.sizes[k]);
  return std::vector<ir::TensorType>{ContiguousType(a.dtype, std::move(sizes))};
}

void AddMatmul(OpTable& table, const std::string& op, bool batched) {
  OpDef def;
  def.name = op;
  def.family = "gemm";
  def.dtypes = {ir::DType::kFloat32, ir::DType::kFloat64};
  def.min_inputs = def.max_inputs = 2;
  def.infer = [batched](const ir::Node&, const InputTypes& inputs) {
    return InferMatmul(batched, inputs);
  };
  def.lower = [batched](const ir::Graph&,
                        const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kExtern;
    definition.function = batched ? "bmm" : "mm";
    definition.operands = node.inputs;
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

// aten.mm / aten.bmm: the core op, in float32 for 16-bit floats.
absl::StatusOr<std::vector<int>> Matmul(GraphBuilder& b, const ir::Node& node) {
  const std::string core = node.op == "aten.mm.default" ? "kiln.mm.default" : "kiln.bmm.default";
  const ir::DType dtype = b.type(node.inputs[0]).dtype;
  if (dtype != ir::DType::kFloat16 && dtype != ir::DType::kBFloat16) {
    ASSIGN_OR_RETURN(const int product, b.Add(core, node.inputs));
    return std::vector<int>{product};
  }
  std::vector<int> wide;
  for (int input : node.inputs) {
    if (b.type(input).dtype != dtype) {
      return absl::InvalidArgumentError(absl::StrCat("operands have dtypes ", ir::DTypeName(dtype),
                                                     " and ", ir::DTypeName(b.type(input).dtype)));
    }
    ASSIGN_OR_RETURN(const int converted,
                     b.Add("aten._to_copy.default", {input}, {{"dtype", ir::DType::kFloat32}}));
    wide.push_back(converted);
  }
  ASSIGN_OR_RETURN(const int product, b.Add(core, wide));
  ASSIGN_OR_RETURN(const int rounded,
                   b.Add("aten._to_copy.default", {product}, {{"dtype", dtype}}));
  return std::vector<int>{rounded};
}

// addbmm(self, batch1 [B, n, m], batch2 [B, m, p], beta, alpha) = beta *
// self + alpha * sum over b of batch1[b] @ batch2[b]: one addmm of the
// batches laid side by side, [n, B * m] @ [B * m, p].
absl::StatusOr<std::vector<int>> Addbmm(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType batch1 = b.type(node.inputs[1]), batch2 = b.type(node.inputs[2]);
  if (batch1.rank() != 3 || batch2.rank() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("addbmm takes 3-D batches, got ", Shape(batch1), " and ", Shape(batch2)));
  }
  if (batch1.sizes[0] != batch2.sizes[0] || batch1.sizes[2] != batch2.sizes[1]) {
    return absl::InvalidArgumentError(absl::StrCat("addbmm's batches ", Shape(batch1), " and ",
                                                   Shape(batch2), " cannot be multiplied"));
  }
  const ir::SymExpr inner = ir::SymExpr::Of(batch1.sizes[0]) * ir::SymExpr::Of(batch1.sizes[2]);
  ASSIGN_OR_RETURN(const int side_by_side, b.Add("aten.permute.default", {node.inputs[1]},
                                                 {{"dims", std::vector<int64_t>{1, 0, 2}}}));
  ASSIGN_OR_RETURN(
      const int left,
      b.Add("aten.reshape.default", {side_by_side},
            {{"size", std::vector<ir::SymExpr>{ir::SymExpr::Of(batch1.sizes[1]), inner}}}));
  ASSIGN_OR_RETURN(
      const int right,
      b.Add("aten.reshape.default", {node.inputs[2]},
            {{"size", std::vector<ir::SymExpr>{inner, ir::SymExpr::Of(batch2.sizes[2])}}}));
  std::map<std::string, ir::ArgValue> scale = {{"beta", node.args.at("beta")},
                                               {"alpha", node.args.at("alpha")}};
  ASSIGN_OR_RETURN(const int result,
                   b.Add("aten.addmm.default", {node.inputs[0], left, right}, std::move(scale)));
  return std::vector<int>{result};
}

}  // namespace

void RegisterGemmOps(OpTable& table) {
  AddMatmul(table, "kiln.mm.default", /*batched=*/false);
  AddMatmul(table, "kiln.bmm.default", /*batched=*/true);
  for (const char* op : {"aten.mm.default", "aten.bmm.default"}) {
    AddComposite(table, op, 2, 2, {}, Matmul, kFloatTypes, {ir::DType::kBool}, "gemm");
  }
  AddComposite(table, "aten.addbmm.default", 3, 3,
               {{"beta", ArgKind::kScalar, ir::ArgValue(int64_t{1})},
                {"alpha", ArgKind::kScalar, ir::ArgValue(int64_t{1})}},
               Addbmm, kFloatTypes, {ir::DType::kBool}, "gemm");
}

}  // namespace kiln::ops
