#include "client/runtime/linalg.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "client/runtime/runtime.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// A call on row-major n x n (or m x n) operands, a batch of `batch`.
kiln_linalg Call(int64_t routine, int64_t batch, int64_t m, int64_t n, int64_t k,
                 int64_t flags = 0) {
  kiln_linalg call = {};
  call.routine = routine;
  call.float64 = 1;
  call.batch = batch;
  call.m = m;
  call.n = n;
  call.k = k;
  call.flags = flags;
  return call;
}

void RowMajor(kiln_linalg& call, int operand, int64_t rows, int64_t cols) {
  call.strides[operand][0] = rows * cols;
  call.strides[operand][1] = cols;
  call.strides[operand][2] = 1;
}

// Through the table, as an artifact calls it.
int CallLinalg(const kiln_linalg& call, std::vector<const void*> operands,
               std::vector<void*> results) {
  static Runtime* const runtime = new Runtime(2);
  const kiln_runtime* table = runtime->table();
  return table->linalg(table->context, &call, operands.data(), results.data());
}

TEST(LinalgTest, LuOfAPivotedMatrixGivesLapacksFactorsAndDeterminant) {
  // [[0, 2], [3, 4]]: the first pivot swaps the rows.
  const double a[] = {0, 2, 3, 4};
  kiln_linalg call = Call(KILN_LINALG_LU, 1, 2, 2, 0);
  RowMajor(call, 0, 2, 2);
  double lu[4], det, sign, log_abs, p[4], l[4], u[4];
  int32_t pivots[2], info = -1;
  ASSERT_EQ(CallLinalg(call, {a}, {lu, pivots, &info, &det, &sign, &log_abs, p, l, u}), 0);
  EXPECT_EQ(std::vector<double>(lu, lu + 4), (std::vector<double>{3, 4, 0, 2}));
  EXPECT_EQ(std::vector<int32_t>(pivots, pivots + 2), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(info, 0);
  EXPECT_EQ(det, -6);
  EXPECT_EQ(sign, -1);
  EXPECT_DOUBLE_EQ(log_abs, std::log(6.0));
  EXPECT_EQ(std::vector<double>(p, p + 4), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(std::vector<double>(l, l + 4), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(std::vector<double>(u, u + 4), (std::vector<double>{3, 4, 0, 2}));
}

TEST(LinalgTest, LuOfASingularMatrixReportsInfoAndAZeroDeterminant) {
  const double a[] = {1, 2, 2, 4};
  kiln_linalg call = Call(KILN_LINALG_LU, 1, 2, 2, 0);
  RowMajor(call, 0, 2, 2);
  double det, sign, log_abs;
  int32_t info = -1;
  ASSERT_EQ(CallLinalg(call, {a},
                       {nullptr, nullptr, &info, &det, &sign, &log_abs, nullptr, nullptr, nullptr}),
            0);
  EXPECT_EQ(info, 2);
  EXPECT_EQ(det, 0);
  EXPECT_EQ(sign, 0);
  EXPECT_EQ(log_abs, -INFINITY);
}

TEST(LinalgTest, LuSolveOfATransposedBatchSolvesEachMatrix) {
  // Two 2 x 2 matrices stored transposed (column-major): A0 = [[2, 1],
  // [1, 3]], A1 = [[4, 0], [0, 2]]; B row-major [2, 2, 1].
  const double a[] = {2, 1, 1, 3, 4, 0, 0, 2};
  const double b[] = {3, 5, 8, 2};
  kiln_linalg lu_call = Call(KILN_LINALG_LU, 2, 2, 2, 0);
  lu_call.strides[0][0] = 4;
  lu_call.strides[0][1] = 1;
  lu_call.strides[0][2] = 2;
  double lu[8];
  int32_t pivots[4];
  ASSERT_EQ(CallLinalg(lu_call, {a},
                       {lu, pivots, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr}),
            0);
  kiln_linalg call = Call(KILN_LINALG_LU_SOLVE, 2, 2, 2, 1);
  RowMajor(call, 0, 2, 2);
  call.strides[1][0] = 2;
  call.strides[1][1] = 1;
  RowMajor(call, 2, 2, 1);
  double x[4];
  ASSERT_EQ(CallLinalg(call, {lu, pivots, b}, {x}), 0);
  // 2 x + y = 3, x + 3 y = 5 -> (0.8, 1.4); 4 x = 8, 2 y = 2 -> (2, 1).
  const double want[] = {0.8, 1.4, 2, 1};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(x[i], want[i], 1e-14) << i;
}

TEST(LinalgTest, CholeskyFactorsSolvesAndInverts) {
  // A = [[4, 2], [2, 5]] = L L^T with L = [[2, 0], [1, 2]].
  const double a[] = {4, 2, 2, 5};
  kiln_linalg call = Call(KILN_LINALG_CHOLESKY, 1, 2, 2, 0);
  RowMajor(call, 0, 2, 2);
  double l[4], u[4];
  int32_t info = -1;
  ASSERT_EQ(CallLinalg(call, {a}, {l, &info}), 0);
  EXPECT_EQ(std::vector<double>(l, l + 4), (std::vector<double>{2, 0, 1, 2}));
  EXPECT_EQ(info, 0);
  call.flags = KILN_LINALG_UPPER;
  ASSERT_EQ(CallLinalg(call, {a}, {u, &info}), 0);
  EXPECT_EQ(std::vector<double>(u, u + 4), (std::vector<double>{2, 1, 0, 2}));

  const double b[] = {6, 7};
  kiln_linalg solve = Call(KILN_LINALG_CHOLESKY_SOLVE, 1, 2, 2, 1);
  RowMajor(solve, 0, 2, 2);
  RowMajor(solve, 1, 2, 1);
  double x[2];
  ASSERT_EQ(CallLinalg(solve, {l, b}, {x}), 0);
  EXPECT_NEAR(x[0], 1, 1e-14);
  EXPECT_NEAR(x[1], 1, 1e-14);

  kiln_linalg inverse = Call(KILN_LINALG_CHOLESKY_INVERSE, 1, 2, 2, 0, KILN_LINALG_UPPER);
  RowMajor(inverse, 0, 2, 2);
  double inv[4];
  ASSERT_EQ(CallLinalg(inverse, {u}, {inv}), 0);
  const double want[] = {5.0 / 16, -2.0 / 16, -2.0 / 16, 4.0 / 16};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(inv[i], want[i], 1e-15) << i;
}

TEST(LinalgTest, CholeskyOfAnIndefiniteMatrixReportsTheMinor) {
  const double a[] = {1, 2, 2, 1};
  kiln_linalg call = Call(KILN_LINALG_CHOLESKY, 1, 2, 2, 0);
  RowMajor(call, 0, 2, 2);
  int32_t info = -1;
  ASSERT_EQ(CallLinalg(call, {a}, {nullptr, &info}), 0);
  EXPECT_EQ(info, 2);
}

TEST(LinalgTest, TriangularSolveReadsOneTriangleInFloat32) {
  // The lower triangle is garbage that an upper solve must not read.
  const float a[] = {2, 1, 99, 4};
  const float b[] = {4, 8};
  kiln_linalg call = Call(KILN_LINALG_TRIANGULAR_SOLVE, 1, 2, 2, 1, KILN_LINALG_UPPER);
  call.float64 = 0;
  RowMajor(call, 0, 2, 2);
  RowMajor(call, 1, 2, 1);
  float x[2];
  ASSERT_EQ(CallLinalg(call, {a, b}, {x}), 0);
  EXPECT_FLOAT_EQ(x[0], 1);
  EXPECT_FLOAT_EQ(x[1], 2);
  call.flags |= KILN_LINALG_UNIT;
  ASSERT_EQ(CallLinalg(call, {a, b}, {x}), 0);
  EXPECT_FLOAT_EQ(x[0], -4);
  EXPECT_FLOAT_EQ(x[1], 8);
}

TEST(LinalgTest, SvdReconstructsTheMatrix) {
  const double a[] = {3, 1, 0, 1, 3, 0};  // 2 x 3: singular values 4 and 2
  kiln_linalg call = Call(KILN_LINALG_SVD, 1, 2, 3, 0, KILN_LINALG_VECTORS);
  RowMajor(call, 0, 2, 3);
  double u[4], s[2], vh[6];
  ASSERT_EQ(CallLinalg(call, {a}, {u, s, vh}), 0);
  EXPECT_NEAR(s[0], 4, 1e-14);
  EXPECT_NEAR(s[1], 2, 1e-14);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      const double sum = u[i * 2] * s[0] * vh[j] + u[i * 2 + 1] * s[1] * vh[3 + j];
      EXPECT_NEAR(sum, a[i * 3 + j], 1e-14) << i << ", " << j;
    }
  }
  double values_only[2];
  call.flags = 0;
  ASSERT_EQ(CallLinalg(call, {a}, {nullptr, values_only, nullptr}), 0);
  EXPECT_NEAR(values_only[1], 2, 1e-14);
}

}  // namespace
}  // namespace kiln
