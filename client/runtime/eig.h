// The eigendecomposition of general real matrices for artifacts
// (kiln_runtime.linalg's EIG routine): LAPACK's geev, which eager PyTorch's
// linalg.eig calls on the CPU, as Debian's OpenBLAS exports it, one matrix
// of the batch at a time, the batch spread across the runtime's pool.
//
// EIG, per matrix of the batch: A (n x n) -> eigenvalues (n complex, as
// interleaved (real, imaginary) pairs: n x 2), eigenvectors (n x n complex,
// one a column: n x n x 2), info (int32: i > 0 when the QR algorithm
// failed to converge, the values from i on then being the only ones
// computed). A conjugate pair of eigenvalues comes as geev gives it (the
// one with the positive imaginary part first); the eigenvectors are geev's
// (unit 2-norm, the largest component real), the pair's second the first's
// conjugate, as eager makes them complex. Without an eigenvectors result,
// geev computes none.
#ifndef KILN_CLIENT_RUNTIME_EIG_H_
#define KILN_CLIENT_RUNTIME_EIG_H_

#include "abi/kiln_abi.h"
#include "client/runtime/thread_pool.h"

namespace kiln {

// Runs `call` (routine EIG) on every matrix of its batch; returns 0, or 1
// when a thread had no memory for its workspace (the reason on stderr).
int RunEig(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
           void* const* results);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_EIG_H_
