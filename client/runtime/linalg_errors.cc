#include "client/runtime/linalg_errors.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

// The payload naming the exception type.
constexpr char kEagerErrorPayload[] = "kiln.dev/eager-error-type";

absl::Status Raised(bool linalg_error, const std::string& message) {
  absl::Status status = absl::FailedPreconditionError(message);
  status.SetPayload(kEagerErrorPayload, absl::Cord(linalg_error ? "LinAlgError" : "RuntimeError"));
  return status;
}

}  // namespace

absl::Status EagerRuntimeError(const std::string& message) { return Raised(false, message); }

// The texts and their order are eager's _linalg_check_errors
// (aten/src/ATen/native/BatchLinearAlgebra.cpp), which picks one by what
// the op's name contains.
absl::Status LinalgError(absl::string_view api_name, int64_t batch_index, int32_t info) {
  const std::string where = batch_index < 0
                                ? std::string(api_name)
                                : absl::StrCat(api_name, ": (Batch element ", batch_index, ")");
  auto named = [&](absl::string_view part) { return absl::StrContains(api_name, part); };
  if (info < 0) {
    if (named("svd") && info == -4) {
      return Raised(true, absl::StrCat(where,
                                       ": The algorithm failed to converge because the input "
                                       "matrix contained non-finite values."));
    }
    return Raised(false, absl::StrCat(where, ": Argument ", -info,
                                      " has illegal value. Most certainly there is a bug in the "
                                      "implementation calling the backend library."));
  }
  if (named("inv")) {
    return Raised(true, absl::StrCat(where, ": The diagonal element ", info,
                                     " is zero, the inversion could not be completed because the "
                                     "input matrix is singular."));
  }
  if (named("solve")) {
    return Raised(true,
                  absl::StrCat(where, ": The solver failed because the input matrix is singular."));
  }
  if (named("cholesky")) {
    return Raised(true, absl::StrCat(where,
                                     ": The factorization could not be completed because the "
                                     "input is not positive-definite (the leading minor of order ",
                                     info, " is not positive-definite)."));
  }
  if (named("svd")) {
    return Raised(true, absl::StrCat(where,
                                     ": The algorithm failed to converge because the input matrix "
                                     "is ill-conditioned or has too many repeated singular values "
                                     "(error code: ",
                                     info, ")."));
  }
  if (named("eig") || named("syevd")) {
    return Raised(true, absl::StrCat(where,
                                     ": The algorithm failed to converge because the input matrix "
                                     "is ill-conditioned or has too many repeated eigenvalues "
                                     "(error code: ",
                                     info, ")."));
  }
  if (named("lstsq")) {
    return Raised(true, absl::StrCat(where,
                                     ": The least squares solution could not be computed because "
                                     "the input matrix does not have full rank (error code: ",
                                     info, ")."));
  }
  if (named("lu_factor")) {
    return Raised(false, absl::StrCat(where, ": U[", info, ",", info,
                                      "] is zero and using it on lu_solve would result in a "
                                      "division by zero. If you still want to perform the "
                                      "factorization, consider calling linalg.lu(A, pivot) or "
                                      "linalg.lu_factor_ex(A, pivot)"));
  }
  return Raised(false, absl::StrCat(api_name, ": Unknown error code: ", info, "."));
}

const char* EagerErrorType(const absl::Status& status) {
  const auto type = status.GetPayload(kEagerErrorPayload);
  if (!type.has_value()) return nullptr;
  return *type == "LinAlgError" ? "LinAlgError" : "RuntimeError";
}

}  // namespace kiln
