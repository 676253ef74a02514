// Runs a pair of linear layers with pointwise ops between them (nn.Linear,
// activation, nn.Linear: a transformer's feed-forward block) in transposed
// space when the batch is small:
//
//   G = f(x · W1ᵀ),  C = G · W2ᵀ    becomes    Gᵀ = f(W1 · xᵀ),  Cᵀ = W2 · Gᵀ
//
// and C is read as a view of Cᵀ. Both weights are then the left operand,
// row-major as nn.Linear stores them, and the second GEMM is a plain one:
// as G · W2ᵀ it needs W2 transposed first (the runtime copies it; OpenBLAS
// multiplies by a transposed B 1.2x slower). Measured in OpenBLAS, 1 thread
// (docs/BENCHMARKS.md, "GEMM choices"): 1.10x on mlp's two GEMMs at batch
// 64, 1.2-1.5x at 16, still 1.04-1.05x at a batch as large as the narrowest
// of the three widths, 0.98-1.01x past twice that; hence: up to the
// narrowest width.
//
// Every op between the two products is elementwise, so transposing its
// inputs (broadcast ones expanded first) and its result computes the same
// elements; the products sum in another order (OpenBLAS's blocking), within
// float32 rounding.
#ifndef KILN_CODEGEN_PASSES_TRANSPOSE_LINEAR_H_
#define KILN_CODEGEN_PASSES_TRANSPOSE_LINEAR_H_

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kiln {

// `graph` (a core graph: after Decompose) with each such pair rewritten.
absl::StatusOr<ir::Graph> TransposeLinearPairs(const ir::Graph& graph);

}  // namespace kiln

#endif  // KILN_CODEGEN_PASSES_TRANSPOSE_LINEAR_H_
