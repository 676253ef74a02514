#include "codegen/passes/lower.h"

#include "absl/strings/str_cat.h"
#include "codegen/import.h"
#include "codegen/ops/op_table.h"

namespace kiln {

absl::StatusOr<ir::LoopProgram> Lower(const ir::Graph& graph) {
  ir::LoopProgram program;
  program.definitions.resize(graph.values.size());
  // Symbolic sizes only in the leading dim: then every stride and offset is
  // a constant and only extents depend on symbols.
  for (size_t v = 0; v < graph.values.size(); ++v) {
    const ir::TensorType& type = graph.values[v];
    for (size_t d = 1; d < type.sizes.size(); ++d) {
      if (type.sizes[d].is_symbolic()) {
        const int node = graph.producer[v];
        return absl::UnimplementedError(absl::StrCat(
            node >= 0 ? NodeLabel(graph, node) : absl::StrCat("input %", v), ": dim ", d,
            " of its result is symbolic; only leading dims may be symbolic"));
      }
    }
  }
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
      const ir::Definition& definition = (*definitions)[k];
      if (definition.kind == ir::Definition::Kind::kReduction) {
        // Reduced extents are constants: reducing over a symbolic dim would
        // need a symbolic extent.
        const int out_rank = static_cast<int>(graph.values[node.outputs[k]].rank());
        for (const ir::Expr& expr : definition.exprs) {
          if (expr.kind != ir::Expr::Kind::kLoad) continue;
          const ir::TensorType& loaded = graph.values[expr.value];
          for (int r = 0; r < expr.index.num_coordinates(); ++r) {
            if (!loaded.sizes[r].is_symbolic()) continue;
            for (int c = out_rank; c < expr.index.num_variables; ++c) {
              if (expr.index.coefficients[r][c] != 0) {
                return absl::UnimplementedError(absl::StrCat(
                    NodeLabel(graph, n), ": reducing over a symbolic dim is not supported yet"));
              }
            }
          }
        }
      }
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      (*definitions)[k].node = n;
      program.definitions[node.outputs[k]] = std::move((*definitions)[k]);
    }
  }
  return program;
}

}  // namespace kiln
