// Appends nodes to an ir::Graph with their result types inferred from the op
// table: how decompositions (ops/composites.cc) write their replacement
// subgraphs.
#ifndef KILN_CODEGEN_GRAPH_BUILDER_H_
#define KILN_CODEGEN_GRAPH_BUILDER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kiln {

class GraphBuilder {
 public:
  explicit GraphBuilder(ir::Graph& graph) : graph_(graph) {}

  // Adds `op(inputs, args)` (defaults filled in, checked like the verifier
  // checks user nodes) and returns its result values.
  absl::StatusOr<std::vector<int>> AddNode(const std::string& op, std::vector<int> inputs,
                                           std::map<std::string, ir::ArgValue> args = {});
  // The same, for an op with exactly one result.
  absl::StatusOr<int> Add(const std::string& op, std::vector<int> inputs,
                          std::map<std::string, ir::ArgValue> args = {});

  // `value` as `dtype`: itself when it has that dtype, else a _to_copy.
  absl::StatusOr<int> Cast(int value, ir::DType dtype);

  // By value: adding nodes may move the graph's values.
  ir::TensorType type(int value) const { return graph_.values[value]; }
  const ir::Graph& graph() const { return graph_; }

  // The name replacement nodes get ("_softmax/exp_nonpositive"), for explain.
  void set_name_prefix(std::string prefix) { prefix_ = std::move(prefix); }

 private:
  ir::Graph& graph_;
  std::string prefix_;
};

}  // namespace kiln

#endif  // KILN_CODEGEN_GRAPH_BUILDER_H_
