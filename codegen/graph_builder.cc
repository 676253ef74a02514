#include "codegen/graph_builder.h"

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<std::vector<int>> GraphBuilder::AddNode(const std::string& op_name,
                                                       std::vector<int> inputs,
                                                       std::map<std::string, ir::ArgValue> args) {
  const ops::OpDef* op = ops::OpTable::Get().Find(op_name);
  if (op == nullptr)
    return absl::InternalError(absl::StrCat("decomposition uses unknown ", op_name));
  ir::Node node;
  node.op = op_name;
  node.inputs = std::move(inputs);
  node.args = std::move(args);
  node.name = absl::StrCat(prefix_, "/", op_name.substr(5, op_name.rfind('.') - 5));
  auto filled = ops::WithDefaults(node, *op);
  if (!filled.ok()) {
    return absl::InternalError(
        absl::StrCat("decomposition builds a bad ", op_name, ": ", filled.status().message()));
  }
  ops::InputTypes types;
  for (int input : filled->inputs) types.push_back(&graph_.values[input]);
  auto results = op->infer(*filled, types);
  if (!results.ok()) {
    return absl::Status(results.status().code(),
                        absl::StrCat(node.name, ": ", results.status().message()));
  }
  const int index = static_cast<int>(graph_.nodes.size());
  for (ir::TensorType& type : *results)
    filled->outputs.push_back(graph_.AddValue(std::move(type), index));
  std::vector<int> outputs = filled->outputs;
  graph_.nodes.push_back(*std::move(filled));
  return outputs;
}

absl::StatusOr<int> GraphBuilder::Add(const std::string& op, std::vector<int> inputs,
                                      std::map<std::string, ir::ArgValue> args) {
  ASSIGN_OR_RETURN(std::vector<int> outputs, AddNode(op, std::move(inputs), std::move(args)));
  if (outputs.size() != 1) return absl::InternalError(absl::StrCat(op, " has several results"));
  return outputs[0];
}

absl::StatusOr<int> GraphBuilder::Cast(int value, ir::DType dtype) {
  if (graph_.values[value].dtype == dtype) return value;
  return Add("aten._to_copy.default", {value}, {{"dtype", dtype}});
}

}  // namespace kiln
