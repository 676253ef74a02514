// Householder QR for artifacts (kiln_runtime.linalg's QR routines): the
// LAPACK routines eager PyTorch calls on the CPU (geqrf, orgqr, ormqr), as
// Debian's OpenBLAS exports them, one matrix of the batch at a time, the
// batch spread across the runtime's pool.
//
// The routines (kiln_abi.h's KILN_LINALG_*), per matrix of the batch:
//   GEQRF                A (m x n) -> QR (m x n: R on and above the
//                        diagonal, the Householder vectors below it), tau
//                        (min(m, n)), as LAPACK's geqrf.
//   HOUSEHOLDER_PRODUCT  A (m x n, m >= n), tau (k <= n) -> Q (m x n): the
//                        first n columns of H_1 ... H_k, H_i = I - tau_i v_i
//                        v_i^T with v_i column i of A below the diagonal
//                        (a one on it), as orgqr.
//   ORMQR                A (m x n, m >= n), tau (n), C (m x k) -> Q C, or
//                        Q^T C with ADJOINT, Q = H_1 ... H_n, as ormqr.
// call.k is tau's length (HOUSEHOLDER_PRODUCT) or C's columns (ORMQR).
#ifndef KILN_CLIENT_RUNTIME_QR_H_
#define KILN_CLIENT_RUNTIME_QR_H_

#include "abi/kiln_abi.h"
#include "client/runtime/thread_pool.h"

namespace kiln {

bool IsQrRoutine(int64_t routine);

// Runs `call` (a QR routine) on every matrix of its batch; returns 0, or 1
// when a thread had no memory for its workspace (the reason on stderr).
int RunQr(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
          void* const* results);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_QR_H_
