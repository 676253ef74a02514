// The text of a LAPACK call through the runtime table (kiln_runtime.linalg)
// for one result of a kiln.linalg node (codegen/ops/linalg.cc): inline in
// kiln_run, every operand by pointer and strides, and only this kernel's
// result written.
#ifndef KILN_CODEGEN_EMIT_LINALG_CALL_H_
#define KILN_CODEGEN_EMIT_LINALG_CALL_H_

#include <string>

#include "absl/status/statusor.h"
#include "codegen/emit/body_emitter.h"

namespace kiln {

absl::StatusOr<std::string> EmitLinalgCall(const Kernel& kernel, const EmitInputs& in);

// The check of an _linalg_check_errors node (codegen/ops/linalg_check.cc),
// inline in kiln_run: the info's elements in row-major order, and at the
// first nonzero one the runtime's linalg_error and a return of
// KILN_RUN_LINALG_ERROR; else its result, 0.
absl::StatusOr<std::string> EmitLinalgCheck(const Kernel& kernel, const EmitInputs& in);

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_LINALG_CALL_H_
