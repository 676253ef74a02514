// The matrix exponential for artifacts (kiln_runtime.linalg's MATRIX_EXP
// routine), one matrix of the batch at a time, the batch spread across the
// runtime's pool.
//
// MATRIX_EXP, per matrix of the batch: A (n x n) -> exp(A) (n x n), by
// scaling and squaring with the degree-13 Pade approximant (Higham, "The
// scaling and squaring method for the matrix exponential revisited", 2005):
// A / 2^s of 1-norm at most theta_13, r_13 = (V - U)^-1 (V + U) solved by
// LAPACK's gesv, then squared s times; in double precision (a float32
// matrix too), its products by OpenBLAS's GEMM. A matrix holding an
// infinity or NaN gives NaN.
#ifndef KILN_CLIENT_RUNTIME_MATRIX_EXP_H_
#define KILN_CLIENT_RUNTIME_MATRIX_EXP_H_

#include "abi/kiln_abi.h"
#include "client/runtime/thread_pool.h"

namespace kiln {

// Runs `call` (routine MATRIX_EXP) on every matrix of its batch; returns 0,
// or 1 when a thread had no memory for its workspace (the reason on stderr).
int RunMatrixExp(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
                 void* const* results);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_MATRIX_EXP_H_
