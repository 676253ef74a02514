#include "client/runtime/lstsq.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <vector>

#include "client/runtime/linalg.h"

// LAPACK's Fortran entry points, as OpenBLAS exports them: every argument by
// address, and after them the length of each character argument.
extern "C" {
void sgels_(const char* trans, const int* m, const int* n, const int* nrhs, float* a,
            const int* lda, float* b, const int* ldb, float* work, const int* lwork, int* info,
            size_t trans_length);
void dgels_(const char* trans, const int* m, const int* n, const int* nrhs, double* a,
            const int* lda, double* b, const int* ldb, double* work, const int* lwork, int* info,
            size_t trans_length);
void sgelsy_(const int* m, const int* n, const int* nrhs, float* a, const int* lda, float* b,
             const int* ldb, int* jpvt, const float* rcond, int* rank, float* work,
             const int* lwork, int* info);
void dgelsy_(const int* m, const int* n, const int* nrhs, double* a, const int* lda, double* b,
             const int* ldb, int* jpvt, const double* rcond, int* rank, double* work,
             const int* lwork, int* info);
void sgelsd_(const int* m, const int* n, const int* nrhs, float* a, const int* lda, float* b,
             const int* ldb, float* s, const float* rcond, int* rank, float* work, const int* lwork,
             int* iwork, int* info);
void dgelsd_(const int* m, const int* n, const int* nrhs, double* a, const int* lda, double* b,
             const int* ldb, double* s, const double* rcond, int* rank, double* work,
             const int* lwork, int* iwork, int* info);
void sgelss_(const int* m, const int* n, const int* nrhs, float* a, const int* lda, float* b,
             const int* ldb, float* s, const float* rcond, int* rank, float* work, const int* lwork,
             int* info);
void dgelss_(const int* m, const int* n, const int* nrhs, double* a, const int* lda, double* b,
             const int* ldb, double* s, const double* rcond, int* rank, double* work,
             const int* lwork, int* info);
}

namespace kiln {
namespace {

// One driver's call on column-major A (lda m) and B (ldb max(1, m, n)),
// with workspace `work` of `lwork` elements (-1: a query, the size in
// work[0] and iwork[0]).
struct Problem {
  int m, n, k, ldb;
  int* jpvt;
  int* iwork;
  int rank = 0, info = 0;
};

void Driver(int64_t flags, Problem& p, float* a, float* b, float* s, float rcond, float* work,
            int lwork) {
  const int lda = std::max(1, p.m);
  if (flags & KILN_LINALG_GELS) {
    sgels_("N", &p.m, &p.n, &p.k, a, &lda, b, &p.ldb, work, &lwork, &p.info, 1);
  } else if (flags & KILN_LINALG_GELSD) {
    sgelsd_(&p.m, &p.n, &p.k, a, &lda, b, &p.ldb, s, &rcond, &p.rank, work, &lwork, p.iwork,
            &p.info);
  } else if (flags & KILN_LINALG_GELSS) {
    sgelss_(&p.m, &p.n, &p.k, a, &lda, b, &p.ldb, s, &rcond, &p.rank, work, &lwork, &p.info);
  } else {
    sgelsy_(&p.m, &p.n, &p.k, a, &lda, b, &p.ldb, p.jpvt, &rcond, &p.rank, work, &lwork, &p.info);
  }
}
void Driver(int64_t flags, Problem& p, double* a, double* b, double* s, double rcond, double* work,
            int lwork) {
  const int lda = std::max(1, p.m);
  if (flags & KILN_LINALG_GELS) {
    dgels_("N", &p.m, &p.n, &p.k, a, &lda, b, &p.ldb, work, &lwork, &p.info, 1);
  } else if (flags & KILN_LINALG_GELSD) {
    dgelsd_(&p.m, &p.n, &p.k, a, &lda, b, &p.ldb, s, &rcond, &p.rank, work, &lwork, p.iwork,
            &p.info);
  } else if (flags & KILN_LINALG_GELSS) {
    dgelss_(&p.m, &p.n, &p.k, a, &lda, b, &p.ldb, s, &rcond, &p.rank, work, &lwork, &p.info);
  } else {
    dgelsy_(&p.m, &p.n, &p.k, a, &lda, b, &p.ldb, p.jpvt, &rcond, &p.rank, work, &lwork, &p.info);
  }
}

// Operand i's matrix `batch_index` (rows x cols) into column-major `dst`
// with leading dimension `ld`.
template <typename T>
void Read(const kiln_linalg& call, const void* const* operands, int i, int64_t batch_index,
          int64_t rows, int64_t cols, int64_t ld, T* dst) {
  const kiln_int64* strides = call.strides[i];
  const T* src = static_cast<const T*>(operands[i]) + batch_index * strides[0];
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) dst[r + c * ld] = src[r * strides[1] + c * strides[2]];
  }
}

template <typename T>
void Solve(const kiln_linalg& call, const void* const* operands, void* const* results,
           int64_t index) {
  thread_local std::vector<T> a, b, s, work;
  thread_local std::vector<int> jpvt, iwork;
  Problem p;
  p.m = static_cast<int>(call.m);
  p.n = static_cast<int>(call.n);
  p.k = static_cast<int>(call.k);
  p.ldb = std::max({1, p.m, p.n});
  const int reflectors = std::min(p.m, p.n);
  a.resize(std::max(1, p.m * p.n));
  b.assign(static_cast<size_t>(std::max(1, p.ldb * p.k)), T(0));
  s.assign(std::max(1, reflectors), T(0));
  jpvt.assign(std::max(1, p.n), 0);
  Read(call, operands, 0, index, p.m, p.n, std::max(1, p.m), a.data());
  Read(call, operands, 2, index, p.m, p.k, p.ldb, b.data());
  const kiln_int64* rcond_strides = call.strides[1];
  const T rcond = static_cast<const T*>(operands[1])[index * rcond_strides[0]];
  T size = 0;
  iwork.resize(1);
  p.iwork = iwork.data();
  p.jpvt = jpvt.data();
  Driver(call.flags, p, a.data(), b.data(), s.data(), rcond, &size, -1);
  work.resize(std::max<size_t>({1, work.size(), static_cast<size_t>(size)}));
  iwork.resize(std::max<size_t>({1, iwork.size(), static_cast<size_t>(iwork[0])}));
  p.iwork = iwork.data();
  p.info = 0;
  Driver(call.flags, p, a.data(), b.data(), s.data(), rcond, work.data(),
         static_cast<int>(work.size()));
  if (call.flags & KILN_LINALG_GELS) p.rank = std::min(p.m, p.n);
  if (results[0] != nullptr) {
    T* x = static_cast<T*>(results[0]) + index * p.n * p.k;
    for (int r = 0; r < p.n; ++r) {
      for (int c = 0; c < p.k; ++c) x[r * p.k + c] = b[r + c * p.ldb];
    }
  }
  if (results[1] != nullptr) {
    T* residuals = static_cast<T*>(results[1]) + index * p.k;
    for (int c = 0; c < p.k; ++c) {
      T sum = 0;
      for (int r = p.n; r < p.m; ++r) sum += b[r + c * p.ldb] * b[r + c * p.ldb];
      residuals[c] = sum;
    }
  }
  if (results[2] != nullptr) static_cast<int64_t*>(results[2])[index] = p.rank;
  if (results[3] != nullptr) {
    std::copy(s.begin(), s.begin() + reflectors, static_cast<T*>(results[3]) + index * reflectors);
  }
  if (results[4] != nullptr) static_cast<int32_t*>(results[4])[index] = p.info;
}

template <typename T>
int RunBatch(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
             void* const* results) {
  return ForEachMatrix(pool, call, "a least squares' LAPACK workspace",
                       [&](int64_t i) { Solve<T>(call, operands, results, i); });
}

}  // namespace

int RunLstsq(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
             void* const* results) {
  return call.float64 ? RunBatch<double>(pool, call, operands, results)
                      : RunBatch<float>(pool, call, operands, results);
}

}  // namespace kiln
