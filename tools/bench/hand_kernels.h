// Hand-written baselines for //tools/bench:kernels: what a kernel could at
// best run at on this machine, timed in the same run as Kiln's generated
// code on the same buffers (docs/BENCHMARKS.md, "Kernels").
#ifndef KILN_TOOLS_BENCH_HAND_KERNELS_H_
#define KILN_TOOLS_BENCH_HAND_KERNELS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// y[i] = x[i] for i in [0, n): a plain loop compiled -O3 for this CPU's
// widest vectors (AVX-512, else AVX2, chosen at run time), kept a loop (not
// turned into a memcpy call) so it moves data the way a generated kernel
// does. The floor of any one-pass kernel such as relu(x + 1).
void KilnBenchCopyFloats(const float* __restrict x, float* __restrict y, int64_t n);

// Whether this CPU runs the AVX-512 baselines below (AVX-512 F, DQ, BW and
// VL, checked at run time); where it does not, calling them is an illegal
// instruction.
int KilnBenchHasAvx512(void);

// y = relu(x + 1) with streaming (non-temporal) stores: y is written without
// first being read into the cache, and ends up in no cache. x and y 64-byte
// aligned, n a multiple of 16.
void KilnBenchTailStreaming(const float* __restrict x, float* __restrict y, int64_t n);

// The sum of x[0, n): what a consumer of an output reads next. n a multiple
// of 16.
float KilnBenchSum(const float* x, int64_t n);

// softmax over `rows` rows of `cols` floats (a multiple of 64), AVX-512
// intrinsics: a plain max, exp fused with the sum, one multiply per element.
// exp is Kiln's polynomial (kiln_math.h); `scalef` applies 2^k with one
// vscalefps, else as kiln_expf_nonpositive does (two multiplies).
void KilnBenchSoftmaxRows(const float* __restrict x, float* __restrict y, int64_t rows,
                          int64_t cols, int scalef);

#ifdef __cplusplus
}
#endif

#endif  // KILN_TOOLS_BENCH_HAND_KERNELS_H_
