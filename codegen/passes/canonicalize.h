// Pass: canonicalize (runs before the cache key is computed).
//
// Requires: a verified graph.
// Guarantees: two graphs that compute the same thing the same way come out
// identical, so they share one cache key and one artifact:
//   - schema defaults are stated (`alpha=1` given or omitted: one graph);
//   - nodes no output depends on are dropped;
//   - nodes are reordered depth-first from the outputs (operands in order),
//     so the order of independent nodes in the input does not matter, and
//     values are renumbered in that order (inputs keep their positions);
//   - size symbols are renamed s0, s1, ... by first occurrence;
//   - names are kept for humans (the key ignores them).
#ifndef KILN_CODEGEN_PASSES_CANONICALIZE_H_
#define KILN_CODEGEN_PASSES_CANONICALIZE_H_

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kiln {

absl::StatusOr<ir::Graph> Canonicalize(const ir::Graph& graph);

}  // namespace kiln

#endif  // KILN_CODEGEN_PASSES_CANONICALIZE_H_
