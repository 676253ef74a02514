// How the runtime multiplies one GEMM shape: by OpenBLAS on B as stored,
// by OpenBLAS on a row-major copy of a B stored transposed, or by oneDNN's
// matmul (matmul.h). Which is fastest depends on the CPU and on the
// kernels each library picked for it, so where more than one way applies
// a shape's first calls in the process time each and keep the fastest
// (fastest_of.h). The rules, from //tools/bench:gemm (figures in
// docs/BENCHMARKS.md "GEMM choices"):
//   - a product of one row or one column is a matrix-vector product,
//     OpenBLAS's GEMV on the operands as stored (runtime.cc), whatever the
//     libraries asked: it reads the matrix once, so neither a copy of B
//     nor oneDNN can gain;
//   - a small B stored transposed (up to 16K elements) is always worth
//     copying for OpenBLAS: used transposed it is slower on every CPU tried;
//   - a transposed B of up to 2 MiB of floats, against an A of 32 rows or
//     more, goes either way, by CPU and OpenBLAS kernel set, so both are
//     timed. A larger B, or a shorter A, is used as it is: copying it costs
//     more than the product gains;
//   - oneDNN's BRGEMM matmul wins on larger products and loses on small
//     ones. It is offered for float32 products of 2^21 multiply-adds
//     (128^3) or more with a unit stride in each operand: products worth
//     splitting across threads, where its gains are. Loading it maps a
//     large library, so it is loaded on a shape's first oneDNN trial, not
//     its first call, and a process's first result never waits for it.
// OpenBLAS gives the same bits with B copied or not (it packs either into
// the same panels); oneDNN sums in another order, within float32 rounding.
// Pinning one library (GemmLibraries) gives the same bits in every process.
#ifndef KILN_CLIENT_RUNTIME_GEMM_WAYS_H_
#define KILN_CLIENT_RUNTIME_GEMM_WAYS_H_

#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "client/runtime/fastest_of.h"

namespace kiln {

enum class GemmWay { kOpenBlas, kOpenBlasCopiedB, kOneDnn };

// Which libraries multiply: the faster of OpenBLAS and oneDNN per shape,
// or one of them ($KILN_GEMM=openblas or onednn; oneDNN's shapes are the
// ones described above, OpenBLAS takes the rest).
enum class GemmLibraries { kFastest, kOpenBlas, kOneDnn };

// $KILN_GEMM's choice: fastest (the default), openblas or onednn.
GemmLibraries GemmLibrariesFromEnvironment();

class GemmWays {
 public:
  // `batch` products of m x k by k x n, of `element_bytes`-byte elements,
  // split over `threads` threads. `b_transposed`: B is stored transposed;
  // `onednn_layout`: float32, C = A.B (alpha 1, beta 0), and a unit
  // stride in each of A and B.
  struct Shape {
    int64_t batch, m, k, n;
    int element_bytes, threads;
    bool b_transposed, onednn_layout;

    bool operator==(const Shape& other) const {
      return batch == other.batch && m == other.m && k == other.k && n == other.n &&
             element_bytes == other.element_bytes && threads == other.threads &&
             b_transposed == other.b_transposed && onednn_layout == other.onednn_layout;
    }
    template <typename H>
    friend H AbslHashValue(H state, const Shape& shape) {
      return H::combine(std::move(state), shape.batch, shape.m, shape.k, shape.n,
                        shape.element_bytes, shape.threads, shape.b_transposed,
                        shape.onednn_layout);
    }
  };

  explicit GemmWays(GemmLibraries libraries) : libraries_(libraries) {}

  // The ways that apply to `shape`, in the order trials take them; at
  // least one. oneDNN only when `onednn_room`.
  struct Candidates {
    GemmWay way[3];
    int count = 0;
  };
  Candidates WaysFor(const Shape& shape, bool onednn_room = true) const;

  // Calls multiply(way) for the way to take now: the only one, a trial's,
  // or the fastest once trials are done (timed as they run).
  void Run(const Shape& shape, absl::FunctionRef<void(GemmWay)> multiply);

  // Timed calls of each way before a shape's choice is made, after one
  // untimed call.
  static constexpr int kTrials = FastestOf<Shape>::kTrials;
  // The most shapes offered oneDNN in a process: each makes a primitive
  // (kept, and costly to make), and a graph with symbolic sizes meets new shapes as
  // long as it runs. Later shapes are multiplied by OpenBLAS.
  static constexpr int kMaxOneDnnShapes = 256;

 private:
  // Whether `shape` is (or now becomes) one of the shapes offered oneDNN.
  bool OneDnnRoom(const Shape& shape);

  const GemmLibraries libraries_;
  absl::Mutex mutex_;
  absl::flat_hash_set<Shape> onednn_shapes_ ABSL_GUARDED_BY(mutex_);
  FastestOf<Shape> fastest_;
};

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_GEMM_WAYS_H_
