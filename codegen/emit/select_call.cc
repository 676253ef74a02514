#include "codegen/emit/select_call.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"

namespace kiln {

absl::StatusOr<std::string> EmitSelectCall(const Kernel& kernel, const EmitInputs& in) {
  static const auto* const selects = new std::map<std::string, const char*>{
      {"sort", "KILN_SELECT_SORT"},           {"topk", "KILN_SELECT_TOPK"},
      {"kthvalue", "KILN_SELECT_KTHVALUE"},   {"median", "KILN_SELECT_MEDIAN"},
      {"nanmedian", "KILN_SELECT_NANMEDIAN"}, {"mode", "KILN_SELECT_MODE"}};
  static const auto* const elements =
      new std::map<ir::DType, const char*>{{ir::DType::kFloat32, "KILN_ELEMENT_F32"},
                                           {ir::DType::kFloat64, "KILN_ELEMENT_F64"},
                                           {ir::DType::kInt64, "KILN_ELEMENT_I64"},
                                           {ir::DType::kBool, "KILN_ELEMENT_BOOL"}};
  const ir::Graph& graph = in.graph;
  const ir::Node& node = graph.nodes[graph.producer[kernel.value]];
  const Access& x = kernel.reads[0];
  const ir::TensorType& type = graph.values[x.value];
  const std::string& select = std::get<std::string>(ops::Arg(node, "select"));
  const auto which = selects->find(select);
  const auto element = elements->find(type.dtype);
  if (which == selects->end() || element == elements->end() || kernel.reads.size() != 1) {
    return absl::InternalError(absl::StrCat("select_rows '", select, "' of ",
                                            ir::DTypeName(type.dtype), ", ", kernel.reads.size(),
                                            " operands"));
  }
  const ir::TensorType& rows = graph.values[node.inputs[0]];
  const Linear offset = Offset(MemoryLayout(graph, in.program, x.value), x.map);
  return absl::StrCat(
      "  {\n    const kiln_select select = {", which->second, ", ", element->second, ", ",
      Extent(rows.sizes[0]), ", ", Extent(rows.sizes[1]), ", ", SymC(offset.coefficients[0]), ", ",
      SymC(offset.coefficients[1]), ", ", ops::IntArg(node, "k"), ", ",
      ops::BoolArg(node, "descending") ? 1 : 0, ", ", ops::BoolArg(node, "sorted") ? 1 : 0, "};\n",
      "    rt->select_rows(rt->context, &select, ", StorageName(in.plan.storage_of[x.value]), " + ",
      SymC(offset.constant), ", ", StorageName(in.plan.storage_of[kernel.value]), ");\n  }\n");
}

}  // namespace kiln
