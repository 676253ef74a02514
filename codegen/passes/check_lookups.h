// Pass: check lookups (runs before Decompose).
//
// Eager raises when a lookup's index names a position outside its table:
// embedding and index_select an IndexError, gather a RuntimeError. Kiln's
// lookups read 0 there instead (ops/lookups.cc), which the ops Kiln's own
// decompositions build rely on. So each lookup of the user's graph
// (aten.embedding, aten.index_select, aten.gather; x[index] traces as
// index_select) gets a kiln.check_index of its index just before it: the
// artifact stops the run with eager's error at the first entry outside
// [0, size) of the looked-up dim (ops/index_check.cc). x[index] traces as
// index_select at where(index < 0, index + size, index): its check takes
// the index itself, in [-size, size), so the error names the entry the
// caller passed. A lookup itself reads 0 outside its table, so nothing is
// read outside memory wherever its check runs; the run returns the error,
// never a result.
//
// Requires: the user's graph, before Decompose.
// Guarantees: every node is copied as it is, in order; the checks are
// effects (OpDef::effect), read by nothing.
#ifndef KILN_CODEGEN_PASSES_CHECK_LOOKUPS_H_
#define KILN_CODEGEN_PASSES_CHECK_LOOKUPS_H_

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kiln {

absl::StatusOr<ir::Graph> CheckLookups(const ir::Graph& graph);

}  // namespace kiln

#endif  // KILN_CODEGEN_PASSES_CHECK_LOOKUPS_H_
