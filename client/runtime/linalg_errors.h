// What eager PyTorch raises when a LAPACK call's info says the matrix was
// singular, not positive definite, or the algorithm did not converge
// (aten._linalg_check_errors): an artifact's check of that info reports it
// through kiln_runtime.linalg_error, and kiln_run returns
// KILN_RUN_LINALG_ERROR.
#ifndef KILN_CLIENT_RUNTIME_LINALG_ERRORS_H_
#define KILN_CLIENT_RUNTIME_LINALG_ERRORS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln {

// Eager's error for the nonzero `info` of the op `api_name`
// ("linalg.inv") on matrix `batch_index` of its batch (-1: the one
// matrix), with eager's text: FailedPrecondition, and EagerErrorType names
// the exception eager raises.
absl::Status LinalgError(absl::string_view api_name, int64_t batch_index, int32_t info);

// Eager's RuntimeError with `message`, where Kiln's kind of error would
// raise another type: a failed check (kiln_check.check), or gather's index
// out of range (runtime.cc), which eager raises as a RuntimeError, not an
// IndexError. FailedPrecondition, which EagerErrorType names "RuntimeError".
absl::Status EagerRuntimeError(const std::string& message);

// "LinAlgError" (torch.linalg.LinAlgError) or "RuntimeError" for a status
// LinalgError or EagerRuntimeError made, else null.
const char* EagerErrorType(const absl::Status& status);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_LINALG_ERRORS_H_
