#include "client/runtime/qr.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <vector>

#include "client/runtime/linalg.h"

// LAPACK's Fortran entry points, as OpenBLAS exports them: every argument by
// address, and after them the length of each character argument.
extern "C" {
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work,
             const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau,
             float* work, const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
void sormqr_(const char* side, const char* trans, const int* m, const int* n, const int* k,
             const float* a, const int* lda, const float* tau, float* c, const int* ldc,
             float* work, const int* lwork, int* info, size_t side_length, size_t trans_length);
void dormqr_(const char* side, const char* trans, const int* m, const int* n, const int* k,
             const double* a, const int* lda, const double* tau, double* c, const int* ldc,
             double* work, const int* lwork, int* info, size_t side_length, size_t trans_length);
}

namespace kiln {
namespace {

void Geqrf(int m, int n, float* a, float* tau, float* work, int lwork, int* info) {
  const int lda = std::max(1, m);
  sgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
}
void Geqrf(int m, int n, double* a, double* tau, double* work, int lwork, int* info) {
  const int lda = std::max(1, m);
  dgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
}
void Orgqr(int m, int n, int k, float* a, const float* tau, float* work, int lwork, int* info) {
  const int lda = std::max(1, m);
  sorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
void Orgqr(int m, int n, int k, double* a, const double* tau, double* work, int lwork, int* info) {
  const int lda = std::max(1, m);
  dorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
void Ormqr(char trans, int m, int n, int k, const float* a, const float* tau, float* c, float* work,
           int lwork, int* info) {
  const int ld = std::max(1, m);
  sormqr_("L", &trans, &m, &n, &k, a, &ld, tau, c, &ld, work, &lwork, info, 1, 1);
}
void Ormqr(char trans, int m, int n, int k, const double* a, const double* tau, double* c,
           double* work, int lwork, int* info) {
  const int ld = std::max(1, m);
  dormqr_("L", &trans, &m, &n, &k, a, &ld, tau, c, &ld, work, &lwork, info, 1, 1);
}

// One matrix of the batch: operand i's elements and result j's storage.
struct Matrix {
  const kiln_linalg& call;
  const void* const* operands;
  void* const* results;
  int64_t batch_index;

  // Operand i (rows x cols; a vector has one column) in column-major order.
  template <typename T>
  void Read(int i, int64_t rows, int64_t cols, T* dst) const {
    const kiln_int64* strides = call.strides[i];
    const T* src = static_cast<const T*>(operands[i]) + batch_index * strides[0];
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t r = 0; r < rows; ++r) dst[r + c * rows] = src[r * strides[1] + c * strides[2]];
    }
  }
  // Result j (rows x cols, row-major) from column-major `src`, if wanted.
  template <typename T>
  void Write(int j, int64_t rows, int64_t cols, const T* src) const {
    if (results[j] == nullptr) return;
    T* dst = static_cast<T*>(results[j]) + batch_index * rows * cols;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = src[r + c * rows];
    }
  }
};

// `run(work, lwork)` once asking for the workspace's size (lwork = -1),
// then with this thread's workspace grown to it.
template <typename T, typename F>
void WithWorkspace(std::vector<T>& work, F run) {
  T size = 0;
  run(&size, -1);
  work.resize(std::max<size_t>({1, work.size(), static_cast<size_t>(size)}));
  run(work.data(), static_cast<int>(work.size()));
}

template <typename T>
void Run(const Matrix& in) {
  thread_local std::vector<T> a, tau, c, work;
  const kiln_linalg& call = in.call;
  const int m = static_cast<int>(call.m), n = static_cast<int>(call.n);
  const int k = static_cast<int>(call.k), reflectors = std::min(m, n);
  a.resize(std::max(1, m * n));
  in.Read(0, m, n, a.data());
  int info = 0;
  switch (call.routine) {
    case KILN_LINALG_GEQRF:
      tau.resize(std::max(1, reflectors));
      WithWorkspace(work,
                    [&](T* w, int lwork) { Geqrf(m, n, a.data(), tau.data(), w, lwork, &info); });
      in.Write(0, m, n, a.data());
      in.Write(1, 1, reflectors, tau.data());
      return;
    case KILN_LINALG_HOUSEHOLDER_PRODUCT:
      tau.resize(std::max(1, k));
      in.Read(1, k, 1, tau.data());
      WithWorkspace(
          work, [&](T* w, int lwork) { Orgqr(m, n, k, a.data(), tau.data(), w, lwork, &info); });
      in.Write(0, m, n, a.data());
      return;
    case KILN_LINALG_ORMQR:
      tau.resize(std::max(1, n));
      in.Read(1, n, 1, tau.data());
      c.resize(std::max(1, m * k));
      in.Read(2, m, k, c.data());
      WithWorkspace(work, [&](T* w, int lwork) {
        Ormqr(call.flags & KILN_LINALG_ADJOINT ? 'T' : 'N', m, k, n, a.data(), tau.data(), c.data(),
              w, lwork, &info);
      });
      in.Write(0, m, k, c.data());
      return;
  }
}

template <typename T>
int RunBatch(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
             void* const* results) {
  return ForEachMatrix(pool, call, "a QR's LAPACK workspace",
                       [&](int64_t i) { Run<T>({call, operands, results, i}); });
}

}  // namespace

bool IsQrRoutine(int64_t routine) {
  return routine == KILN_LINALG_GEQRF || routine == KILN_LINALG_HOUSEHOLDER_PRODUCT ||
         routine == KILN_LINALG_ORMQR;
}

int RunQr(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
          void* const* results) {
  return call.float64 ? RunBatch<double>(pool, call, operands, results)
                      : RunBatch<float>(pool, call, operands, results);
}

}  // namespace kiln
