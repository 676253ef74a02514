#include "codegen/passes/verify.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "codegen/import.h"
#include "codegen/ops/complex.h"
#include "codegen/ops/op_table.h"

namespace kiln {
namespace {

std::string ShapeString(const ir::TensorType& type, const ir::Graph& graph) {
  return ir::ToString(ir::TensorType{type.dtype, type.sizes, ir::ContiguousStrides(type.sizes)},
                      graph);
}

// "<namespace>.<name>.<overload>": ATen's ops, prims, and a library's own
// (torch.library custom ops, which Kiln lacks but a graph may hold);
// anything else is not an op name.
bool IsOpName(absl::string_view name) {
  const std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  return parts.size() == 3 && !parts[0].empty() && !parts[1].empty() && !parts[2].empty();
}

absl::Status VerifyNode(const ir::Graph& graph, int index) {
  const ir::Node& node = graph.nodes[index];
  const std::string where = NodeLabel(graph, index);
  const ops::OpDef* op = ops::OpTable::Get().Find(node.op);
  const std::vector<absl::string_view> parts = absl::StrSplit(node.op, '.');
  if (op == nullptr && !IsOpName(node.op)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": '", node.op, "' is not an ATen op name (expected aten.<op>.<overload>)"));
  }
  if (op == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat(where, ": op '", node.op, "' is not supported (see docs/OPS.md)"));
  }
  if (parts[0] == "kiln") {  // what decompositions write: trusted, so never taken from a graph
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": '", node.op, "' is internal to Kiln, not an ATen op"));
  }
  const int num_inputs = static_cast<int>(node.inputs.size());
  if (num_inputs < op->min_inputs || num_inputs > op->max_inputs) {
    const std::string expected = op->min_inputs == op->max_inputs
                                     ? absl::StrCat(op->min_inputs)
                                     : absl::StrCat(op->min_inputs, " to ", op->max_inputs);
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expects ", expected, " tensor inputs, got ", num_inputs));
  }
  auto filled = ops::WithDefaults(node, *op);
  if (!filled.ok()) {
    return absl::Status(filled.status().code(),
                        absl::StrCat(where, ": ", filled.status().message()));
  }
  ops::InputTypes inputs;
  for (int input : node.inputs) inputs.push_back(&graph.values[input]);
  // A complex value: the op's complex rule says what it makes (a rule's
  // rewrite into real ops runs later, passes/split_complex.h).
  const ops::ComplexRule* complex_rule = nullptr;
  if (ops::TouchesComplex(graph, index)) {
    complex_rule = ops::FindComplexRule(node.op);
    if (complex_rule == nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          where, ": op '", node.op, "' on complex values is not supported yet (see docs/OPS.md)"));
    }
  }
  auto implied = complex_rule ? complex_rule->infer(*filled, inputs) : op->infer(*filled, inputs);
  if (!implied.ok()) {
    return absl::Status(implied.status().code(),
                        absl::StrCat(where, ": ", implied.status().message()));
  }
  if (op->check_bounds && complex_rule == nullptr) {
    const absl::Status bounded = op->check_bounds(graph, *filled, inputs);
    if (!bounded.ok()) {
      return absl::Status(bounded.code(), absl::StrCat(where, ": ", bounded.message()));
    }
  }
  if (implied->size() != node.outputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": declares ", node.outputs.size(),
                                                   " results, the op has ", implied->size()));
  }
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    const ir::TensorType& declared = graph.values[node.outputs[k]];
    const ir::TensorType& expected = (*implied)[k];
    if (declared.dtype != expected.dtype || declared.sizes != expected.sizes) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": result ", k, " is declared ", ShapeString(declared, graph),
                       " but its inputs imply ", ShapeString(expected, graph)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyGraph(const ir::Graph& graph) {
  // Every op Kiln lacks at once, so a user sees the whole list in one try
  // (a convolution net lacks three). One op: its first node, as any other
  // error names its node.
  std::map<std::string, std::vector<int>> unsupported;  // op -> its nodes
  std::vector<std::string> order;                       // first appearance
  for (int n = 0; n < static_cast<int>(graph.nodes.size()); ++n) {
    const std::string& op = graph.nodes[n].op;
    if (ops::OpTable::Get().Find(op) != nullptr || !IsOpName(op)) continue;
    std::vector<int>& nodes = unsupported[op];
    if (nodes.empty()) order.push_back(op);
    nodes.push_back(n);
  }
  if (order.size() > 1) {
    std::vector<std::string> listed;
    for (const std::string& op : order) {
      const std::vector<int>& nodes = unsupported[op];
      listed.push_back(absl::StrCat(
          "'", op, "' (", NodeLabel(graph, nodes[0]),
          nodes.size() > 1 ? absl::StrCat(" and ", nodes.size() - 1, " more") : "", ")"));
    }
    return absl::UnimplementedError(absl::StrCat(
        order.size(), " ops are not supported (see docs/OPS.md): ", absl::StrJoin(listed, ", ")));
  }
  for (int n = 0; n < static_cast<int>(graph.nodes.size()); ++n) {
    const absl::Status status = VerifyNode(graph, n);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace kiln
