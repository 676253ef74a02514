#include "tools/bench/gemm_loop.h"

// Compiled once per vector width (target attributes, not -march: the object
// may come from a build cache shared with another machine) and chosen at
// run time, as Kiln's artifacts are compiled for the CPU they run on.
#if defined(__clang__)
#define KILN_PREFER_512
#else
#define KILN_PREFER_512 __attribute__((target("prefer-vector-width=512")))
#endif

static inline __attribute__((always_inline)) void GemmLoop(const float* __restrict a,
                                                           const float* __restrict b,
                                                           float* __restrict c, int64_t m,
                                                           int64_t n, int64_t k) {
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

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) KILN_PREFER_512 static void
GemmLoopAvx512(const float* __restrict a, const float* __restrict b, float* __restrict c, int64_t m,
               int64_t n, int64_t k) {
  GemmLoop(a, b, c, m, n, k);
}

__attribute__((target("avx2,fma"))) static void GemmLoopAvx2(const float* __restrict a,
                                                             const float* __restrict b,
                                                             float* __restrict c, int64_t m,
                                                             int64_t n, int64_t k) {
  GemmLoop(a, b, c, m, n, k);
}

void KilnBenchGemmLoop(const float* __restrict a, const float* __restrict b, float* __restrict c,
                       int64_t m, int64_t n, int64_t k) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
    GemmLoopAvx512(a, b, c, m, n, k);
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    GemmLoopAvx2(a, b, c, m, n, k);
  } else {
    GemmLoop(a, b, c, m, n, k);  // fmaf through libm: correct, slow
  }
}
