// Pass: transpose linear pairs (runs after keying, after decompose).
//
// Runs a pair of linear layers with elementwise ops between them
// (nn.Linear, activation, nn.Linear: a transformer's feed-forward block) in
// transposed space when the batch is small:
//
//   G = f(x · W1ᵀ),  C = G · W2ᵀ    becomes    Gᵀ = f(W1 · xᵀ),  Cᵀ = W2 · Gᵀ
//
// and C is read as a view of Cᵀ. Both weights are then the left operand,
// row-major as nn.Linear stores them, and neither product reads a
// transposed weight (as G · W2ᵀ, the runtime copies W2 first). Measured
// (docs/BENCHMARKS.md, "GEMM choices"): ahead up to a batch as large as the
// narrowest of the three widths (1.02-1.75x on both products); past it the
// products gain at most 4% and reading C back through the transposed view
// costs more. So: when the batch is at most the narrowest width; a symbolic
// batch when its upper bound (a relation) is.
//
// Requires: a core graph (after Decompose).
// Guarantees: each rewritten pair is float32 with static widths (the batch
// may be symbolic), its intermediate
// values read by nothing else, its weights contiguous; every op between
// the products is of the "pointwise" family (elementwise over broadcast
// operands: transposing the operands, expanded to G's shape unless 0-d,
// and the result computes the same elements); no view reads C (it becomes
// a transposed view). Other nodes are copied as they are. The products sum
// in another order (OpenBLAS's blocking), within float32 rounding.
#ifndef KILN_CODEGEN_PASSES_TRANSPOSE_LINEAR_H_
#define KILN_CODEGEN_PASSES_TRANSPOSE_LINEAR_H_

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kiln {

// `graph` (a core graph: after Decompose) with each such pair rewritten.
absl::StatusOr<ir::Graph> TransposeLinearPairs(const ir::Graph& graph);

}  // namespace kiln

#endif  // KILN_CODEGEN_PASSES_TRANSPOSE_LINEAR_H_
