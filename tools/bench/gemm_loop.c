#include "tools/bench/gemm_loop.h"

void KilnBenchGemmLoop(const float* __restrict a, const float* __restrict b, float* __restrict c,
                       int64_t m, int64_t n, int64_t k) {
  float row[1024] __attribute__((aligned(64)));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
    for (int64_t p = 0; p < k; ++p) {
      const float x = a[i * k + p];
      for (int64_t j = 0; j < n; ++j) row[j] = __builtin_fmaf(x, b[p * n + j], row[j]);
    }
    for (int64_t j = 0; j < n; ++j) c[i * n + j] = row[j];
  }
}
