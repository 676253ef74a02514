// The generated-loop side of //tools/bench:gemm: C = A.B (row-major, no
// strides) as Kiln's code generator would write a small GEMM, compiled with
// its flags (-O3 -ffp-contract=off -fno-unroll-loops) for this CPU's widest
// vectors (512-bit with AVX-512, else AVX2; chosen at run time).
#ifndef KILN_TOOLS_BENCH_GEMM_LOOP_H_
#define KILN_TOOLS_BENCH_GEMM_LOOP_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// One row of C at a time, accumulated in a row buffer (n <= 1024) with an
// explicit FMA, vectorized over the columns: a[i][p] broadcast against row
// p of B.
void KilnBenchGemmLoop(const float* __restrict a, const float* __restrict b, float* __restrict c,
                       int64_t m, int64_t n, int64_t k);

#ifdef __cplusplus
}
#endif

#endif  // KILN_TOOLS_BENCH_GEMM_LOOP_H_
