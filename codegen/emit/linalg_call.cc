#include "codegen/emit/linalg_call.h"

#include <vector>

#include "abi/kiln_abi.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/emit/c_text.h"
#include "codegen/ops/op_table.h"

namespace kiln {

absl::StatusOr<std::string> EmitLinalgCall(const Kernel& kernel, const EmitInputs& in) {
  const ir::Graph& graph = in.graph;
  const ir::Node& node = graph.nodes[graph.producer[kernel.value]];
  const int64_t routine = ops::IntArg(node, "routine");
  const ir::TensorType& a = graph.values[node.inputs[0]];
  const ir::TensorType& b = graph.values[node.inputs.back()];
  // A is m x n; k is the last operand's last dim (B's columns, or tau's
  // length for a product of reflectors).
  const std::string m = Extent(a.sizes[1]), n = Extent(a.sizes[2]);
  const std::string k =
      routine == KILN_LINALG_LU || node.inputs.size() == 1 ? "0" : Extent(b.sizes.back());
  std::vector<std::string> pointers, strides;
  for (const Access& access : kernel.reads) {
    const Linear offset = Offset(MemoryLayout(graph, in.program, access.value), access.map);
    pointers.push_back(
        absl::StrCat(StorageName(in.plan.storage_of[access.value]), " + ", SymC(offset.constant)));
    std::vector<std::string> dims;
    for (const ir::SymExpr& stride : offset.coefficients) dims.push_back(SymC(stride));
    dims.resize(3, "0");
    strides.push_back(absl::StrCat("{", absl::StrJoin(dims, ", "), "}"));
  }
  if (pointers.size() != node.inputs.size()) {
    return absl::InternalError(
        absl::StrCat("a LAPACK call reads ", pointers.size(), " operands of ", node.inputs.size()));
  }
  std::vector<std::string> results(node.outputs.size(), "0");
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == kernel.value) {
      results[i] = StorageName(in.plan.storage_of[kernel.value]);
    }
  }
  return absl::StrCat(
      "  {\n    const kiln_linalg call = {", routine, ", ", a.dtype == ir::DType::kFloat64 ? 1 : 0,
      ", ", Extent(a.sizes[0]), ", ", m, ", ", n, ", ", k, ", ", ops::IntArg(node, "flags"), ", {",
      absl::StrJoin(strides, ", "), "}};\n    const void* const operands[] = {",
      absl::StrJoin(pointers, ", "), "};\n    void* const results[] = {",
      absl::StrJoin(results, ", "),
      "};\n    if (rt->linalg(rt->context, &call, operands, results) != 0) return 2;\n  }\n");
}

absl::StatusOr<std::string> EmitLinalgCheck(const Kernel& kernel, const EmitInputs& in) {
  const ir::Graph& graph = in.graph;
  const ir::Node& node = graph.nodes[graph.producer[kernel.value]];
  if (kernel.reads.size() != 1) {
    return absl::InternalError(
        absl::StrCat("a LAPACK check reads ", kernel.reads.size(), " operands, not 1"));
  }
  const Access& access = kernel.reads[0];
  const ir::TensorType& info = graph.values[access.value];
  const Linear offset = Offset(MemoryLayout(graph, in.program, access.value), access.map);
  // Element i's offset: its coordinates from i, innermost dim first.
  std::string count = "1", position = SymC(offset.constant);
  for (int64_t d = info.rank() - 1; d >= 0; --d) {
    const std::string extent = Extent(info.sizes[d]);
    absl::StrAppend(&position, " + (i / (", count, ")) % (", extent, ") * (",
                    SymC(offset.coefficients[d]), ")");
    count = absl::StrCat(count, " * (", extent, ")");
  }
  const bool is_matrix = ops::BoolArg(node, "is_matrix");
  return absl::StrCat(
      "  for (kiln_int64 i = 0; i < ", count,
      "; ++i) {\n    const kiln_int32 info = ", StorageName(in.plan.storage_of[access.value]), "[",
      position, "];\n    if (info != 0) {\n      rt->linalg_error(rt->context, \"",
      std::get<std::string>(ops::Arg(node, "api_name")), "\", ", is_matrix ? "-1" : "i",
      ", info);\n      return KILN_RUN_LINALG_ERROR;\n    }\n  }\n  ",
      StorageName(in.plan.storage_of[kernel.value]), "[0] = 0;\n");
}

}  // namespace kiln
