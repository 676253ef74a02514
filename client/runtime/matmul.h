// Matrix products through oneDNN's matmul (dnnl.h; its BRGEMM kernels on
// AVX-512 CPUs, its JIT GEMM on AVX2 ones): the runtime's second way to run
// a float32 GEMM next to OpenBLAS. Which
// is faster depends on the CPU and on the kernels OpenBLAS picked for it,
// so runtime.cc times both per shape (gemm_ways.h).
//
// Primitives are made on a shape's first call and kept for the process's
// life.
#ifndef KILN_CLIENT_RUNTIME_MATMUL_H_
#define KILN_CLIENT_RUNTIME_MATMUL_H_

#include <cstdint>
#include <utility>

namespace kiln {

// C (m x n, row-major, rows c_row apart) = A.B, where element (i, j) of A
// is a[i * a_row + j * a_col], likewise B.
struct MatmulShape {
  int64_t m, n, k, a_row, a_col, b_row, b_col, c_row;

  bool operator==(const MatmulShape& other) const {
    return m == other.m && n == other.n && k == other.k && a_row == other.a_row &&
           a_col == other.a_col && b_row == other.b_row && b_col == other.b_col &&
           c_row == other.c_row;
  }
  template <typename H>
  friend H AbslHashValue(H state, const MatmulShape& shape) {
    return H::combine(std::move(state), shape.m, shape.n, shape.k, shape.a_row, shape.a_col,
                      shape.b_row, shape.b_col, shape.c_row);
  }
};

// Runs the product on the calling thread at one OpenMP thread. Returns
// false when oneDNN is not there, has only its reference implementation
// for the shape, or fails (the reason on stderr, once): the caller
// multiplies another way, overwriting C.
bool MatmulF32(const MatmulShape& shape, const float* a, const float* b, float* c);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_MATMUL_H_
