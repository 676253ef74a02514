// The check of a kiln_check.check node (codegen/ops/check.cc), inline in
// kiln_run: every element of its condition in row-major order, and at the
// first false one the runtime's check_error and a return of
// KILN_RUN_CHECK_ERROR; else its result, 0.
#ifndef KILN_CODEGEN_EMIT_CHECK_CALL_H_
#define KILN_CODEGEN_EMIT_CHECK_CALL_H_

#include <string>

#include "absl/status/statusor.h"
#include "codegen/emit/body_emitter.h"

namespace kiln {

absl::StatusOr<std::string> EmitCheck(const Kernel& kernel, const EmitInputs& in);

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_CHECK_CALL_H_
