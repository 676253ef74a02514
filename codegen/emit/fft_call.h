// The emitted call of an FFT kernel (kiln.fft, ops/fft.cc) through the
// runtime table: a kiln_fft descriptor (kiln_abi.h) of its dims, batch and
// strides, inline in kiln_run.
#ifndef KILN_CODEGEN_EMIT_FFT_CALL_H_
#define KILN_CODEGEN_EMIT_FFT_CALL_H_

#include <string>

#include "absl/status/statusor.h"
#include "codegen/emit/body_emitter.h"
#include "codegen/passes/schedule.h"

namespace kiln {

absl::StatusOr<std::string> EmitFftCall(const Kernel& kernel, const EmitInputs& in);

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_FFT_CALL_H_
