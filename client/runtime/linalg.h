// Linear algebra for artifacts (kiln_runtime.linalg): LAPACK's
// factorizations and solves, the Fortran routines Debian's OpenBLAS
// exports (the ones eager PyTorch calls on the CPU, from MKL or OpenBLAS),
// one matrix of a batch at a time, the batch spread across the runtime's
// pool, each matrix at one OpenBLAS thread.
//
// The routines (kiln_abi.h's KILN_LINALG_*), per matrix of the batch:
//   LU                A (m x n) -> LU (m x n), pivots (min(m, n), int32,
//                     1-based as LAPACK's), info (int32), det, sign,
//                     logabsdet (of a square A), P (m x m), L (m x min(m, n),
//                     unit diagonal), U (min(m, n) x n); A = P L U.
//   LU_SOLVE          LU (n x n), pivots (int32), B (n x k) -> X (n x k):
//                     A X = B, or A^T X = B with ADJOINT.
//   CHOLESKY          A (n x n) -> factor (n x n; the other triangle zero),
//                     info (int32). The lower factor L (A = L L^T), or the
//                     upper one U (A = U^T U) with UPPER.
//   CHOLESKY_SOLVE    factor (n x n), B (n x k) -> X (n x k): A X = B.
//   CHOLESKY_INVERSE  factor (n x n) -> the inverse of A (n x n).
//   TRIANGULAR_SOLVE  A (n x n), B (n x k) -> X (n x k): A X = B, A's upper
//                     triangle with UPPER (else its lower), ones on its
//                     diagonal with UNIT.
//   SVD               A (m x n) -> U, S (min(m, n)), Vh: A = U diag(S) Vh by
//                     gesdd; with VECTORS U is m x min(m, n) and Vh
//                     min(m, n) x n, m x m and n x n with FULL as well.
//   EIGH              A (n x n, symmetric: its lower triangle is read, the
//                     upper with UPPER) -> eigenvalues (n, ascending),
//                     eigenvectors (n x n, one a column) with VECTORS: by
//                     syevd.
// Singular vectors' and eigenvectors' signs are the LAPACK's choice (OpenBLAS's and MKL's
// differ).
// info is LAPACK's: 0, or i > 0 when U's i-th diagonal element is zero (LU;
// the solves then hold infinities or NaN, as eager's do) or the leading
// minor of order i is not positive definite (CHOLESKY).
#ifndef KILN_CLIENT_RUNTIME_LINALG_H_
#define KILN_CLIENT_RUNTIME_LINALG_H_

#include <cstdint>
#include <functional>

#include "abi/kiln_abi.h"
#include "client/runtime/thread_pool.h"

namespace kiln {

// Runs `call` on every matrix of its batch; returns 0, or 1 when a thread
// had no memory for its workspace (the reason on stderr).
int RunLinalg(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
              void* const* results);

// Calls matrix(i) for every matrix i of `call`'s batch across `pool`; 0, or 1
// when one ran out of memory for its workspace (said on stderr, naming
// `what` and `call`'s m x n).
int ForEachMatrix(ThreadPool& pool, const kiln_linalg& call, const char* what,
                  const std::function<void(int64_t)>& matrix);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_LINALG_H_
