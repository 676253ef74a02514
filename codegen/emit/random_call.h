// The extern call of the kiln_rng ops (codegen/ops/random.cc): one
// rt->random per result, inline in kiln_run, each drawing from the node's
// input state and writing only its result.
#ifndef KILN_CODEGEN_EMIT_RANDOM_CALL_H_
#define KILN_CODEGEN_EMIT_RANDOM_CALL_H_

#include <string>

#include "absl/status/statusor.h"
#include "codegen/emit/body_emitter.h"

namespace kiln {

// Requires `kernel` to be the extern kernel of one result of a random
// node, whose one read is its contiguous uint8 state.
absl::StatusOr<std::string> EmitRandomCall(const Kernel& kernel, const EmitInputs& in);

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_RANDOM_CALL_H_
