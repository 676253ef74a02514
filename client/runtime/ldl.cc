#include "client/runtime/ldl.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "client/runtime/linalg.h"

// LAPACK's Fortran entry points, as OpenBLAS exports them: every argument by
// address, and after them the length of each character argument.
extern "C" {
void ssytrf_(const char* uplo, const int* n, float* a, const int* lda, int* ipiv, float* work,
             const int* lwork, int* info, size_t uplo_length);
void dsytrf_(const char* uplo, const int* n, double* a, const int* lda, int* ipiv, double* work,
             const int* lwork, int* info, size_t uplo_length);
void ssytrs_(const char* uplo, const int* n, const int* nrhs, const float* a, const int* lda,
             const int* ipiv, float* b, const int* ldb, int* info, size_t uplo_length);
void dsytrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda,
             const int* ipiv, double* b, const int* ldb, int* info, size_t uplo_length);
}

namespace kiln {
namespace {

void Sytrf(int n, float* a, int* pivots, float* work, int lwork, int* info) {
  const int lda = std::max(1, n);
  ssytrf_("L", &n, a, &lda, pivots, work, &lwork, info, 1);
}
void Sytrf(int n, double* a, int* pivots, double* work, int lwork, int* info) {
  const int lda = std::max(1, n);
  dsytrf_("L", &n, a, &lda, pivots, work, &lwork, info, 1);
}
void Sytrs(int n, int k, const float* a, const int* pivots, float* b, int* info) {
  const int ld = std::max(1, n);
  ssytrs_("L", &n, &k, a, &ld, pivots, b, &ld, info, 1);
}
void Sytrs(int n, int k, const double* a, const int* pivots, double* b, int* info) {
  const int ld = std::max(1, n);
  dsytrs_("L", &n, &k, a, &ld, pivots, b, &ld, info, 1);
}

// Operand i's matrix `index` (rows x cols; a vector has one column) in
// column-major order.
template <typename T>
void Read(const kiln_linalg& call, const void* const* operands, int i, int64_t index, int64_t rows,
          int64_t cols, T* dst) {
  const kiln_int64* strides = call.strides[i];
  const T* src = static_cast<const T*>(operands[i]) + index * strides[0];
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) dst[r + c * rows] = src[r * strides[1] + c * strides[2]];
  }
}

// Result j's matrix `index` (rows x cols, row-major) from column-major
// `src`, if wanted; `lower` keeps only the lower triangle, zeros above.
template <typename T>
void Write(void* const* results, int j, int64_t index, int64_t rows, int64_t cols, const T* src,
           bool lower = false) {
  if (results[j] == nullptr) return;
  T* dst = static_cast<T*>(results[j]) + index * rows * cols;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      dst[r * cols + c] = lower && c > r ? T(0) : src[r + c * rows];
  }
}

template <typename T>
void Run(const kiln_linalg& call, const void* const* operands, void* const* results,
         int64_t index) {
  thread_local std::vector<T> a, b, work;
  thread_local std::vector<int> pivots;
  const int n = static_cast<int>(call.n), k = static_cast<int>(call.k);
  a.resize(std::max(1, n * n));
  pivots.resize(std::max(1, n));
  Read(call, operands, 0, index, n, n, a.data());
  int info = 0;
  if (call.routine == KILN_LINALG_LDL_FACTOR) {
    T size = 0;
    Sytrf(n, a.data(), pivots.data(), &size, -1, &info);
    work.resize(std::max<size_t>({1, work.size(), static_cast<size_t>(size)}));
    Sytrf(n, a.data(), pivots.data(), work.data(), static_cast<int>(work.size()), &info);
    Write(results, 0, index, n, n, a.data(), /*lower=*/true);
    if (results[1] != nullptr) {
      std::copy(pivots.begin(), pivots.begin() + n, static_cast<int32_t*>(results[1]) + index * n);
    }
    if (results[2] != nullptr) static_cast<int32_t*>(results[2])[index] = info;
    return;
  }
  const kiln_int64* pivot_strides = call.strides[1];
  const int32_t* given = static_cast<const int32_t*>(operands[1]) + index * pivot_strides[0];
  bool valid = true;
  for (int i = 0; i < n; ++i) {
    pivots[i] = given[i * pivot_strides[1]];
    valid = valid && pivots[i] != 0 && pivots[i] >= -n && pivots[i] <= n;
  }
  b.resize(std::max(1, n * k));
  Read(call, operands, 2, index, n, k, b.data());
  // sytrs indexes rows by the pivots: ones that sytrf cannot have given
  // make X NaN rather than a read out of bounds.
  if (valid) {
    Sytrs(n, k, a.data(), pivots.data(), b.data(), &info);
  } else {
    std::fill(b.begin(), b.end(), std::numeric_limits<T>::quiet_NaN());
  }
  Write(results, 0, index, n, k, b.data());
}

template <typename T>
int RunBatch(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
             void* const* results) {
  return ForEachMatrix(pool, call, "an LDL factorization's LAPACK workspace",
                       [&](int64_t i) { Run<T>(call, operands, results, i); });
}

}  // namespace

bool IsLdlRoutine(int64_t routine) {
  return routine == KILN_LINALG_LDL_FACTOR || routine == KILN_LINALG_LDL_SOLVE;
}

int RunLdl(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
           void* const* results) {
  return call.float64 ? RunBatch<double>(pool, call, operands, results)
                      : RunBatch<float>(pool, call, operands, results);
}

}  // namespace kiln
