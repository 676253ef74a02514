// Kernels that run whole on the calling thread, as static functions of the
// source: concat, scan and scatter.
#ifndef KILN_CODEGEN_EMIT_WHOLE_KERNELS_H_
#define KILN_CODEGEN_EMIT_WHOLE_KERNELS_H_

#include <string>

#include "absl/status/statusor.h"
#include "codegen/emit/body_emitter.h"
#include "codegen/passes/schedule.h"

namespace kiln {

// A static function of the source and the statement in kiln_run that calls it.
struct EmittedFunction {
  std::string definition;
  std::string call;
};

absl::StatusOr<EmittedFunction> EmitConcat(int index, const Kernel& kernel, const EmitInputs& in);
absl::StatusOr<EmittedFunction> EmitScan(int index, const Kernel& kernel, const EmitInputs& in);
absl::StatusOr<EmittedFunction> EmitScatter(int index, const Kernel& kernel, const EmitInputs& in);

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_WHOLE_KERNELS_H_
