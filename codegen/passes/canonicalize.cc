#include "codegen/passes/canonicalize.h"

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// Post-order walk from the outputs, then from the effects (OpDef::effect)
// in node order: a node is emitted once all the nodes its operands come
// from are. Iterative, so deep graphs cannot overflow the stack.
std::vector<int> LiveNodeOrder(const ir::Graph& graph) {
  std::vector<int> order;
  std::vector<char> state(graph.nodes.size(), 0);  // 0 new, 1 open, 2 done
  std::vector<int> roots;
  for (int output : graph.outputs) roots.push_back(graph.producer[output]);
  for (int n = 0; n < static_cast<int>(graph.nodes.size()); ++n) {
    const ops::OpDef* op = ops::OpTable::Get().Find(graph.nodes[n].op);
    if (op != nullptr && op->effect) roots.push_back(n);
  }
  for (const int root : roots) {
    if (root < 0 || state[root] != 0) continue;
    std::vector<std::pair<int, size_t>> stack = {{root, 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto& [node, next_input] = stack.back();
      const std::vector<int>& inputs = graph.nodes[node].inputs;
      if (next_input < inputs.size()) {
        const int producer = graph.producer[inputs[next_input++]];
        if (producer >= 0 && state[producer] == 0) {
          state[producer] = 1;
          stack.push_back({producer, 0});
        }
      } else {
        state[node] = 2;
        order.push_back(node);
        stack.pop_back();
      }
    }
  }
  return order;
}

}  // namespace

absl::StatusOr<ir::Graph> Canonicalize(const ir::Graph& graph) {
  std::vector<int> new_value;
  ir::Graph result = ir::WithInputsOf(graph, new_value);
  for (int old_index : LiveNodeOrder(graph)) {
    const ir::Node& old_node = graph.nodes[old_index];
    const ops::OpDef* op = ops::OpTable::Get().Find(old_node.op);
    if (op == nullptr) return absl::InternalError("canonicalize before verify: unknown op");
    ASSIGN_OR_RETURN(ir::Node node, ops::WithDefaults(old_node, *op));
    result.AppendCopy(graph, std::move(node), new_value);
  }
  for (int output : graph.outputs) result.outputs.push_back(new_value[output]);

  // Rename symbols by first occurrence: values (sizes, then strides) in the
  // new order, then symbolic arguments in node order. Bounds go along.
  std::vector<int> new_symbol(graph.symbols.size(), -1);
  ir::ForEachSymbolUse(result, [&](int& symbol) {
    if (new_symbol[symbol] < 0) {
      new_symbol[symbol] = static_cast<int>(result.symbols.size());
      result.symbols.push_back(absl::StrCat("s", result.symbols.size()));
      result.bounds.push_back(graph.bounds[symbol]);
    }
    symbol = new_symbol[symbol];
  });
  return result;
}

}  // namespace kiln
