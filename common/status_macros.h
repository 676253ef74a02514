// Early-return helpers for absl::Status / absl::StatusOr. Debian's Abseil
// (20220623) predates ABSL_RETURN_IF_ERROR.
#ifndef KILN_COMMON_STATUS_MACROS_H_
#define KILN_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    const ::absl::Status kiln_status_ = (expr);  \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, StatusOrExpr());` declares and assigns x, or
// returns the error status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_statusor_, __LINE__), lhs, expr)

#define KILN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)   \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // KILN_COMMON_STATUS_MACROS_H_
