// The LDL^T factorization of symmetric matrices for artifacts
// (kiln_runtime.linalg's LDL routines): LAPACK's Bunch-Kaufman sytrf and
// sytrs, which eager PyTorch's linalg.ldl_factor and ldl_solve call on the
// CPU for real matrices (hermitian or not, the same), as Debian's OpenBLAS
// exports them, one matrix of the batch at a time, the batch spread across
// the runtime's pool.
//
// The routines (kiln_abi.h's KILN_LINALG_*), per matrix of the batch:
//   LDL_FACTOR  A (n x n; its lower triangle is read) -> LD (n x n: L below
//               the diagonal and D's blocks on and below it, as sytrf packs
//               them with uplo 'L'; zeros above), pivots (n, int32, sytrf's:
//               1-based, negative for a 2 x 2 block), info (int32: i > 0
//               when D's i-th diagonal element is exactly zero).
//   LDL_SOLVE   LD (n x n), pivots (n, int32), B (n x k) -> X (n x k):
//               A X = B by sytrs (NaN when a pivot is not one sytrf can
//               give: 0 or past n in magnitude).
#ifndef KILN_CLIENT_RUNTIME_LDL_H_
#define KILN_CLIENT_RUNTIME_LDL_H_

#include <cstdint>

#include "abi/kiln_abi.h"
#include "client/runtime/thread_pool.h"

namespace kiln {

// Whether `routine` is one of this file's.
bool IsLdlRoutine(int64_t routine);

// Runs `call` (an LDL routine) on every matrix of its batch; returns 0, or 1
// when a thread had no memory for its workspace (the reason on stderr).
int RunLdl(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
           void* const* results);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_LDL_H_
