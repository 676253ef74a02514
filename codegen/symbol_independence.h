// Whether a size symbol can be padded: a call at B = 5 running the B = 8
// static bucket with its inputs zero-padded along B's dims and its outputs
// sliced back computes the same real elements only when positions along
// those dims never mix. This analysis proves that from the graph, or names
// the node that mixes them.
//
// Safe (positions along the symbol's dims stay apart): pointwise ops with
// broadcasting, copies and dtype casts, permutes, squeeze/unsqueeze, expand,
// reshapes that keep the symbol one factor of a dim, GEMMs with the symbol
// in M, N or the batch, reductions / softmax / layer_norm / cat / slices
// over other dims. Refused: reducing, normalizing, contracting,
// concatenating, slicing or indexing along a dim that carries it, a reshape
// that splits it, reading its value (a symbolic scalar argument), and any op
// not known to be safe that touches it.
//
// Inside the graph a merged dim may hold the symbol as an inner factor
// (the transformer's [S, B, D] -> [S * B, D] before a linear layer, undone
// by the view back to [S, B, D]): rows of such a dim are still independent
// as long as nothing but position-wise ops touches it. Graph inputs and
// outputs must hold it in one dim, as that dim's outermost factor, so that
// padding and slicing are along one dim.
#ifndef KILN_CODEGEN_SYMBOL_INDEPENDENCE_H_
#define KILN_CODEGEN_SYMBOL_INDEPENDENCE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kiln {

struct PaddedDims {
  // Per graph input / output: the dim that carries the symbol (its size is
  // the symbol, or a product with the symbol as outermost factor), or -1.
  std::vector<int> inputs;
  std::vector<int> outputs;
};

// Whether symbol `symbol` (an index into graph.symbols) can be padded, for
// a graph from PrepareGraph (codegen/prepare.h): the dims carrying it, or
// FailedPrecondition naming the node that mixes positions along it, e.g.
// "node 17 (aten._softmax.default, '_softmax'): reduces over dim 2, which
// carries symbol s0: padding s0 would change the result", or the input or
// output that carries it in more than one dim or not as the outermost
// factor. InvalidArgument for a symbol index out of range. A pure function.
absl::StatusOr<PaddedDims> PaddableDims(const ir::Graph& graph, int symbol);

}  // namespace kiln

#endif  // KILN_CODEGEN_SYMBOL_INDEPENDENCE_H_
