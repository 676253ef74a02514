#include "client/runtime/linalg.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/runtime/linalg_errors.h"
#include "client/runtime/linalg_test_util.h"
#include "client/runtime/runtime.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(LinalgTest, LuOfAPivotedMatrixGivesLapacksFactorsAndDeterminant) {
  // [[0, 2], [3, 4]]: the first pivot swaps the rows.
  const double a[] = {0, 2, 3, 4};
  kiln_linalg call = LinalgCall(KILN_LINALG_LU, 1, 2, 2, 0);
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
  kiln_linalg call = LinalgCall(KILN_LINALG_LU, 1, 2, 2, 0);
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
  kiln_linalg lu_call = LinalgCall(KILN_LINALG_LU, 2, 2, 2, 0);
  lu_call.strides[0][0] = 4;
  lu_call.strides[0][1] = 1;
  lu_call.strides[0][2] = 2;
  double lu[8];
  int32_t pivots[4];
  ASSERT_EQ(CallLinalg(lu_call, {a},
                       {lu, pivots, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr}),
            0);
  kiln_linalg call = LinalgCall(KILN_LINALG_LU_SOLVE, 2, 2, 2, 1);
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
  kiln_linalg call = LinalgCall(KILN_LINALG_CHOLESKY, 1, 2, 2, 0);
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
  kiln_linalg solve = LinalgCall(KILN_LINALG_CHOLESKY_SOLVE, 1, 2, 2, 1);
  RowMajor(solve, 0, 2, 2);
  RowMajor(solve, 1, 2, 1);
  double x[2];
  ASSERT_EQ(CallLinalg(solve, {l, b}, {x}), 0);
  EXPECT_NEAR(x[0], 1, 1e-14);
  EXPECT_NEAR(x[1], 1, 1e-14);

  kiln_linalg inverse = LinalgCall(KILN_LINALG_CHOLESKY_INVERSE, 1, 2, 2, 0, KILN_LINALG_UPPER);
  RowMajor(inverse, 0, 2, 2);
  double inv[4];
  ASSERT_EQ(CallLinalg(inverse, {u}, {inv}), 0);
  const double want[] = {5.0 / 16, -2.0 / 16, -2.0 / 16, 4.0 / 16};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(inv[i], want[i], 1e-15) << i;
}

TEST(LinalgTest, CholeskyOfAnIndefiniteMatrixReportsTheMinor) {
  const double a[] = {1, 2, 2, 1};
  kiln_linalg call = LinalgCall(KILN_LINALG_CHOLESKY, 1, 2, 2, 0);
  RowMajor(call, 0, 2, 2);
  int32_t info = -1;
  ASSERT_EQ(CallLinalg(call, {a}, {nullptr, &info}), 0);
  EXPECT_EQ(info, 2);
}

TEST(LinalgTest, TriangularSolveReadsOneTriangleInFloat32) {
  // The lower triangle is garbage that an upper solve must not read.
  const float a[] = {2, 1, 99, 4};
  const float b[] = {4, 8};
  kiln_linalg call = LinalgCall(KILN_LINALG_TRIANGULAR_SOLVE, 1, 2, 2, 1, KILN_LINALG_UPPER);
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
  kiln_linalg call = LinalgCall(KILN_LINALG_SVD, 1, 2, 3, 0, KILN_LINALG_VECTORS);
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

TEST(LinalgTest, FullSvdOfAnEmptyMatrixGivesIdentityVectors) {
  // 0 x 2: no singular values; Vh is the 2 x 2 identity, as eager's.
  kiln_linalg call =
      LinalgCall(KILN_LINALG_SVD, 1, 0, 2, 0, KILN_LINALG_VECTORS | KILN_LINALG_FULL);
  RowMajor(call, 0, 0, 2);
  const double a[1] = {0};
  double s[1] = {-1}, vh[4] = {-1, -1, -1, -1};
  ASSERT_EQ(CallLinalg(call, {a}, {nullptr, s, vh}), 0);
  EXPECT_EQ(std::vector<double>(vh, vh + 4), (std::vector<double>{1, 0, 0, 1}));
}

TEST(LinalgTest, EighReadsOneTriangleAndGivesAscendingEigenpairs) {
  // The lower triangle is [[2, *], [1, 2]] (eigenvalues 1 and 3); the upper
  // one [[2, 5], [*, 2]] (-3 and 7).
  const double a[] = {2, 5, 1, 2};
  kiln_linalg call = LinalgCall(KILN_LINALG_EIGH, 1, 2, 2, 0, KILN_LINALG_VECTORS);
  RowMajor(call, 0, 2, 2);
  double values[2], vectors[4];
  ASSERT_EQ(CallLinalg(call, {a}, {values, vectors}), 0);
  EXPECT_NEAR(values[0], 1, 1e-14);
  EXPECT_NEAR(values[1], 3, 1e-14);
  // Each column v of the vectors: A v = lambda v, |v| = 1.
  for (int c = 0; c < 2; ++c) {
    const double x = vectors[c], y = vectors[2 + c];
    EXPECT_NEAR(2 * x + 1 * y, values[c] * x, 1e-14) << c;
    EXPECT_NEAR(1 * x + 2 * y, values[c] * y, 1e-14) << c;
    EXPECT_NEAR(x * x + y * y, 1, 1e-14) << c;
  }
  call.flags = KILN_LINALG_UPPER;
  ASSERT_EQ(CallLinalg(call, {a}, {values, nullptr}), 0);
  EXPECT_NEAR(values[0], -3, 1e-14);
  EXPECT_NEAR(values[1], 7, 1e-14);
}

// What kiln_run returns after the artifact's check told linalg_error, as
// the client raises it.
std::string RunErrorAfter(const char* api_name, int64_t batch_index, int32_t info) {
  static Runtime* const runtime = new Runtime(1);
  const kiln_runtime* table = runtime->table();
  table->linalg_error(table->context, api_name, batch_index, info);
  const absl::Status status = Runtime::TakeRunError();
  const char* type = EagerErrorType(status);
  return absl::StrCat(absl::StatusCodeToString(status.code()), " ", type ? type : "(none)", ": ",
                      status.message());
}

TEST(LinalgTest, ALinalgErrorIsEagersExceptionAndMessage) {
  EXPECT_EQ(RunErrorAfter("linalg.inv", -1, 2),
            "FAILED_PRECONDITION LinAlgError: linalg.inv: The diagonal element 2 is zero, the "
            "inversion could not be completed because the input matrix is singular.");
  EXPECT_EQ(RunErrorAfter("torch.linalg.solve", 3, 1),
            "FAILED_PRECONDITION LinAlgError: torch.linalg.solve: (Batch element 3): The solver "
            "failed because the input matrix is singular.");
  EXPECT_EQ(RunErrorAfter("linalg.cholesky", -1, 4),
            "FAILED_PRECONDITION LinAlgError: linalg.cholesky: The factorization could not be "
            "completed because the input is not positive-definite (the leading minor of order 4 "
            "is not positive-definite).");
  EXPECT_EQ(RunErrorAfter("linalg.svd", -1, -4),
            "FAILED_PRECONDITION LinAlgError: linalg.svd: The algorithm failed to converge "
            "because the input matrix contained non-finite values.");
  EXPECT_EQ(RunErrorAfter("torch.linalg.lu_factor", 0, 2),
            "FAILED_PRECONDITION RuntimeError: torch.linalg.lu_factor: (Batch element 0): U[2,2] "
            "is zero and using it on lu_solve would result in a division by zero. If you still "
            "want to perform the factorization, consider calling linalg.lu(A, pivot) or "
            "linalg.lu_factor_ex(A, pivot)");
  // Taken once.
  EXPECT_TRUE(Runtime::TakeRunError().ok());
}

}  // namespace
}  // namespace kiln
