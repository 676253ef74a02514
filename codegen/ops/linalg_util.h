// The pieces linear algebra's composites share (codegen/ops/linalg.cc,
// svd.cc) beyond the batch helpers of batched_matrices.h: kiln.linalg
// nodes, the error check, square matrices.
#ifndef KILN_CODEGEN_OPS_LINALG_UTIL_H_
#define KILN_CODEGEN_OPS_LINALG_UTIL_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/graph_builder.h"
#include "codegen/ir.h"
#include "codegen/ops/batched_matrices.h"

namespace kiln::ops {

// A kiln.linalg node: KILN_LINALG_`routine` with `flags` on `operands`;
// its results.
absl::StatusOr<std::vector<int>> Linalg(GraphBuilder& b, int routine, std::vector<int> operands,
                                        int64_t flags = 0);

// With `check_errors`, an _linalg_check_errors node over `info` (LAPACK's,
// one per matrix of `a`'s batch; linalg_check.cc): the _ex ops then raise
// as eager's do, naming `api_name`.
absl::Status CheckErrors(GraphBuilder& b, bool check_errors, int a, int info, const char* api_name);

// InvalidArgument naming `what` unless `type` is a batch of square
// matrices (RequireMatrix, batched_matrices.h, for any matrix).
absl::Status RequireSquare(const ir::TensorType& type, const char* what);

}  // namespace kiln::ops

#endif  // KILN_CODEGEN_OPS_LINALG_UTIL_H_
