// Graph-building helpers for the LAPACK families (linalg.cc, svd.cc, qr.cc,
// lstsq.cc): their core ops take [batch, rows, cols] matrices (and [batch, k]
// vectors), so
// the aten composites flatten leading batch dims into one (symbolic ones
// too), broadcasting them between operands as eager does, and give the
// results their batch dims back.
#ifndef KILN_CODEGEN_OPS_BATCHED_MATRICES_H_
#define KILN_CODEGEN_OPS_BATCHED_MATRICES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/graph_builder.h"
#include "codegen/ir.h"
#include "codegen/ops/op_table.h"

namespace kiln::ops {

// float32 and float64: LAPACK's s and d routines, as eager's.
extern const std::vector<ir::DType> kLapackTypes;

// A core op each result of which is one runtime LAPACK call (kiln_runtime's
// linalg, kiln_abi.h's KILN_LINALG_*): `name` takes the "routine" argument
// (required when `routine` gives no default) and "flags"; `infer` types the
// results.
OpDef LapackCallOp(std::string name, int min_inputs, int max_inputs, std::optional<int64_t> routine,
                   decltype(OpDef::infer) infer);

// The dims of `type` before its last `matrix_rank`.
std::vector<ir::Dim> BatchDims(const ir::TensorType& type, int matrix_rank);

// `value` [batch..., trailing (matrix_rank dims)] as [count, trailing...].
absl::StatusOr<int> Flatten(GraphBuilder& b, int value, int matrix_rank);

// `value` [count, trailing...] as [batch..., trailing...].
absl::StatusOr<int> Unflatten(GraphBuilder& b, int value, const std::vector<ir::Dim>& batch);

// The batch shape `values` broadcast to (each with its own number of
// trailing matrix dims); InvalidArgument when they do not broadcast.
absl::StatusOr<std::vector<ir::Dim>> BroadcastBatch(const GraphBuilder& b,
                                                    const std::vector<int>& values,
                                                    const std::vector<int>& matrix_ranks);

// `value` expanded to `batch` + its own trailing dims, then flattened.
absl::StatusOr<int> ExpandAndFlatten(GraphBuilder& b, int value, int matrix_rank,
                                     const std::vector<ir::Dim>& batch);

// The transpose of the last two dims.
absl::StatusOr<int> Transpose(GraphBuilder& b, int value);

// InvalidArgument naming `what` unless `type` has at least two dims.
absl::Status RequireMatrix(const ir::TensorType& type, const char* what);

// min(a, b), which a symbolic dim has only when it equals the other
// (Unimplemented naming `what` and `type` otherwise).
absl::StatusOr<ir::Dim> MinDim(const ir::Dim& a, const ir::Dim& b, const ir::TensorType& type,
                               const char* what);

// Whether a >= b is known: equal dims, or constants.
bool AtLeast(const ir::Dim& a, const ir::Dim& b);

}  // namespace kiln::ops

#endif  // KILN_CODEGEN_OPS_BATCHED_MATRICES_H_
