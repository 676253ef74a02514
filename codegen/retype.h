// Re-typing a graph for other input sizes: what kilnd compiles for a
// CompileRequest with input_layouts, a specialization a client's guards do
// not cover (a new batch size, a dim made symbolic, other strides) without
// tracing again. Substituting constants for symbols needs no op table:
// proto/specialize.h.
#ifndef KILN_CODEGEN_RETYPE_H_
#define KILN_CODEGEN_RETYPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/graph.pb.h"
#include "proto/specialize.h"

namespace kiln {

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

}  // namespace kiln

#endif  // KILN_CODEGEN_RETYPE_H_
