#include "codegen/passes/lower.h"

#include "absl/strings/str_cat.h"
#include "codegen/import.h"
#include "codegen/ops/op_table.h"

namespace kiln {

absl::StatusOr<ir::LoopProgram> Lower(const ir::Graph& graph) {
  ir::LoopProgram program;
  program.definitions.resize(graph.values.size());
  for (int n = 0; n < static_cast<int>(graph.nodes.size()); ++n) {
    const ir::Node& node = graph.nodes[n];
    const ops::OpDef* op = ops::OpTable::Get().Find(node.op);
    if (op == nullptr) return absl::InternalError("lower before verify: unknown op");
    auto definitions = op->lower(graph, node);
    if (!definitions.ok()) {
      return absl::Status(definitions.status().code(),
                          absl::StrCat(NodeLabel(graph, n), ": ", definitions.status().message()));
    }
    if (definitions->size() != node.outputs.size()) {
      return absl::InternalError(absl::StrCat(NodeLabel(graph, n), ": lowering made ",
                                              definitions->size(), " definitions"));
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      (*definitions)[k].node = n;
      program.definitions[node.outputs[k]] = std::move((*definitions)[k]);
    }
  }
  return program;
}

}  // namespace kiln
