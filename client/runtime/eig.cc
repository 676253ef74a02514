#include "client/runtime/eig.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "client/runtime/linalg.h"

// LAPACK's Fortran entry points, as OpenBLAS exports them: every argument by
// address, and after them the length of each character argument.
extern "C" {
void sgeev_(const char* jobvl, const char* jobvr, const int* n, float* a, const int* lda, float* wr,
            float* wi, float* vl, const int* ldvl, float* vr, const int* ldvr, float* work,
            const int* lwork, int* info, size_t jobvl_length, size_t jobvr_length);
void dgeev_(const char* jobvl, const char* jobvr, const int* n, double* a, const int* lda,
            double* wr, double* wi, double* vl, const int* ldvl, double* vr, const int* ldvr,
            double* work, const int* lwork, int* info, size_t jobvl_length, size_t jobvr_length);
}

namespace kiln {
namespace {

void Geev(bool vectors, int n, float* a, float* wr, float* wi, float* vr, float* work, int lwork,
          int* info) {
  const int ld = std::max(1, n), one = 1;
  float unused = 0;
  sgeev_("N", vectors ? "V" : "N", &n, a, &ld, wr, wi, &unused, &one, vr, &ld, work, &lwork, info,
         1, 1);
}
void Geev(bool vectors, int n, double* a, double* wr, double* wi, double* vr, double* work,
          int lwork, int* info) {
  const int ld = std::max(1, n), one = 1;
  double unused = 0;
  dgeev_("N", vectors ? "V" : "N", &n, a, &ld, wr, wi, &unused, &one, vr, &ld, work, &lwork, info,
         1, 1);
}

template <typename T>
void Run(const kiln_linalg& call, const void* const* operands, void* const* results,
         int64_t index) {
  thread_local std::vector<T> a, wr, wi, vr, work;
  const int n = static_cast<int>(call.n);
  const bool vectors = results[1] != nullptr;
  a.resize(std::max(1, n * n));
  wr.resize(std::max(1, n));
  wi.resize(std::max(1, n));
  vr.resize(vectors ? std::max(1, n * n) : 1);
  const kiln_int64* strides = call.strides[0];
  const T* src = static_cast<const T*>(operands[0]) + index * strides[0];
  for (int c = 0; c < n; ++c) {
    for (int r = 0; r < n; ++r) a[r + c * n] = src[r * strides[1] + c * strides[2]];
  }
  int info = 0;
  T size = 0;
  Geev(vectors, n, a.data(), wr.data(), wi.data(), vr.data(), &size, -1, &info);
  work.resize(std::max<size_t>({1, work.size(), static_cast<size_t>(size)}));
  Geev(vectors, n, a.data(), wr.data(), wi.data(), vr.data(), work.data(),
       static_cast<int>(work.size()), &info);
  if (results[0] != nullptr) {
    T* values = static_cast<T*>(results[0]) + index * n * 2;
    for (int j = 0; j < n; ++j) {
      values[2 * j] = wr[j];
      values[2 * j + 1] = wi[j];
    }
  }
  if (vectors) {
    // Element (r, j) of the row-major n x n complex result.
    T* out = static_cast<T*>(results[1]) + index * n * n * 2;
    auto at = [&](int r, int j) { return out + 2 * (int64_t{r} * n + j); };
    for (int j = 0; j < n; ++j) {
      // A complex pair's columns j and j + 1 hold the real and imaginary
      // parts of the first's vector; the second's is its conjugate.
      const bool pair = wi[j] != 0 && j + 1 < n;
      for (int r = 0; r < n; ++r) {
        const T real = vr[r + int64_t{j} * n];
        const T imaginary = pair ? vr[r + int64_t{j + 1} * n] : T(0);
        at(r, j)[0] = real;
        at(r, j)[1] = imaginary;
        if (pair) {
          at(r, j + 1)[0] = real;
          at(r, j + 1)[1] = -imaginary;
        }
      }
      if (pair) ++j;
    }
  }
  if (results[2] != nullptr) static_cast<int32_t*>(results[2])[index] = info;
}

template <typename T>
int RunBatch(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
             void* const* results) {
  return ForEachMatrix(pool, call, "an eigendecomposition's LAPACK workspace",
                       [&](int64_t i) { Run<T>(call, operands, results, i); });
}

}  // namespace

int RunEig(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
           void* const* results) {
  return call.float64 ? RunBatch<double>(pool, call, operands, results)
                      : RunBatch<float>(pool, call, operands, results);
}

}  // namespace kiln
