// Pass: split complex (first in GenerateCode, before decompose).
//
// Requires: a verified graph.
// Guarantees: no value is complex. Each complex value of sizes [d...] is
// replaced by its pairs, a real value [d..., 2] of its part type with the
// same memory (a graph input or output keeps its place: torch stores
// complex tensors as interleaved pairs); each node that reads or makes a
// complex value is replaced by the real ops its rule builds
// (ops/complex.h). A graph without complex values comes back unchanged.
#ifndef KILN_CODEGEN_PASSES_SPLIT_COMPLEX_H_
#define KILN_CODEGEN_PASSES_SPLIT_COMPLEX_H_

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kiln {

absl::StatusOr<ir::Graph> SplitComplex(const ir::Graph& graph);

}  // namespace kiln

#endif  // KILN_CODEGEN_PASSES_SPLIT_COMPLEX_H_
