// Whether a GEMM copies its transposed B row-major before multiplying.
//
// OpenBLAS multiplies by a B stored transposed at a speed that depends on
// the CPU and on the kernels OpenBLAS picked for it, and a row-major copy
// (cblas_somatcopy, ~70 us per MiB) costs the same everywhere. Measured
// with //tools/bench:gemm and by hand:
//   - a small B (up to 16K elements) is always worth copying: used
//     transposed it took 1.2-1.8x the row-major time;
//   - a B of up to 2 MiB of floats, against an A of 32 rows or more, goes
//     either way: mlp's 64x256x1024 took 465 us transposed and 416 us
//     copied on a Zen 4, but 342 against 400 us on a Zen 5 (Haswell
//     kernels), 229 against 273 with OpenBLAS's SkylakeX kernels and 285
//     against 255 with its Cooperlake ones. Such a shape is timed both
//     ways on its first calls in the process, and the faster way kept;
//   - a larger B, or a shorter A, is used as it is: copying ViT's 3072 x
//     768 weights (9 MiB) made its 197-row product 8% slower.
// Both ways give the same bits (OpenBLAS packs either into the same
// panels), so the choice changes only the time.
#ifndef KILN_CLIENT_RUNTIME_TRANSPOSED_B_H_
#define KILN_CLIENT_RUNTIME_TRANSPOSED_B_H_

#include <cstdint>
#include <utility>

#include "client/runtime/faster_of_two.h"

namespace kiln {

class TransposedBChoices {
 public:
  struct Choice {
    bool copy;   // copy B row-major first
    bool timed;  // the caller times this call and Records it
  };

  // For the product of m rows of A by a k x n B stored transposed, of
  // `element_bytes`-byte elements, split over `threads` threads.
  Choice Choose(int64_t m, int64_t k, int64_t n, int element_bytes, int threads);
  // A timed call's time (the copy, if any, and the product), in ns.
  void Record(int64_t m, int64_t k, int64_t n, int element_bytes, int threads, bool copy,
              int64_t ns);

  // The choices of this process.
  static TransposedBChoices& Process();

  // Timed calls of each way before a shape's choice is made, after one
  // untimed call.
  static constexpr int kTrials = FasterOfTwo<int>::kTrials;

 private:
  struct Shape {
    int64_t m, k, n;
    int element_bytes, threads;
    bool operator==(const Shape& other) const {
      return m == other.m && k == other.k && n == other.n && element_bytes == other.element_bytes &&
             threads == other.threads;
    }
    template <typename H>
    friend H AbslHashValue(H state, const Shape& shape) {
      return H::combine(std::move(state), shape.m, shape.k, shape.n, shape.element_bytes,
                        shape.threads);
    }
  };
  FasterOfTwo<Shape> ways_;  // way 1: copied
};

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_TRANSPOSED_B_H_
