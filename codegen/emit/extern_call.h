// The emitted call of an extern kernel through the runtime table, inline in
// kiln_run: a GEMM or a convolution here, an FFT, linalg or row selection
// through its own file.
#ifndef KILN_CODEGEN_EMIT_EXTERN_CALL_H_
#define KILN_CODEGEN_EMIT_EXTERN_CALL_H_

#include <string>

#include "absl/status/statusor.h"
#include "codegen/emit/body_emitter.h"
#include "codegen/passes/schedule.h"

namespace kiln {

absl::StatusOr<std::string> EmitExternCall(const Kernel& kernel, const EmitInputs& in);

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_EXTERN_CALL_H_
