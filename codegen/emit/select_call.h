// The extern call of kiln.select_rows (codegen/ops/sorting.cc): one
// rt->select_rows over every row, inline in kiln_run.
#ifndef KILN_CODEGEN_EMIT_SELECT_CALL_H_
#define KILN_CODEGEN_EMIT_SELECT_CALL_H_

#include <string>

#include "absl/status/statusor.h"
#include "codegen/emit/body_emitter.h"

namespace kiln {

// Requires `kernel` to be the extern kernel of a kiln.select_rows node,
// whose one read is the [rows, n] operand under any strides.
absl::StatusOr<std::string> EmitSelectCall(const Kernel& kernel, const EmitInputs& in);

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_SELECT_CALL_H_
