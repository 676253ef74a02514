#include "client/runtime/lstsq.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "client/runtime/linalg_test_util.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// A (m x n), rcond and B (m x k), all row-major with one matrix.
kiln_linalg Call(int64_t m, int64_t n, int64_t k, int64_t driver) {
  kiln_linalg call = LinalgCall(KILN_LINALG_LSTSQ, 1, m, n, k, driver);
  SetStrides(call, 0, 0, n, 1);
  SetStrides(call, 2, 0, k, 1);
  return call;
}

const double kRcond = 1e-12;

// A = [[1, 0], [0, 1], [1, 1]], b = (1, 2, 4): A^T A x = A^T b gives
// x = (4/3, 7/3), the residual (-1/3, -1/3, 1/3) (squared norm 1/3), and
// A's singular values are sqrt(3) and 1.
const std::vector<double> kTallA = {1, 0, 0, 1, 1, 1};
const std::vector<double> kTallB = {1, 2, 4};

class LstsqDriverTest : public testing::TestWithParam<int64_t> {};

TEST_P(LstsqDriverTest, AnOverdeterminedSystemGivesTheLeastSquaresSolution) {
  const kiln_linalg call = Call(3, 2, 1, GetParam());
  std::vector<double> x(2), residuals(1), singular_values(2);
  int64_t rank = -1;
  ASSERT_EQ(CallLinalg(call, {kTallA.data(), &kRcond, kTallB.data()},
                       {x.data(), residuals.data(), &rank, singular_values.data(), nullptr}),
            0);
  EXPECT_NEAR(x[0], 4.0 / 3, 1e-12);
  EXPECT_NEAR(x[1], 7.0 / 3, 1e-12);
  EXPECT_EQ(rank, 2);
  if (GetParam() != 0) {  // gelsy leaves other values in B's last rows
    EXPECT_NEAR(residuals[0], 1.0 / 3, 1e-12);
  }
  if (GetParam() & (KILN_LINALG_GELSD | KILN_LINALG_GELSS)) {
    EXPECT_NEAR(singular_values[0], std::sqrt(3.0), 1e-12);
    EXPECT_NEAR(singular_values[1], 1, 1e-12);
  } else {
    EXPECT_EQ(singular_values, (std::vector<double>{0, 0}));
  }
}

TEST_P(LstsqDriverTest, AnUnderdeterminedSystemGivesTheMinimumNormSolution) {
  // x0 + x1 = 2: the shortest solution is (1, 1).
  const std::vector<double> a = {1, 1}, b = {2};
  const kiln_linalg call = Call(1, 2, 1, GetParam());
  std::vector<double> x(2), residuals(1);
  int64_t rank = -1;
  ASSERT_EQ(CallLinalg(call, {a.data(), &kRcond, b.data()},
                       {x.data(), residuals.data(), &rank, nullptr, nullptr}),
            0);
  EXPECT_NEAR(x[0], 1, 1e-12);
  EXPECT_NEAR(x[1], 1, 1e-12);
  EXPECT_EQ(residuals[0], 0);
  EXPECT_EQ(rank, 1);
}

INSTANTIATE_TEST_SUITE_P(Drivers, LstsqDriverTest,
                         testing::Values(0, KILN_LINALG_GELS, KILN_LINALG_GELSD,
                                         KILN_LINALG_GELSS));

TEST(LstsqTest, GelsyOfARankDeficientMatrixGivesRankOneAndThePseudoinverseSolution) {
  // A = [[1, 2], [2, 4]] = 5 u u^T, u = (1, 2) / sqrt(5); b = (1, 2):
  // A^+ b = (0.2, 0.4).
  const std::vector<double> a = {1, 2, 2, 4}, b = {1, 2};
  const kiln_linalg call = Call(2, 2, 1, 0);
  std::vector<double> x(2);
  int64_t rank = -1;
  ASSERT_EQ(
      CallLinalg(call, {a.data(), &kRcond, b.data()}, {x.data(), nullptr, &rank, nullptr, nullptr}),
      0);
  EXPECT_NEAR(x[0], 0.2, 1e-12);
  EXPECT_NEAR(x[1], 0.4, 1e-12);
  EXPECT_EQ(rank, 1);
}

TEST(LstsqTest, GelsOfARankDeficientMatrixGivesItsInfo) {
  // A zero column: R's second diagonal element is exactly zero, which gels
  // reports as info 2 (eager raises with it).
  const std::vector<double> a = {1, 0, 2, 0, 1, 0, 0, 1}, b = {1, 2, 1, 2};
  kiln_linalg call = Call(2, 2, 1, KILN_LINALG_GELS);
  call.batch = 2;
  call.strides[0][0] = 4;
  call.strides[2][0] = 2;
  std::vector<double> x(4);
  std::vector<int32_t> info = {-1, -1};
  ASSERT_EQ(CallLinalg(call, {a.data(), &kRcond, b.data()},
                       {x.data(), nullptr, nullptr, nullptr, info.data()}),
            0);
  EXPECT_EQ(info, (std::vector<int32_t>{2, 0}));
  EXPECT_NEAR(x[2], 1, 1e-12);
  EXPECT_NEAR(x[3], 2, 1e-12);
}

TEST(LstsqTest, Float32BatchWithABroadcastRcond) {
  const std::vector<float> a = {1, 0, 0, 1, 1, 1, 2, 0, 0, 2, 2, 2}, b = {1, 2, 4, 2, 4, 8};
  const float rcond = 1e-6f;
  kiln_linalg call = Call(3, 2, 1, 0);
  call.float64 = 0;
  call.batch = 2;
  call.strides[0][0] = 6;
  call.strides[2][0] = 3;
  std::vector<float> x(4);
  std::vector<int64_t> rank(2);
  ASSERT_EQ(CallLinalg(call, {a.data(), &rcond, b.data()},
                       {x.data(), nullptr, rank.data(), nullptr, nullptr}),
            0);
  // The second system is the first with A doubled and b doubled.
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(x[2 * i], 4.0 / 3, 1e-5);
    EXPECT_NEAR(x[2 * i + 1], 7.0 / 3, 1e-5);
    EXPECT_EQ(rank[i], 2);
  }
}

}  // namespace
}  // namespace kiln
