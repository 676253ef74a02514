#include "client/runtime/linalg.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <utility>
#include <vector>

#include "client/runtime/runtime.h"

// LAPACK's Fortran entry points, as OpenBLAS exports them: every argument by
// address, and after them the length of each character argument.
extern "C" {
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* pivots, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* pivots, int* info);
void sgetrs_(const char* trans, const int* n, const int* nrhs, const float* a, const int* lda,
             const int* pivots, float* b, const int* ldb, int* info, size_t trans_length);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda,
             const int* pivots, double* b, const int* ldb, int* info, size_t trans_length);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info,
             size_t uplo_length);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info,
             size_t uplo_length);
void spotrs_(const char* uplo, const int* n, const int* nrhs, const float* a, const int* lda,
             float* b, const int* ldb, int* info, size_t uplo_length);
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda,
             double* b, const int* ldb, int* info, size_t uplo_length);
void spotri_(const char* uplo, const int* n, float* a, const int* lda, int* info,
             size_t uplo_length);
void dpotri_(const char* uplo, const int* n, double* a, const int* lda, int* info,
             size_t uplo_length);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s,
             float* u, const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork,
             int* iwork, int* info, size_t jobz_length);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
             int* iwork, int* info, size_t jobz_length);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w,
             float* work, const int* lwork, int* iwork, const int* liwork, int* info,
             size_t jobz_length, size_t uplo_length);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info,
             size_t jobz_length, size_t uplo_length);
}

namespace kiln {
namespace {

void Getrf(int m, int n, float* a, int lda, int* pivots, int* info) {
  sgetrf_(&m, &n, a, &lda, pivots, info);
}
void Getrf(int m, int n, double* a, int lda, int* pivots, int* info) {
  dgetrf_(&m, &n, a, &lda, pivots, info);
}
void Getrs(char trans, int n, int k, const float* a, int lda, const int* pivots, float* b, int ldb,
           int* info) {
  sgetrs_(&trans, &n, &k, a, &lda, pivots, b, &ldb, info, 1);
}
void Getrs(char trans, int n, int k, const double* a, int lda, const int* pivots, double* b,
           int ldb, int* info) {
  dgetrs_(&trans, &n, &k, a, &lda, pivots, b, &ldb, info, 1);
}
void Potrf(char uplo, int n, float* a, int lda, int* info) { spotrf_(&uplo, &n, a, &lda, info, 1); }
void Potrf(char uplo, int n, double* a, int lda, int* info) {
  dpotrf_(&uplo, &n, a, &lda, info, 1);
}
void Potrs(char uplo, int n, int k, const float* a, int lda, float* b, int ldb, int* info) {
  spotrs_(&uplo, &n, &k, a, &lda, b, &ldb, info, 1);
}
void Potrs(char uplo, int n, int k, const double* a, int lda, double* b, int ldb, int* info) {
  dpotrs_(&uplo, &n, &k, a, &lda, b, &ldb, info, 1);
}
void Potri(char uplo, int n, float* a, int lda, int* info) { spotri_(&uplo, &n, a, &lda, info, 1); }
void Potri(char uplo, int n, double* a, int lda, int* info) {
  dpotri_(&uplo, &n, a, &lda, info, 1);
}
void Trsm(CBLAS_UPLO uplo, CBLAS_DIAG diag, int n, int k, const float* a, int lda, float* b,
          int ldb) {
  cblas_strsm(CblasColMajor, CblasLeft, uplo, CblasNoTrans, diag, n, k, 1.0f, a, lda, b, ldb);
}
void Trsm(CBLAS_UPLO uplo, CBLAS_DIAG diag, int n, int k, const double* a, int lda, double* b,
          int ldb) {
  cblas_dtrsm(CblasColMajor, CblasLeft, uplo, CblasNoTrans, diag, n, k, 1.0, a, lda, b, ldb);
}

// call(work, lwork, iwork, liwork) for gesdd and syevd: once asking for
// the workspace's size (lwork = -1), then with this thread's workspace,
// grown to it (iwork to at least `min_int_work`).
template <typename T, typename F>
void WithWorkspace(int min_int_work, F call) {
  thread_local std::vector<T> work;
  thread_local std::vector<int> int_work;
  T size = 0;
  int int_size = 0;
  call(&size, -1, &int_size, -1);
  work.resize(
      std::max<int64_t>({1, static_cast<int64_t>(work.size()), static_cast<int64_t>(size)}));
  int_work.resize(std::max({1, static_cast<int>(int_work.size()), int_size, min_int_work}));
  call(work.data(), static_cast<int>(work.size()), int_work.data(),
       static_cast<int>(int_work.size()));
}

void Gesdd(char jobz, int m, int n, float* a, float* s, float* u, int ldu, float* vt, int ldvt,
           int* info) {
  const int lda = std::max(1, m);
  WithWorkspace<float>(8 * std::min(m, n), [&](float* work, int lwork, int* iwork, int) {
    sgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
  });
}
void Gesdd(char jobz, int m, int n, double* a, double* s, double* u, int ldu, double* vt, int ldvt,
           int* info) {
  const int lda = std::max(1, m);
  WithWorkspace<double>(8 * std::min(m, n), [&](double* work, int lwork, int* iwork, int) {
    dgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
  });
}
void Syevd(char jobz, char uplo, int n, float* a, float* w, int* info) {
  const int lda = std::max(1, n);
  WithWorkspace<float>(1, [&](float* work, int lwork, int* iwork, int liwork) {
    ssyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
  });
}
void Syevd(char jobz, char uplo, int n, double* a, double* w, int* info) {
  const int lda = std::max(1, n);
  WithWorkspace<double>(1, [&](double* work, int lwork, int* iwork, int liwork) {
    dsyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
  });
}

// The identity (rows x rows, column-major): the vectors LAPACK leaves
// unwritten for an empty matrix, which eager's full SVD gives.
template <typename T>
void Identity(T* dst, int64_t rows) {
  std::fill(dst, dst + rows * rows, T(0));
  for (int64_t i = 0; i < rows; ++i) dst[i + i * rows] = T(1);
}

// One matrix of the batch: operand i's element (r, c), and result j's
// storage.
struct Matrices {
  const kiln_linalg& call;
  const void* const* operands;
  void* const* results;
  int64_t batch_index;

  template <typename T>
  T At(int i, int64_t r, int64_t c) const {
    const kiln_int64* strides = call.strides[i];
    return static_cast<const T*>(
        operands[i])[batch_index * strides[0] + r * strides[1] + c * strides[2]];
  }
  // Result j of `count` elements a matrix, or null when it is not wanted.
  template <typename T>
  T* Result(int j, int64_t count) const {
    return results[j] == nullptr ? nullptr : static_cast<T*>(results[j]) + batch_index * count;
  }
};

// The column-major copy (leading dimension `rows`) LAPACK factors in place.
template <typename T>
void ToColumnMajor(const Matrices& in, int operand, int64_t rows, int64_t cols, T* dst) {
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) dst[r + c * rows] = in.At<T>(operand, r, c);
  }
}

// dst (rows x cols, row-major) = the column-major src, leading dimension
// `rows`, or its lower (`keep` 'L') or upper ('U') triangle, zeros elsewhere.
template <typename T>
void ToRowMajor(const T* src, int64_t rows, int64_t cols, T* dst, char keep = 'A') {
  if (dst == nullptr) return;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const bool kept = keep == 'A' || (keep == 'L' ? r >= c : r <= c);
      dst[r * cols + c] = kept ? src[r + c * rows] : T(0);
    }
  }
}

template <typename T>
void Lu(const Matrices& in, T* a, int* pivots) {
  const int64_t m = in.call.m, n = in.call.n, k = std::min(m, n);
  ToColumnMajor(in, 0, m, n, a);
  int info = 0;
  Getrf(m, n, a, std::max<int64_t>(1, m), pivots, &info);
  ToRowMajor(a, m, n, in.Result<T>(0, m * n));
  if (int32_t* out = in.Result<int32_t>(1, k)) std::copy(pivots, pivots + k, out);
  if (int32_t* out = in.Result<int32_t>(2, 1)) *out = info;
  // det = (-1)^swaps * prod(diag(U)); slogdet's sign and log|det|.
  T permutation = 1, product = 1, signs = 1, log_abs = 0;
  for (int64_t i = 0; i < k; ++i) {
    const T diagonal = a[i + i * m];
    if (pivots[i] != i + 1) permutation = -permutation;
    product *= diagonal;
    signs *= diagonal > 0 ? T(1) : diagonal < 0 ? T(-1) : T(0);
    log_abs += std::log(std::abs(diagonal));
  }
  if (T* out = in.Result<T>(3, 1)) *out = permutation * product;
  if (T* out = in.Result<T>(4, 1)) *out = permutation * signs;
  if (T* out = in.Result<T>(5, 1)) *out = log_abs;
  // A = P L U: row i of L U is row perm[i] of A, where perm applies the row
  // swaps in order.
  if (T* out = in.Result<T>(6, m * m)) {
    std::fill(out, out + m * m, T(0));
    std::vector<int64_t> perm(m);
    for (int64_t i = 0; i < m; ++i) perm[i] = i;
    for (int64_t i = 0; i < k; ++i) std::swap(perm[i], perm[pivots[i] - 1]);
    for (int64_t i = 0; i < m; ++i) out[perm[i] * m + i] = T(1);
  }
  if (T* out = in.Result<T>(7, m * k)) {
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < k; ++c) out[r * k + c] = r > c ? a[r + c * m] : T(r == c);
    }
  }
  if (T* out = in.Result<T>(8, k * n)) {
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t c = 0; c < n; ++c) out[r * n + c] = r <= c ? a[r + c * m] : T(0);
    }
  }
}

template <typename T>
void Run(const Matrices& in, T* a, T* b, int* pivots) {
  const kiln_linalg& call = in.call;
  const int64_t n = call.n, k = call.k;
  const int ld = std::max<int64_t>(1, n);
  const char uplo = call.flags & KILN_LINALG_UPPER ? 'U' : 'L';
  int info = 0;
  switch (call.routine) {
    case KILN_LINALG_LU:
      Lu(in, a, pivots);
      return;
    case KILN_LINALG_LU_SOLVE:
      ToColumnMajor(in, 0, n, n, a);
      for (int64_t i = 0; i < n; ++i) pivots[i] = in.At<int32_t>(1, i, 0);
      ToColumnMajor(in, 2, n, k, b);
      Getrs(call.flags & KILN_LINALG_ADJOINT ? 'T' : 'N', n, k, a, ld, pivots, b, ld, &info);
      ToRowMajor(b, n, k, in.Result<T>(0, n * k));
      return;
    case KILN_LINALG_CHOLESKY:
      ToColumnMajor(in, 0, n, n, a);
      Potrf(uplo, n, a, ld, &info);
      ToRowMajor(a, n, n, in.Result<T>(0, n * n), uplo);
      if (int32_t* out = in.Result<int32_t>(1, 1)) *out = info;
      return;
    case KILN_LINALG_CHOLESKY_SOLVE:
      ToColumnMajor(in, 0, n, n, a);
      ToColumnMajor(in, 1, n, k, b);
      Potrs(uplo, n, k, a, ld, b, ld, &info);
      ToRowMajor(b, n, k, in.Result<T>(0, n * k));
      return;
    case KILN_LINALG_CHOLESKY_INVERSE:
      ToColumnMajor(in, 0, n, n, a);
      Potri(uplo, n, a, ld, &info);
      // potri writes one triangle of the symmetric inverse.
      for (int64_t c = 0; c < n; ++c) {
        for (int64_t r = 0; r < n; ++r) {
          if (uplo == 'U' ? r > c : r < c) a[r + c * n] = a[c + r * n];
        }
      }
      ToRowMajor(a, n, n, in.Result<T>(0, n * n));
      return;
    case KILN_LINALG_SVD: {
      const int64_t m = call.m, k = std::min(call.m, call.n);
      const bool vectors = call.flags & KILN_LINALG_VECTORS, full = call.flags & KILN_LINALG_FULL;
      const int64_t u_cols = vectors ? (full ? m : k) : 0, v_rows = vectors ? (full ? n : k) : 0;
      thread_local std::vector<T> s, u, vt;
      s.resize(std::max<int64_t>(1, k));
      u.resize(std::max<int64_t>(1, m * u_cols));
      vt.resize(std::max<int64_t>(1, v_rows * n));
      ToColumnMajor(in, 0, m, n, a);
      Gesdd(vectors ? (full ? 'A' : 'S') : 'N', m, n, a, s.data(), u.data(),
            std::max<int64_t>(1, m), vt.data(), std::max<int64_t>(1, v_rows), &info);
      if (k == 0 && full) {
        Identity(u.data(), m);
        Identity(vt.data(), n);
      }
      ToRowMajor(u.data(), m, u_cols, in.Result<T>(0, m * u_cols));
      if (T* out = in.Result<T>(1, k)) std::copy(s.data(), s.data() + k, out);
      ToRowMajor(vt.data(), v_rows, n, in.Result<T>(2, v_rows * n));
      return;
    }
    case KILN_LINALG_EIGH: {
      const bool vectors = call.flags & KILN_LINALG_VECTORS;
      ToColumnMajor(in, 0, n, n, a);
      thread_local std::vector<T> w;
      w.resize(std::max<int64_t>(1, n));
      Syevd(vectors ? 'V' : 'N', uplo, n, a, w.data(), &info);
      if (T* out = in.Result<T>(0, n)) std::copy(w.data(), w.data() + n, out);
      if (vectors) ToRowMajor(a, n, n, in.Result<T>(1, n * n));
      return;
    }
    case KILN_LINALG_TRIANGULAR_SOLVE:
      ToColumnMajor(in, 0, n, n, a);
      ToColumnMajor(in, 1, n, k, b);
      if (n > 0 && k > 0) {
        Trsm(uplo == 'U' ? CblasUpper : CblasLower,
             call.flags & KILN_LINALG_UNIT ? CblasUnit : CblasNonUnit, n, k, a, ld, b, ld);
      }
      ToRowMajor(b, n, k, in.Result<T>(0, n * k));
      return;
  }
}

template <typename T>
int RunBatch(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
             void* const* results) {
  // Per matrix: A's copy (m x n, or n x n), B's (n x k) and the pivots.
  const int64_t a_count = std::max(call.m, call.n) * call.n;
  const int64_t b_count = call.n * call.k;
  const int64_t pivot_count = std::max(call.m, call.n);
  std::atomic<bool> failed{false};
  pool.ParallelFor(call.batch, 1, [&](int64_t begin, int64_t end) {
    thread_local GrowingBuffer workspace;
    const int64_t bytes = (a_count + b_count) * sizeof(T) + pivot_count * sizeof(int) + 64;
    char* base = static_cast<char*>(workspace.Get(bytes));
    if (base == nullptr) {
      fprintf(stderr, "kiln runtime: out of memory for %lld bytes of LAPACK workspace\n",
              static_cast<long long>(bytes));
      failed = true;
      return;
    }
    T* a = reinterpret_cast<T*>(base);
    T* b = a + a_count;
    int* pivots = reinterpret_cast<int*>(b + b_count);
    for (int64_t i = begin; i < end; ++i) Run<T>({call, operands, results, i}, a, b, pivots);
  });
  return failed ? 1 : 0;
}

}  // namespace

int ForEachMatrix(ThreadPool& pool, const kiln_linalg& call, const char* what,
                  const std::function<void(int64_t)>& matrix) {
  std::atomic<bool> failed{false};
  pool.ParallelFor(call.batch, 1, [&](int64_t begin, int64_t end) {
    try {
      for (int64_t i = begin; i < end; ++i) matrix(i);
    } catch (const std::bad_alloc&) {
      fprintf(stderr, "kiln runtime: out of memory for %s (%lld x %lld)\n", what,
              static_cast<long long>(call.m), static_cast<long long>(call.n));
      failed = true;
    }
  });
  return failed ? 1 : 0;
}

int RunLinalg(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
              void* const* results) {
  return call.float64 ? RunBatch<double>(pool, call, operands, results)
                      : RunBatch<float>(pool, call, operands, results);
}

}  // namespace kiln
