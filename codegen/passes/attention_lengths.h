// Pass: attention lengths (runs after keying, after decompose).
//
// Single-query attention whose mask is a prefix of the keys set by a
// position or length tensor, as a decoding step writes it,
//
//   mask = where(arange(n) <= position, 0, -inf)    (or <, or >= / > reversed)
//
// becomes kiln.attention_to_length: the kernel reads the position itself,
// one integer per batch row, and stops at its bound (position + 1 for <=,
// the length for <), so the mask is neither built nor scanned and a step
// costs O(position), not O(n). Exact: the keys past the bound have mask
// -inf, weight exp(-inf) = 0 in every sum, and the kernel never read them
// before either; a bound of 0 (position -1, length 0) masks every key, zeros
// and logsumexp -inf, as with the mask.
//
// Paged caches: when the keys and values are blocks of pools gathered by a
// block table, pool[table].view(batch, -1, heads, width).transpose(1, 2)
// (index_select along the pool's blocks of the table's entries), the kernel
// reads the pools through the table instead (vLLM's paged attention): the
// gather is dropped, and a step reads the blocks below each sequence's
// bound, not every block of its table. The gather's index check
// (passes/check_lookups.h) stays: an entry outside the pool is eager's
// IndexError before the kernel runs.
//
// Requires: a core graph (after Decompose).
// Guarantees: a rewritten attention's mask was where(c, 0, -inf) with c,
// through views that only add or drop dims of size 1 (the element order
// kept), a comparison of arange(n) from 0 by 1 along the keys (n the key
// count) against an int64 tensor constant along the keys, whose other dims
// are 1 or the scores' batch.
// Other nodes are copied as they are; dead nodes are dropped.
#ifndef KILN_CODEGEN_PASSES_ATTENTION_LENGTHS_H_
#define KILN_CODEGEN_PASSES_ATTENTION_LENGTHS_H_

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kiln {

absl::StatusOr<ir::Graph> AttentionLengths(const ir::Graph& graph);

}  // namespace kiln

#endif  // KILN_CODEGEN_PASSES_ATTENTION_LENGTHS_H_
