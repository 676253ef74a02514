// The emitted call of single-query attention (ops/attention.cc): a
// kiln_attention descriptor of its sizes, strides and pointers, and one
// kiln_attention_f32 call (emit/kiln_attention.h), inline in kiln_run.
#ifndef KILN_CODEGEN_EMIT_ATTENTION_CALL_H_
#define KILN_CODEGEN_EMIT_ATTENTION_CALL_H_

#include <string>

#include "absl/status/statusor.h"
#include "codegen/emit/body_emitter.h"

namespace kiln {

// Requires `kernel` to be an extern kernel of the attention op, whose reads
// are its query, key, value and (when present) mask under any strides. The
// call writes the kernel's own result (the output or the logsumexp).
absl::StatusOr<std::string> EmitAttentionCall(const Kernel& kernel, const EmitInputs& in);

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_ATTENTION_CALL_H_
