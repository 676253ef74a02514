// Re-typing a graph for other input sizes: what a client needs to ask for a
// specialization its guards do not cover (a new batch size, or a dim made
// symbolic) without tracing again.
#ifndef KILN_CODEGEN_RETYPE_H_
#define KILN_CODEGEN_RETYPE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/graph.pb.h"

namespace kiln {

// Whether `dims` are the `declared` ones, symbol for symbol.
bool SameDims(const google::protobuf::RepeatedPtrField<kiln::v1::Dim>& declared,
              const std::vector<kiln::v1::Dim>& dims);

// One input's new type: its sizes, and its strides in elements (each a
// constant or a product of symbols its sizes name; none: contiguous).
struct InputLayout {
  std::vector<kiln::v1::Dim> sizes;
  std::vector<kiln::v1::Dim> strides;
};

// `graph` with input i's type laid out as `inputs[i]` (dtype kept) and
// every node's declared result types recomputed by the op table. Ids, names
// and arguments are kept. Fails (InvalidArgument or Unimplemented, naming
// the node) when an argument bakes in an old size (a view to [32, 64], say)
// or the new sizes or strides are not supported. A symbol that the new
// sizes make constant is replaced in symbolic arguments (a view to [8, S,
// 32]) too; relations on symbols that no input keeps are dropped.
absl::StatusOr<kiln::v1::Graph> Retype(const kiln::v1::Graph& graph,
                                       const std::vector<InputLayout>& inputs);

// The same with sizes alone: an input whose sizes change becomes
// contiguous, one whose sizes stay keeps its declared strides (a transposed
// weight stays transposed).
absl::StatusOr<kiln::v1::Graph> Retype(const kiln::v1::Graph& graph,
                                       const std::vector<std::vector<kiln::v1::Dim>>& input_sizes);

// The value each symbol takes at these input sizes (input i's dims, in
// order): size / multiplier for every input dim that names a symbol and
// divides whole.
std::map<std::string, int64_t> SymbolValues(const kiln::v1::Graph& graph,
                                            const std::vector<std::vector<int64_t>>& input_sizes);

// `graph` with every dim and symbolic argument naming a symbol in `values`
// (or a symbol the graph states equal to one) made constant: a static
// specialization, such as a symbolic graph's size-1 version. Relations on
// the fixed symbols go.
kiln::v1::Graph Specialize(kiln::v1::Graph graph, std::map<std::string, int64_t> values);

}  // namespace kiln

#endif  // KILN_CODEGEN_RETYPE_H_
