#include "client/runtime/ldl.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "client/runtime/linalg_test_util.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(LdlTest, ADefiniteMatrixFactorsWithOneByOnePivotsAndSolves) {
  // [[4, 2], [2, 3]] (its upper triangle is not read): D = diag(4, 2),
  // L's one element 0.5; A x = (8, 7) gives x = (1.25, 1.5).
  const std::vector<double> a = {4, 99, 2, 3}, b = {8, 7};
  kiln_linalg factor = LinalgCall(KILN_LINALG_LDL_FACTOR, 1, 2, 2);
  RowMajor(factor, 0, 2, 2);
  std::vector<double> ld(4);
  std::vector<int32_t> pivots(2);
  int32_t info = -1;
  ASSERT_EQ(CallLinalg(factor, {a.data()}, {ld.data(), pivots.data(), &info}), 0);
  ExpectNear(ld, {4, 0, 0.5, 2}, 1e-15);
  EXPECT_EQ(pivots, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(info, 0);

  kiln_linalg solve = LinalgCall(KILN_LINALG_LDL_SOLVE, 1, 2, 2, 1);
  RowMajor(solve, 0, 2, 2);
  SetStrides(solve, 1, 2, 1, 0);
  RowMajor(solve, 2, 2, 1);
  std::vector<double> x(2);
  ASSERT_EQ(CallLinalg(solve, {ld.data(), pivots.data(), b.data()}, {x.data()}), 0);
  ExpectNear(x, {1.25, 1.5}, 1e-15);
}

TEST(LdlTest, AnIndefiniteMatrixTakesATwoByTwoBlockAndASingularOneGivesInfo) {
  // [[0, 1], [1, 0]]: no 1 x 1 pivot will do, so D is the whole matrix
  // (pivots -2, -2: a block, no interchange); then the zero matrix.
  const std::vector<float> a = {0, 1, 1, 0, 0, 0, 0, 0}, b = {3, 5, 1, 1};
  kiln_linalg factor = LinalgCall(KILN_LINALG_LDL_FACTOR, 2, 2, 2, 0, 0, /*float64=*/false);
  RowMajor(factor, 0, 2, 2);
  std::vector<float> ld(8);
  std::vector<int32_t> pivots(4), info(2, -1);
  ASSERT_EQ(CallLinalg(factor, {a.data()}, {ld.data(), pivots.data(), info.data()}), 0);
  EXPECT_EQ(std::vector<float>(ld.begin(), ld.begin() + 4), (std::vector<float>{0, 0, 1, 0}));
  EXPECT_EQ(std::vector<int32_t>(pivots.begin(), pivots.begin() + 2),
            (std::vector<int32_t>{-2, -2}));
  EXPECT_EQ(info, (std::vector<int32_t>{0, 1}));

  // The first system swaps b; a pivot past n gives NaN, not a stray read.
  kiln_linalg solve = LinalgCall(KILN_LINALG_LDL_SOLVE, 2, 2, 2, 1, 0, /*float64=*/false);
  SetStrides(solve, 0, 0, 2, 1);
  SetStrides(solve, 1, 0, 1, 0);
  RowMajor(solve, 2, 2, 1);
  const std::vector<int32_t> bad = {-2, 3};
  std::vector<float> x(4);
  ASSERT_EQ(CallLinalg(solve, {ld.data(), pivots.data(), b.data()}, {x.data()}), 0);
  EXPECT_EQ(std::vector<float>(x.begin(), x.begin() + 2), (std::vector<float>{5, 3}));
  solve.batch = 1;
  ASSERT_EQ(CallLinalg(solve, {ld.data(), bad.data(), b.data()}, {x.data()}), 0);
  EXPECT_TRUE(std::isnan(x[0]) && std::isnan(x[1]));
}

}  // namespace
}  // namespace kiln
