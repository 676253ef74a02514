#include "client/runtime/qr.h"

#include <cstdint>
#include <vector>

#include "client/runtime/linalg_test_util.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// A = [[3, 1], [4, 2]]: geqrf's first reflector maps column 0 to (-5, 0)
// with tau 1.6 and v = (1, 0.5); the second has nothing below the diagonal
// (tau 0). Q = I - 1.6 v v^T = [[-0.6, -0.8], [-0.8, 0.6]], R = [[-5, -2.2],
// [0, 0.4]].
const std::vector<double> kA = {3, 1, 4, 2};
const std::vector<double> kPacked = {-5, -2.2, 0.5, 0.4};
const std::vector<double> kTau = {1.6, 0};
const std::vector<double> kQ = {-0.6, -0.8, -0.8, 0.6};

TEST(QrTest, GeqrfPacksRAndTheReflectorsAsLapack) {
  kiln_linalg call = LinalgCall(KILN_LINALG_GEQRF, 1, 2, 2, 0);
  SetStrides(call, 0, 4, 2, 1);
  std::vector<double> packed(4), tau(2);
  ASSERT_EQ(CallLinalg(call, {kA.data()}, {packed.data(), tau.data()}), 0);
  ExpectNear(packed, kPacked, 1e-12);
  ExpectNear(tau, kTau, 1e-12);
}

TEST(QrTest, HouseholderProductOfATransposedBatchGivesEachQ) {
  // The packed factors stored column-major, twice; tau with stride 3.
  const std::vector<double> packed = {-5, 0.5, -2.2, 0.4, -5, 0.5, -2.2, 0.4};
  const std::vector<double> tau = {1.6, 0, -1, 1.6, 0, -1};
  kiln_linalg call = LinalgCall(KILN_LINALG_HOUSEHOLDER_PRODUCT, 2, 2, 2, 2);
  SetStrides(call, 0, 4, 1, 2);
  SetStrides(call, 1, 3, 1, 0);
  std::vector<double> q(8);
  ASSERT_EQ(CallLinalg(call, {packed.data(), tau.data()}, {q.data()}), 0);
  ExpectNear(q, {-0.6, -0.8, -0.8, 0.6, -0.6, -0.8, -0.8, 0.6}, 1e-12);
}

TEST(QrTest, HouseholderProductOfOneReflectorOfATallMatrix) {
  // 3 x 1: v = (1, 0.5, 0), tau 1.6: the first column of H_1.
  const std::vector<double> packed = {-5, 0.5, 0};
  const std::vector<double> tau = {1.6};
  kiln_linalg call = LinalgCall(KILN_LINALG_HOUSEHOLDER_PRODUCT, 1, 3, 1, 1);
  SetStrides(call, 0, 3, 1, 1);
  SetStrides(call, 1, 1, 1, 0);
  std::vector<double> q(3);
  ASSERT_EQ(CallLinalg(call, {packed.data(), tau.data()}, {q.data()}), 0);
  ExpectNear(q, {-0.6, -0.8, 0}, 1e-12);
}

TEST(QrTest, OrmqrAppliesQOrItsTranspose) {
  kiln_linalg call = LinalgCall(KILN_LINALG_ORMQR, 1, 2, 2, 2, KILN_LINALG_ADJOINT);
  SetStrides(call, 0, 4, 2, 1);
  SetStrides(call, 1, 2, 1, 0);
  SetStrides(call, 2, 4, 2, 1);
  std::vector<double> r(4);
  ASSERT_EQ(CallLinalg(call, {kPacked.data(), kTau.data(), kA.data()}, {r.data()}), 0);
  ExpectNear(r, {-5, -2.2, 0, 0.4}, 1e-12);

  call.flags = 0;
  const std::vector<double> identity = {1, 0, 0, 1};
  std::vector<double> q(4);
  ASSERT_EQ(CallLinalg(call, {kPacked.data(), kTau.data(), identity.data()}, {q.data()}), 0);
  ExpectNear(q, kQ, 1e-12);
}

TEST(QrTest, GeqrfInFloat32) {
  const std::vector<float> a = {3, 1, 4, 2};
  kiln_linalg call = LinalgCall(KILN_LINALG_GEQRF, 1, 2, 2, 0);
  call.float64 = 0;
  SetStrides(call, 0, 4, 2, 1);
  std::vector<float> packed(4), tau(2);
  ASSERT_EQ(CallLinalg(call, {a.data()}, {packed.data(), tau.data()}), 0);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(packed[i], kPacked[i], 1e-6) << i;
  EXPECT_NEAR(tau[0], 1.6f, 1e-6);
  EXPECT_EQ(tau[1], 0.0f);
}

}  // namespace
}  // namespace kiln
