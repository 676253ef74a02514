// The pieces linear algebra's composites share (codegen/ops/linalg.cc,
// svd.cc): a batch of matrices flattened into the [batch, rows, cols]
// operands of kiln.linalg and the results given their batch dims back.
#ifndef KILN_CODEGEN_OPS_LINALG_UTIL_H_
#define KILN_CODEGEN_OPS_LINALG_UTIL_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/graph_builder.h"
#include "codegen/ir.h"

namespace kiln::ops {

// The dims of `type` before its last `matrix_rank`.
std::vector<ir::Dim> BatchDims(const ir::TensorType& type, int matrix_rank);

// `value` [batch..., trailing (matrix_rank dims)] as [count, trailing].
absl::StatusOr<int> Flatten(GraphBuilder& b, int value, int matrix_rank);

// `value` [count, trailing...] as [batch..., trailing...].
absl::StatusOr<int> Unflatten(GraphBuilder& b, int value, std::vector<ir::Dim> batch);

// A kiln.linalg node: KILN_LINALG_`routine` with `flags` on `operands`;
// its results.
absl::StatusOr<std::vector<int>> Linalg(GraphBuilder& b, int routine, std::vector<int> operands,
                                        int64_t flags = 0);

// With `check_errors`, an _linalg_check_errors node over `info` (LAPACK's,
// one per matrix of `a`'s batch; linalg_check.cc): the _ex ops then raise
// as eager's do, naming `api_name`.
absl::Status CheckErrors(GraphBuilder& b, bool check_errors, int a, int info, const char* api_name);

// InvalidArgument naming `what` unless `type` is a matrix (or a batch of
// them), or a square one.
absl::Status RequireMatrix(const ir::TensorType& type, const char* what);
absl::Status RequireSquare(const ir::TensorType& type, const char* what);

}  // namespace kiln::ops

#endif  // KILN_CODEGEN_OPS_LINALG_UTIL_H_
