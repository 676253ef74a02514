#include "client/runtime/matrix_exp.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>
#include <vector>

#include "client/runtime/linalg.h"

extern "C" {
void dgesv_(const int* n, const int* nrhs, double* a, const int* lda, int* pivots, double* b,
            const int* ldb, int* info);
}

namespace kiln {
namespace {

// Higham's bound on the 1-norm for which r_13 is exact to double precision.
constexpr double kTheta13 = 5.371920351148152;
constexpr int kDegree = 13;

// The Pade coefficients b_j = (2m - j)! m! / ((2m)! j! (m - j)!), m = 13,
// scaled so that b_13 = 1 as Higham's table: b_j / b_13.
std::vector<double> PadeCoefficients() {
  std::vector<double> b(kDegree + 1);
  b[0] = 1;
  // b_{j+1} / b_j = (m - j) / ((2m - j) (j + 1)).
  for (int j = 0; j < kDegree; ++j) {
    b[j + 1] = b[j] * (kDegree - j) / ((2.0 * kDegree - j) * (j + 1));
  }
  for (double& coefficient : b) coefficient /= b[kDegree];
  return b;
}

// c = a b (n x n, column-major).
void Multiply(int n, const double* a, const double* b, double* c) {
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
}

// exp(a) into `result` (n x n, column-major; a is overwritten).
void Exponential(int n, double* a, double* result) {
  static const std::vector<double> b = PadeCoefficients();
  const int64_t count = int64_t{n} * n;
  double norm = 0;
  for (int c = 0; c < n; ++c) {
    double sum = 0;
    for (int r = 0; r < n; ++r) sum += std::abs(a[r + c * n]);
    norm = std::max(norm, sum);
  }
  if (!std::isfinite(norm)) {
    std::fill(result, result + count, std::numeric_limits<double>::quiet_NaN());
    return;
  }
  const int squarings =
      norm > kTheta13 ? static_cast<int>(std::ceil(std::log2(norm / kTheta13))) : 0;
  const double scale = std::ldexp(1.0, -squarings);
  for (int64_t i = 0; i < count; ++i) a[i] *= scale;
  thread_local std::vector<double> a2, a4, a6, u, v, t;
  for (std::vector<double>* m : {&a2, &a4, &a6, &u, &v, &t}) m->resize(count);
  Multiply(n, a, a, a2.data());
  Multiply(n, a2.data(), a2.data(), a4.data());
  Multiply(n, a4.data(), a2.data(), a6.data());
  // U = A [A6 (b13 A6 + b11 A4 + b9 A2) + b7 A6 + b5 A4 + b3 A2 + b1 I],
  // V = A6 (b12 A6 + b10 A4 + b8 A2) + b6 A6 + b4 A4 + b2 A2 + b0 I.
  for (int64_t i = 0; i < count; ++i) {
    t[i] = b[13] * a6[i] + b[11] * a4[i] + b[9] * a2[i];
    result[i] = b[12] * a6[i] + b[10] * a4[i] + b[8] * a2[i];
  }
  Multiply(n, a6.data(), t.data(), u.data());
  Multiply(n, a6.data(), result, v.data());
  for (int64_t i = 0; i < count; ++i) {
    t[i] = u[i] + b[7] * a6[i] + b[5] * a4[i] + b[3] * a2[i];
    v[i] += b[6] * a6[i] + b[4] * a4[i] + b[2] * a2[i];
  }
  for (int i = 0; i < n; ++i) {
    t[i + int64_t{i} * n] += b[1];
    v[i + int64_t{i} * n] += b[0];
  }
  Multiply(n, a, t.data(), u.data());
  // (V - U) X = V + U.
  for (int64_t i = 0; i < count; ++i) {
    result[i] = v[i] + u[i];
    t[i] = v[i] - u[i];
  }
  thread_local std::vector<int> pivots;
  pivots.resize(std::max(1, n));
  int info = 0;
  const int ld = std::max(1, n);
  dgesv_(&n, &n, t.data(), &ld, pivots.data(), result, &ld, &info);
  for (int i = 0; i < squarings; ++i) {
    Multiply(n, result, result, t.data());
    std::copy(t.begin(), t.end(), result);
  }
}

template <typename T>
void Run(const kiln_linalg& call, const void* const* operands, void* const* results,
         int64_t index) {
  thread_local std::vector<double> a, exponential;
  const int n = static_cast<int>(call.n);
  a.resize(std::max<int64_t>(1, int64_t{n} * n));
  exponential.resize(a.size());
  const kiln_int64* strides = call.strides[0];
  const T* src = static_cast<const T*>(operands[0]) + index * strides[0];
  for (int c = 0; c < n; ++c) {
    for (int r = 0; r < n; ++r) a[r + int64_t{c} * n] = src[r * strides[1] + c * strides[2]];
  }
  if (n > 0) Exponential(n, a.data(), exponential.data());
  T* dst = static_cast<T*>(results[0]) + index * n * n;
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) dst[r * n + c] = static_cast<T>(exponential[r + int64_t{c} * n]);
  }
}

template <typename T>
int RunBatch(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
             void* const* results) {
  return ForEachMatrix(pool, call, "a matrix exponential's workspace",
                       [&](int64_t i) { Run<T>(call, operands, results, i); });
}

}  // namespace

int RunMatrixExp(ThreadPool& pool, const kiln_linalg& call, const void* const* operands,
                 void* const* results) {
  if (results[0] == nullptr) return 0;
  return call.float64 ? RunBatch<double>(pool, call, operands, results)
                      : RunBatch<float>(pool, call, operands, results);
}

}  // namespace kiln
