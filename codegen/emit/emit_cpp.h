// Emitter: schedule + buffer plan -> one freestanding C++ translation unit.
//
// Requires: a schedule and a buffer plan for the same loop program.
// Guarantees: the source includes nothing but the pasted ABI header
// (abi/kiln_abi.h); it exports exactly kiln_info and kiln_run; value and
// kernel names come from one deterministic walk, and float literals are hex
// floats, so the same inputs always give byte-identical source.
#ifndef KILN_CODEGEN_EMIT_EMIT_CPP_H_
#define KILN_CODEGEN_EMIT_EMIT_CPP_H_

#include <string>

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "codegen/loop_ir.h"
#include "codegen/passes/plan_buffers.h"
#include "codegen/passes/schedule.h"

namespace kiln {

absl::StatusOr<std::string> EmitCpp(const ir::Graph& graph, const ir::LoopProgram& program,
                                    const Schedule& schedule, const BufferPlan& plan);

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_EMIT_CPP_H_
