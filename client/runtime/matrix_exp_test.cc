#include "client/runtime/matrix_exp.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "client/runtime/linalg_test_util.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// A batch of `batch` row-major n x n matrices.
kiln_linalg Call(int64_t batch, int64_t n, bool float64 = true) {
  kiln_linalg call = LinalgCall(KILN_LINALG_MATRIX_EXP, batch, n, n, 0, 0, float64);
  RowMajor(call, 0, n, n);
  return call;
}

TEST(MatrixExpTest, ADiagonalAndANilpotentMatrix) {
  // diag(1, -2); [[0, 3], [0, 0]], whose exponential is I + A.
  const std::vector<double> a = {1, 0, 0, -2, 0, 3, 0, 0};
  std::vector<double> result(8);
  ASSERT_EQ(CallLinalg(Call(2, 2), {a.data()}, {result.data()}), 0);
  const std::vector<double> expected = {std::exp(1.0), 0, 0, std::exp(-2.0), 1, 3, 0, 1};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(result[i], expected[i], 1e-14) << i;
}

TEST(MatrixExpTest, ALargeRotationGeneratorIsScaledAndSquared) {
  // exp([[0, t], [-t, 0]]) = [[cos t, sin t], [-sin t, cos t]]; t = 20 has
  // 1-norm 20 > theta_13, so it is halved twice and squared back.
  const double t = 20;
  const std::vector<double> a = {0, t, -t, 0};
  std::vector<double> result(4);
  ASSERT_EQ(CallLinalg(Call(1, 2), {a.data()}, {result.data()}), 0);
  const std::vector<double> expected = {std::cos(t), std::sin(t), -std::sin(t), std::cos(t)};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(result[i], expected[i], 1e-12) << i;
}

TEST(MatrixExpTest, Float32TransposedAndNaN) {
  // Column-major [[1, 2], [0, 1]]: exp = e [[1, 2], [0, 1]]; then a NaN.
  const std::vector<float> a = {1, 0, 2, 1, NAN, 0, 0, 0};
  kiln_linalg call = Call(2, 2, /*float64=*/false);
  call.strides[0][1] = 1;
  call.strides[0][2] = 2;
  std::vector<float> result(8);
  ASSERT_EQ(CallLinalg(call, {a.data()}, {result.data()}), 0);
  const float e = std::exp(1.0f);
  const std::vector<float> expected = {e, 2 * e, 0, e};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(result[i], expected[i], 1e-6) << i;
  for (int i = 4; i < 8; ++i) EXPECT_TRUE(std::isnan(result[i])) << i;
}

}  // namespace
}  // namespace kiln
