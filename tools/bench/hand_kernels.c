#include "tools/bench/hand_kernels.h"

#include <immintrin.h>
#include <math.h>

// No -march for this file: the AVX-512 kernels carry target attributes and
// run only where __builtin_cpu_supports says they can (the object may come
// from a cache shared with another machine). The copy loop is compiled
// once per vector width and picks one at run time, so on each CPU it moves
// data at the width Kiln's own artifacts use there.
#define KILN_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))
// GCC's generic tuning keeps to 256-bit vectors even with AVX-512; clang's
// uses 512 (and has no such target attribute).
#if defined(__clang__)
#define KILN_PREFER_512
#else
#define KILN_PREFER_512 __attribute__((target("prefer-vector-width=512")))
#endif

KILN_AVX512 KILN_PREFER_512 static void CopyAvx512(const float* __restrict x, float* __restrict y,
                                                   int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}

__attribute__((target("avx2,fma"))) static void CopyAvx2(const float* __restrict x,
                                                         float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}

static void CopyBaseline(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}

int KilnBenchHasAvx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

void KilnBenchCopyFloats(const float* __restrict x, float* __restrict y, int64_t n) {
  static int width = 0;  // 512, 256 or 128 (SSE2, every x86-64)
  if (width == 0) {
    __builtin_cpu_init();
    width = KilnBenchHasAvx512() ? 512 : __builtin_cpu_supports("avx2") ? 256 : 128;
  }
  if (width == 512) {
    CopyAvx512(x, y, n);
  } else if (width == 256) {
    CopyAvx2(x, y, n);
  } else {
    CopyBaseline(x, y, n);
  }
}

KILN_AVX512 void KilnBenchTailStreaming(const float* __restrict x, float* __restrict y, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    _mm512_stream_ps(y + i, _mm512_max_ps(_mm512_add_ps(_mm512_load_ps(x + i), one), zero));
  }
  _mm_sfence();  // streaming stores are weakly ordered
}

KILN_AVX512 float KilnBenchSum(const float* x, int64_t n) {
  __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a = _mm512_add_ps(a, _mm512_loadu_ps(x + i));
    b = _mm512_add_ps(b, _mm512_loadu_ps(x + i + 16));
    c = _mm512_add_ps(c, _mm512_loadu_ps(x + i + 32));
    d = _mm512_add_ps(d, _mm512_loadu_ps(x + i + 48));
  }
  for (; i < n; i += 16) a = _mm512_add_ps(a, _mm512_loadu_ps(x + i));
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
}

// kiln_expf_nonpositive's arithmetic on 16 lanes (x <= 0 or NaN).
KILN_AVX512 static inline __m512 Exp16(__m512 x, int scalef) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // a NaN x stays NaN
  const __m512 shifted =
      _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), _mm512_set1_ps(0x1.8p+23f));
  const __m512 k = _mm512_sub_ps(shifted, _mm512_set1_ps(0x1.8p+23f));
  __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-0x1.62e400p-1f), x);
  r = _mm512_fmadd_ps(k, _mm512_set1_ps(-0x1.7f7d1cp-20f), r);
  __m512 p = _mm512_set1_ps(0x1.a0c1d6p-13f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.6e8d44p-10f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.11115ap-7f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.5554b8p-5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.555556p-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.000000p-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  if (scalef) return _mm512_scalef_ps(p, k);
  const __m512i biased = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_castps_si512(shifted), _mm512_set1_epi32(64 + 127 - 0x4b400000)), 23);
  return _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(biased)), _mm512_set1_ps(0x1p-64f));
}

KILN_AVX512 void KilnBenchSoftmaxRows(const float* __restrict x, float* __restrict y, int64_t rows,
                                      int64_t cols, int scalef) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* in = x + row * cols;
    float* out = y + row * cols;
    __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    for (int64_t j = 0; j < cols; j += 64) {
      m0 = _mm512_max_ps(m0, _mm512_loadu_ps(in + j));
      m1 = _mm512_max_ps(m1, _mm512_loadu_ps(in + j + 16));
      m2 = _mm512_max_ps(m2, _mm512_loadu_ps(in + j + 32));
      m3 = _mm512_max_ps(m3, _mm512_loadu_ps(in + j + 48));
    }
    const __m512 max = _mm512_set1_ps(
        _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3))));
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t j = 0; j < cols; j += 64) {
      const __m512 e0 = Exp16(_mm512_sub_ps(_mm512_loadu_ps(in + j), max), scalef);
      const __m512 e1 = Exp16(_mm512_sub_ps(_mm512_loadu_ps(in + j + 16), max), scalef);
      const __m512 e2 = Exp16(_mm512_sub_ps(_mm512_loadu_ps(in + j + 32), max), scalef);
      const __m512 e3 = Exp16(_mm512_sub_ps(_mm512_loadu_ps(in + j + 48), max), scalef);
      _mm512_storeu_ps(out + j, e0);
      _mm512_storeu_ps(out + j + 16, e1);
      _mm512_storeu_ps(out + j + 32, e2);
      _mm512_storeu_ps(out + j + 48, e3);
      s0 = _mm512_add_ps(s0, e0);
      s1 = _mm512_add_ps(s1, e1);
      s2 = _mm512_add_ps(s2, e2);
      s3 = _mm512_add_ps(s3, e3);
    }
    const __m512 inverse = _mm512_set1_ps(
        1.0f / _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3))));
    for (int64_t j = 0; j < cols; j += 16) {
      _mm512_storeu_ps(out + j, _mm512_mul_ps(_mm512_loadu_ps(out + j), inverse));
    }
  }
}
