#include "client/runtime/eig.h"

#include <cmath>
#include <complex>
#include <cstdint>
#include <vector>

#include "client/runtime/linalg_test_util.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using Complex = std::complex<double>;

// The eigenvalues and eigenvectors (row-major, one a column) of the row-major
// n x n `a`, from the interleaved pairs EIG writes.
void Eig(const std::vector<double>& a, int n, std::vector<Complex>& values,
         std::vector<Complex>& vectors) {
  kiln_linalg call = LinalgCall(KILN_LINALG_EIG, 1, n, n);
  RowMajor(call, 0, n, n);
  values.assign(n, 0);
  vectors.assign(n * n, 0);
  int32_t info = -1;
  ASSERT_EQ(CallLinalg(call, {a.data()}, {values.data(), vectors.data(), &info}), 0);
  EXPECT_EQ(info, 0);
}

// A v = lambda v for every pair, each v of unit norm.
void ExpectEigenpairs(const std::vector<double>& a, int n, const std::vector<Complex>& values,
                      const std::vector<Complex>& vectors) {
  for (int j = 0; j < n; ++j) {
    double norm = 0;
    for (int r = 0; r < n; ++r) {
      Complex product = 0;
      for (int c = 0; c < n; ++c) product += a[r * n + c] * vectors[c * n + j];
      EXPECT_LT(std::abs(product - values[j] * vectors[r * n + j]), 1e-14) << r << ", " << j;
      norm += std::norm(vectors[r * n + j]);
    }
    EXPECT_NEAR(norm, 1, 1e-14) << j;
  }
}

TEST(EigTest, ARotationHasAConjugatePairOfEigenvaluesAndVectors) {
  const std::vector<double> a = {0, -1, 1, 0};
  std::vector<Complex> values, vectors;
  Eig(a, 2, values, vectors);
  EXPECT_EQ(values, (std::vector<Complex>{{0, 1}, {0, -1}}));
  ExpectEigenpairs(a, 2, values, vectors);
  EXPECT_EQ(vectors[1], std::conj(vectors[0]));
  EXPECT_EQ(vectors[3], std::conj(vectors[2]));
}

TEST(EigTest, ATriangularMatrixHasItsDiagonalAsRealEigenvalues) {
  const std::vector<double> a = {2, 1, 0, 0, 3, 0, 0, 0, -1};
  std::vector<Complex> values, vectors;
  Eig(a, 3, values, vectors);
  EXPECT_EQ(values, (std::vector<Complex>{2, 3, -1}));
  ExpectEigenpairs(a, 3, values, vectors);
  for (const Complex& element : vectors) EXPECT_EQ(element.imag(), 0);
}

TEST(EigTest, EigenvaluesAloneFloat32) {
  // [[1, 2], [2, 1]] transposed in memory: eigenvalues 3 and -1.
  const std::vector<float> a = {1, 2, 2, 1};
  kiln_linalg call = LinalgCall(KILN_LINALG_EIG, 1, 2, 2, 0, 0, /*float64=*/false);
  SetStrides(call, 0, 4, 1, 2);
  std::vector<float> values(4);
  ASSERT_EQ(CallLinalg(call, {a.data()}, {values.data(), nullptr, nullptr}), 0);
  EXPECT_NEAR(values[0], 3, 1e-6);
  EXPECT_NEAR(values[2], -1, 1e-6);
  EXPECT_EQ(values[1], 0);
  EXPECT_EQ(values[3], 0);
}

}  // namespace
}  // namespace kiln
