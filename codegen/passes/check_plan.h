// Pass: check plan (the pipeline's exit check).
//
// Requires: a schedule and its buffer plan.
// Guarantees, or Internal naming the broken invariant (a codegen bug, never
// a user error): every kernel reads only values written by an earlier kernel
// or given as inputs; every realized value has a storage; every graph output
// is written exactly once; scratch slices of values alive in the same kernel
// do not overlap and fit in the arena.
#ifndef KILN_CODEGEN_PASSES_CHECK_PLAN_H_
#define KILN_CODEGEN_PASSES_CHECK_PLAN_H_

#include "absl/status/status.h"
#include "codegen/ir.h"
#include "codegen/passes/plan_buffers.h"
#include "codegen/passes/schedule.h"

namespace kiln {

absl::Status CheckPlan(const ir::Graph& graph, const Schedule& schedule, const BufferPlan& plan);

}  // namespace kiln

#endif  // KILN_CODEGEN_PASSES_CHECK_PLAN_H_
