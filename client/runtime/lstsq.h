// Least squares for artifacts (kiln_runtime.linalg's LSTSQ routine): the
// LAPACK drivers eager PyTorch's linalg.lstsq calls on the CPU (gelsy by
// default; gels, gelsd, gelss), as Debian's OpenBLAS exports them, one
// matrix of the batch at a time, the batch spread across the runtime's pool.
//
// LSTSQ, per matrix of the batch: A (m x n), rcond (a vector of one element),
// B (m x k) -> X (n x k) minimizing |A X - B| (the minimum-norm one when A
// has fewer rows or lower rank), residuals (k: the squared norm of each
// column's residual, from the rows n..m LAPACK leaves in B; zeros when
// m <= n), rank (int64; gels: min(m, n)), singular values (min(m, n), gelsd and
// gelss; zeros for the others), info (int32: the driver's; gels's is i > 0
// when A does not have full rank, gelsd's and gelss's when the SVD did not
// converge, and X and the residuals are then meaningless; eager raises). The
// driver is the flag KILN_LINALG_GELS, GELSD or GELSS, gelsy without one.
// Singular values at most rcond times the largest count as zero (gelsy,
// gelsd, gelss).
#ifndef KILN_CLIENT_RUNTIME_LSTSQ_H_
#define KILN_CLIENT_RUNTIME_LSTSQ_H_

#include "abi/kiln_abi.h"
#include "client/runtime/thread_pool.h"

namespace kiln {

// Runs `call` (routine LSTSQ) on every matrix of its batch; returns 0, or 1
// when a thread had no memory for its workspace (the reason on stderr).
int RunLstsq(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
             void* const* results);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_LSTSQ_H_
