// What the linalg runtime tests (linalg_test, qr_test, lstsq_test,
// matrix_exp_test) share: a kiln_linalg descriptor, its operands' strides,
// and the call through the runtime's table as an artifact makes it.
#ifndef KILN_CLIENT_RUNTIME_LINALG_TEST_UTIL_H_
#define KILN_CLIENT_RUNTIME_LINALG_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "abi/kiln_abi.h"

namespace kiln {

// A call of `routine` on a batch of `batch` (m x n operands, k right-hand
// columns), in float64 unless `float64` is false; every stride 0.
kiln_linalg LinalgCall(int64_t routine, int64_t batch, int64_t m, int64_t n, int64_t k = 0,
                       int64_t flags = 0, bool float64 = true);

// Operand `operand`'s strides: between matrices, rows and columns.
void SetStrides(kiln_linalg& call, int operand, int64_t batch, int64_t row, int64_t col);

// Operand `operand` as a batch of contiguous row-major rows x cols matrices.
void RowMajor(kiln_linalg& call, int operand, int64_t rows, int64_t cols);

// Runs `call` through the table of one runtime (two threads) shared by the
// test binary; returns what the table's linalg returns.
int CallLinalg(const kiln_linalg& call, std::vector<const void*> operands,
               std::vector<void*> results);

// EXPECT_NEAR on every element, naming its index; the sizes must match.
void ExpectNear(const std::vector<double>& actual, const std::vector<double>& expected,
                double tolerance);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_LINALG_TEST_UTIL_H_
