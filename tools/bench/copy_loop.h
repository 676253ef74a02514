// The copy baseline of //tools/bench:kernels: what a bandwidth-bound kernel
// such as relu(x + 1) could at best run at on the same buffers.
#ifndef KILN_TOOLS_BENCH_COPY_LOOP_H_
#define KILN_TOOLS_BENCH_COPY_LOOP_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// y[i] = x[i] for i in [0, n): a plain loop compiled -O3 -march=native, kept
// a loop (not turned into a memcpy call) so it moves data the way a
// generated kernel does.
void KilnBenchCopyFloats(const float* __restrict x, float* __restrict y, int64_t n);

#ifdef __cplusplus
}
#endif

#endif  // KILN_TOOLS_BENCH_COPY_LOOP_H_
