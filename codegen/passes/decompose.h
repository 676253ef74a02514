// Pass: decompose (runs after keying, first in GenerateCode).
//
// Requires: a verified, canonical graph.
// Guarantees: every node is a core op (one the op table can lower); each
// composite (softmax, layer_norm, addmm, gelu, ...) is replaced by the core
// ops its `decompose` function builds, repeatedly until none is left. Dead
// nodes are dropped again afterwards. Types of replacement values come from
// the op table, so later passes can trust graph.values as before.
#ifndef KILN_CODEGEN_PASSES_DECOMPOSE_H_
#define KILN_CODEGEN_PASSES_DECOMPOSE_H_

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kiln {

absl::StatusOr<ir::Graph> Decompose(const ir::Graph& graph);

}  // namespace kiln

#endif  // KILN_CODEGEN_PASSES_DECOMPOSE_H_
