#include "tools/bench/copy_loop.h"

void KilnBenchCopyFloats(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}
