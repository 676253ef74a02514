// Pass: lower (graph -> loop IR).
//
// Requires: a verified, canonical, decomposed graph (symbolic sizes may be
// in any dim; what an op cannot lower is Unimplemented naming the node).
// Guarantees: one Definition per value; views are index maps (no copies);
// pointwise ops are expression DAGs over loads; GEMMs are extern calls.
// Nothing is scheduled yet: every definition could still be inlined.
#ifndef KILN_CODEGEN_PASSES_LOWER_H_
#define KILN_CODEGEN_PASSES_LOWER_H_

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "codegen/loop_ir.h"

namespace kiln {

absl::StatusOr<ir::LoopProgram> Lower(const ir::Graph& graph);

}  // namespace kiln

#endif  // KILN_CODEGEN_PASSES_LOWER_H_
