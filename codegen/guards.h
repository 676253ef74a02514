// Guards: what an artifact assumes about its inputs.
#ifndef KILN_CODEGEN_GUARDS_H_
#define KILN_CODEGEN_GUARDS_H_

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "proto/guards.pb.h"

namespace kiln {

// The guards of a graph: each input's exact dtype, sizes (constants or
// symbols), strides and requires_grad, and its symbols' bounds as relations
// in canonical form (guards.proto).
kiln::v1::Guards ExactGuards(const ir::Graph& graph);

// The guards an artifact is compiled for: `requested`, or the exact guards
// when it is empty. Requested guards must equal the exact ones (sizes and
// relations are stated in the graph itself): Unimplemented otherwise,
// InvalidArgument when they do not even have one guard per input.
absl::StatusOr<kiln::v1::Guards> ResolveGuards(const ir::Graph& graph,
                                               const kiln::v1::Guards& requested);

}  // namespace kiln

#endif  // KILN_CODEGEN_GUARDS_H_
