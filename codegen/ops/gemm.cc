// GEMM-class ops: calls through the runtime table (client/runtime), which
// reaches a well-kept BLAS. Operands may have any strides; the runtime
// handles transposed layouts without a copy.
#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

absl::StatusOr<std::vector<ir::TensorType>> InferMm(const ir::Node&, const InputTypes& inputs) {
  const ir::TensorType& a = *inputs[0];
  const ir::TensorType& b = *inputs[1];
  if (a.rank() != 2 || b.rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("mm expects two matrices, got ranks ", a.rank(), " and ", b.rank()));
  }
  if (a.dtype != b.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("mm operands have dtypes ", ir::DTypeName(a.dtype),
                                                   " and ", ir::DTypeName(b.dtype)));
  }
  if (a.dtype != ir::DType::kFloat32 && a.dtype != ir::DType::kFloat64) {
    return absl::UnimplementedError(
        absl::StrCat("mm of dtype ", ir::DTypeName(a.dtype), " is not supported yet"));
  }
  if (a.sizes[1] != b.sizes[0]) {
    return absl::InvalidArgumentError(absl::StrCat("mm shapes [", a.sizes[0].constant, ", ",
                                                   a.sizes[1].constant, "] and [", b.sizes[0].constant,
                                                   ", ", b.sizes[1].constant, "] do not match"));
  }
  ir::TensorType result;
  result.dtype = a.dtype;
  result.sizes = {a.sizes[0], b.sizes[1]};
  result.strides = ir::ContiguousStrides(result.sizes);
  return std::vector<ir::TensorType>{std::move(result)};
}

}  // namespace

void RegisterGemmOps(OpTable& table) {
  OpDef mm;
  mm.name = "aten.mm.default";
  mm.family = "gemm";
  mm.dtypes = {ir::DType::kFloat32, ir::DType::kFloat64};
  mm.min_inputs = mm.max_inputs = 2;
  mm.infer = InferMm;
  mm.lower = [](const ir::Graph&,
                const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kExtern;
    definition.function = "mm";
    definition.operands = node.inputs;
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(mm));
}

}  // namespace kiln::ops
