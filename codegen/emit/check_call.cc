#include "codegen/emit/check_call.h"

#include "abi/kiln_abi.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "codegen/emit/c_text.h"
#include "codegen/ops/op_table.h"

namespace kiln {

absl::StatusOr<std::string> EmitCheck(const Kernel& kernel, const EmitInputs& in) {
  const ir::Graph& graph = in.graph;
  const ir::Node& node = graph.nodes[graph.producer[kernel.value]];
  if (kernel.reads.size() != 1) {
    return absl::InternalError(
        absl::StrCat("a value check reads ", kernel.reads.size(), " operands, not 1"));
  }
  const Access& access = kernel.reads[0];
  const ir::TensorType& condition = graph.values[access.value];
  const Linear offset = Offset(MemoryLayout(graph, in.program, access.value), access.map);
  // Element i's offset: its coordinates from i, innermost dim first.
  std::string count = "1", position = SymC(offset.constant);
  for (int64_t d = condition.rank() - 1; d >= 0; --d) {
    const std::string extent = Extent(condition.sizes[d]);
    absl::StrAppend(&position, " + (i / (", count, ")) % (", extent, ") * (",
                    SymC(offset.coefficients[d]), ")");
    count = absl::StrCat(count, " * (", extent, ")");
  }
  const std::string& error = std::get<std::string>(ops::Arg(node, "error"));
  const int code = error == "ValueError"   ? KILN_CHECK_VALUE_ERROR
                   : error == "IndexError" ? KILN_CHECK_INDEX_ERROR
                                           : KILN_CHECK_RUNTIME_ERROR;
  return absl::StrCat("  for (kiln_int64 i = 0; i < ", count, "; ++i) {\n    if (!",
                      StorageName(in.plan.storage_of[access.value]), "[", position,
                      "]) {\n      rt->check_error(rt->context, ", code, ", \"",
                      absl::CEscape(std::get<std::string>(ops::Arg(node, "message"))),
                      "\");\n      return KILN_RUN_CHECK_ERROR;\n    }\n  }\n  ",
                      StorageName(in.plan.storage_of[kernel.value]), "[0] = 0;\n");
}

}  // namespace kiln
