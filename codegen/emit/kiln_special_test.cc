// Kiln's special functions (kiln_special.h, kiln_bessel.h,
// kiln_polynomials.h) against libstdc++'s special
// math functions and libm where they exist, against tabulated values where
// they do not, and at the extreme arguments: zero, poles, negatives, huge
// values, infinities and NaN.
#include "codegen/emit/kiln_special.h"
// clang-format off: pasted in this order into generated sources.
#include "codegen/emit/kiln_bessel.h"
#include "codegen/emit/kiln_polynomials.h"
// clang-format on

#include <cmath>
#include <functional>
#include <limits>

#include "gtest/gtest.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// |got - want| <= tolerance * max(1, |want|) over [low, high] in `steps`.
void ExpectClose(const std::function<double(double)>& got,
                 const std::function<double(double)>& want, double low, double high, int steps,
                 double tolerance) {
  for (int i = 0; i <= steps; ++i) {
    const double x = low + (high - low) * i / steps;
    const double expected = want(x);
    EXPECT_NEAR(got(x), expected, tolerance * std::fmax(1.0, std::fabs(expected))) << "x = " << x;
  }
}

TEST(KilnSpecialTest, ElementaryFunctionsMatchLibm) {
  ExpectClose(kiln_special_exp, [](double x) { return std::exp(x); }, -700, 700, 100000, 4e-16);
  ExpectClose(kiln_special_log, [](double x) { return std::log(x); }, 1e-3, 1e6, 100000, 4e-16);
  ExpectClose(kiln_special_sin, [](double x) { return std::sin(x); }, -1e5, 1e5, 100000, 4e-16);
  ExpectClose(kiln_special_cos, [](double x) { return std::cos(x); }, -1e5, 1e5, 100000, 4e-16);
  ExpectClose(kiln_special_atan, [](double x) { return std::atan(x); }, -60, 60, 10000, 4e-16);
  ExpectClose(kiln_special_acos, [](double x) { return std::acos(x); }, -1, 1, 10000, 1e-15);
  EXPECT_EQ(kiln_special_exp(-kInf), 0.0);
  EXPECT_EQ(kiln_special_exp(kInf), kInf);
  EXPECT_EQ(kiln_special_exp(-745.2), std::exp(-745.2));  // the smallest denormal
  EXPECT_EQ(kiln_special_log(0.0), -kInf);
  EXPECT_EQ(kiln_special_log(std::numeric_limits<double>::denorm_min()),
            std::log(std::numeric_limits<double>::denorm_min()));
  EXPECT_TRUE(std::isnan(kiln_special_log(-1.0)));
  EXPECT_TRUE(std::isnan(kiln_special_sin(kInf)));
  EXPECT_TRUE(std::isnan(kiln_special_exp(kNan)));
}

TEST(KilnSpecialTest, LgammaMatchesStd) {
  ExpectClose(
      kiln_special_lgamma, [](double x) { return std::lgamma(x); }, -40.25, 170, 50000, 1e-14);
  ExpectClose(
      kiln_special_lgamma, [](double x) { return std::lgamma(x); }, 1e5, 1e300, 1000, 1e-14);
  for (double pole : {0.0, -0.0, -1.0, -2.0, -50.0, kInf, -kInf}) {
    EXPECT_EQ(kiln_special_lgamma(pole), kInf) << pole;
  }
  EXPECT_EQ(kiln_special_lgamma(1.0), 0.0);
  EXPECT_EQ(kiln_special_lgamma(2.0), 0.0);
  EXPECT_NEAR(kiln_special_lgamma(1e-300), std::lgamma(1e-300), 1e-13);
  EXPECT_TRUE(std::isnan(kiln_special_lgamma(kNan)));
}

// Digamma, trigamma and polygamma's zeta against tabulated values (DLMF 5.4,
// 25.6): psi(1) = -gamma, psi(1/2) = -gamma - 2 ln 2, psi'(1) = pi^2 / 6,
// zeta(3, 1) = Apery's constant.
TEST(KilnSpecialTest, DigammaTrigammaZetaMatchTables) {
  const double euler = 0.57721566490153286061;
  EXPECT_NEAR(kiln_special_digamma(1.0), -euler, 1e-15);
  EXPECT_NEAR(kiln_special_digamma(0.5), -euler - 2 * std::log(2.0), 1e-15);
  EXPECT_NEAR(kiln_special_digamma(-0.5), 0.03648997397857652056, 1e-15);
  EXPECT_NEAR(kiln_special_digamma(100.0), 4.60016185273809779, 1e-14);
  EXPECT_NEAR(kiln_special_digamma(-2.5), 1.10315664064524318723, 1e-14);
  EXPECT_EQ(kiln_special_digamma(0.0), -kInf);
  EXPECT_EQ(kiln_special_digamma(-0.0), kInf);
  EXPECT_TRUE(std::isnan(kiln_special_digamma(-3.0)));
  EXPECT_EQ(kiln_special_digamma(kInf), kInf);
  // Cephes' trigamma series stops at x^-7: within 1e-9 of pi^2 / 6.
  EXPECT_NEAR(kiln_special_trigamma(1.0), M_PI * M_PI / 6, 1e-9);
  EXPECT_NEAR(kiln_special_trigamma(-0.5), M_PI * M_PI / 2 + 4, 1e-8);
  EXPECT_NEAR(kiln_special_zeta(3.0, 1.0), 1.20205690315959428540, 1e-15);
  for (double x : {1.5, 2.0, 4.5, 10.0}) {
    EXPECT_NEAR(kiln_special_zeta(x, 1.0), std::riemann_zeta(x), 1e-14) << x;
  }
  EXPECT_NEAR(kiln_special_zeta(2.0, -1.5), M_PI * M_PI / 2 + 4 + 4.0 / 9, 1e-13);
  EXPECT_EQ(kiln_special_zeta(1.0, 2.0), kInf);
  EXPECT_EQ(kiln_special_zeta(kInf, 0.5), kInf);
  EXPECT_EQ(kiln_special_zeta(kInf, -1.5), kInf);
  EXPECT_EQ(kiln_special_zeta(kInf, 1.0), 1.0);
  EXPECT_EQ(kiln_special_zeta(2.0, -3.0), kInf);
  EXPECT_TRUE(std::isnan(kiln_special_zeta(0.5, 2.0)));
  EXPECT_TRUE(std::isnan(kiln_special_zeta(2.5, -1.5)));
  EXPECT_TRUE(std::isnan(kiln_special_zeta(kNan, 2.0)));
}

// P and Q against SciPy's gammainc and gammaincc (tabulated), on both sides
// of x = a + 1, and their boundary values.
TEST(KilnSpecialTest, IncompleteGammaMatchesScipy) {
  const struct {
    double a, x, p, q;
  } kTable[] = {
      {0.5, 0.1, 0.34527915398142317, 0.6547208460185768},
      {0.5, 2.0, 0.9544997361036415, 0.04550026389635857},
      {1.0, 1.0, 0.6321205588285577, 0.36787944117144245},
      {3.0, 0.5, 0.014387677966970684, 0.9856123220330293},
      {3.0, 10.0, 0.9972306042844884, 0.0027693957155115775},
      {10.0, 9.0, 0.4125917556680583, 0.5874082443319417},
      {10.0, 30.0, 0.9999928782491372, 7.121750862815593e-06},
      {100.0, 95.0, 0.3173568111698001, 0.6826431888301999},
      {100.0, 130.0, 0.9972495916326934, 0.002750408367306518},
      {0.001, 0.001, 0.9936876467088603, 0.006312353291139709},
      {2.5, 1e-05, 9.515260653112741e-14, 0.9999999999999049},
      {50.0, 1.0, 1.2337508979097585e-65, 1.0},
  };
  for (const auto& row : kTable) {
    EXPECT_NEAR(kiln_special_igamma(row.a, row.x), row.p, 1e-13 * row.p) << row.a << " " << row.x;
    EXPECT_NEAR(kiln_special_igammac(row.a, row.x), row.q, 1e-12 * row.q) << row.a << " " << row.x;
  }
  EXPECT_TRUE(std::isnan(kiln_special_igamma(-1.0, 2.0)));
  EXPECT_TRUE(std::isnan(kiln_special_igammac(1.0, -2.0)));
  EXPECT_EQ(kiln_special_igamma(0.0, 2.0), 1.0);
  EXPECT_EQ(kiln_special_igammac(0.0, 2.0), 0.0);
  EXPECT_TRUE(std::isnan(kiln_special_igamma(0.0, 0.0)));
  EXPECT_EQ(kiln_special_igamma(2.0, 0.0), 0.0);
  EXPECT_EQ(kiln_special_igammac(2.0, 0.0), 1.0);
  EXPECT_EQ(kiln_special_igamma(kInf, 2.0), 0.0);
  EXPECT_TRUE(std::isnan(kiln_special_igamma(kInf, kInf)));
  EXPECT_EQ(kiln_special_igamma(2.0, kInf), 1.0);
  EXPECT_EQ(kiln_special_igammac(2.0, kInf), 0.0);
  EXPECT_TRUE(std::isnan(kiln_special_igamma(kNan, 1.0)));
  EXPECT_EQ(kiln_special_igamma(kNan, 0.0), 0.0);  // eager's order of tests
}

TEST(KilnSpecialTest, ErrorFunctionsMatchLibm) {
  ExpectClose(kiln_special_erfc, [](double x) { return std::erfc(x); }, -6, 6, 20000, 1e-15);
  ExpectClose(kiln_special_erf, [](double x) { return std::erf(x); }, -6, 6, 20000, 1e-15);
  // Relative to erfc itself, down to its underflow.
  for (double x = 0.5; x < 26.5; x += 0.0037) {
    EXPECT_NEAR(kiln_special_erfc(x), std::erfc(x), 2e-14 * std::erfc(x)) << x;
  }
  // erfcx(x) = exp(x^2) erfc(x) where both sides are representable, and its
  // asymptote 1 / (x sqrt(pi)) (1 - 1 / (2 x^2)) far out.
  for (double x = -5.0; x < 26.0; x += 0.0029) {
    const double want = std::exp(x * x) * std::erfc(x);
    EXPECT_NEAR(kiln_special_erfcx(x), want, 1e-13 * want) << x;
  }
  const double far = 1e8;
  EXPECT_NEAR(kiln_special_erfcx(far), 1 / (far * std::sqrt(M_PI)), 1e-15 / far);
  EXPECT_EQ(kiln_special_erfcx(kInf), 0.0);
  EXPECT_EQ(kiln_special_erfcx(-30.0), kInf);
  EXPECT_EQ(kiln_special_erfc(kInf), 0.0);
  EXPECT_EQ(kiln_special_erfc(-kInf), 2.0);
  EXPECT_EQ(kiln_special_erfc(0.0), 1.0);
  EXPECT_EQ(kiln_special_erf(-0.0), 0.0);
  EXPECT_TRUE(std::signbit(kiln_special_erf(-0.0)));
  EXPECT_TRUE(std::isnan(kiln_special_erfc(kNan)));
  EXPECT_TRUE(std::isnan(kiln_special_erfcx(kNan)));
  // erfinv inverts erf, to y's rounding carried through erfinv's slope
  // sqrt(pi) / 2 exp(x^2).
  for (double x = -5.9; x < 5.9; x += 0.0031) {
    const double slope = std::sqrt(M_PI) / 2 * std::exp(x * x);
    EXPECT_NEAR(kiln_special_erfinv(std::erf(x)), x, 1e-14 + 2.3e-16 * slope) << x;
  }
  EXPECT_NEAR(kiln_special_erfinv(1 - 1e-15), 5.675915739744713, 1e-12);  // mpmath
  EXPECT_EQ(kiln_special_erfinv(1.0), kInf);
  EXPECT_EQ(kiln_special_erfinv(-1.0), -kInf);
  EXPECT_EQ(kiln_special_erfinv(0.0), 0.0);
  EXPECT_TRUE(std::isnan(kiln_special_erfinv(1.5)));
  EXPECT_TRUE(std::isnan(kiln_special_erfinv(kNan)));
}

TEST(KilnSpecialTest, BesselFunctionsMatchStd) {
  const double tolerance = 1e-14;
  ExpectClose(
      kiln_special_i0, [](double x) { return std::cyl_bessel_i(0.0, std::fabs(x)); }, -700, 700,
      20000, tolerance);
  ExpectClose(
      kiln_special_i1,
      [](double x) { return std::copysign(std::cyl_bessel_i(1.0, std::fabs(x)), x); }, -700, 700,
      20000, tolerance);
  ExpectClose(
      kiln_special_i0e,
      [](double x) { return std::cyl_bessel_i(0.0, std::fabs(x)) * std::exp(-std::fabs(x)); }, -700,
      700, 20000, tolerance);
  ExpectClose(
      kiln_special_i1e,
      [](double x) {
        return std::copysign(std::cyl_bessel_i(1.0, std::fabs(x)) * std::exp(-std::fabs(x)), x);
      },
      -700, 700, 20000, tolerance);
  // J and Y: absolute error, as their zeros make relative error meaningless;
  // past 5 it grows with x (the phase x - pi/4 is rounded to x's ulp).
  ExpectClose(
      kiln_special_bessel_j0, [](double x) { return std::cyl_bessel_j(0.0, std::fabs(x)); }, -200,
      200, 20000, 1e-13);
  ExpectClose(
      kiln_special_bessel_j1,
      [](double x) { return (x < 0 ? -1 : 1) * std::cyl_bessel_j(1.0, std::fabs(x)); }, -200, 200,
      20000, 1e-13);
  ExpectClose(
      kiln_special_bessel_y0, [](double x) { return std::cyl_neumann(0.0, x); }, 0.01, 200, 20000,
      1e-13);
  ExpectClose(
      kiln_special_bessel_y1, [](double x) { return std::cyl_neumann(1.0, x); }, 0.01, 200, 20000,
      1e-13);
  ExpectClose(
      kiln_special_spherical_bessel_j0, [](double x) { return std::sph_bessel(0, x); }, 0.001, 200,
      20000, 1e-13);
  ExpectClose(
      kiln_special_modified_bessel_k0, [](double x) { return std::cyl_bessel_k(0.0, x); }, 0.001,
      700, 20000, tolerance);
  ExpectClose(
      kiln_special_modified_bessel_k1, [](double x) { return std::cyl_bessel_k(1.0, x); }, 0.001,
      700, 20000, tolerance);
  ExpectClose(
      kiln_special_scaled_modified_bessel_k0,
      [](double x) { return std::cyl_bessel_k(0.0, x) * std::exp(x); }, 0.001, 700, 20000,
      tolerance);
  ExpectClose(
      kiln_special_scaled_modified_bessel_k1,
      [](double x) { return std::cyl_bessel_k(1.0, x) * std::exp(x); }, 0.001, 700, 20000,
      tolerance);
  // Airy Ai against mpmath's (tabulated), across the three forms' borders.
  const struct {
    double x, ai;
  } kAiry[] = {{-100.0, 0.1767533932395529},  {-10.0, 0.04024123848644319},
               {-2.1, 0.16348451299929267},   {-2.08, 0.17658105160983956},
               {-1.0, 0.5355608832923521},    {0.0, 0.3550280538878172},
               {1.0, 0.13529241631288141},    {2.08, 0.030894392489319442},
               {2.1, 0.029952602115866523},   {8.0, 4.6922076160992316e-08},
               {8.5, 1.0997009755195506e-08}, {50.0, 4.5849417240748285e-104}};
  for (const auto& row : kAiry) {
    EXPECT_NEAR(kiln_special_airy_ai(row.x), row.ai, 1e-13 * std::fabs(row.ai)) << row.x;
  }
  EXPECT_EQ(kiln_special_airy_ai(104.0), 0.0);
  EXPECT_TRUE(std::isnan(kiln_special_airy_ai(kInf)));
  EXPECT_TRUE(std::isnan(kiln_special_airy_ai(-kInf)));
  EXPECT_EQ(kiln_special_modified_bessel_k0(0.0), kInf);
  EXPECT_EQ(kiln_special_scaled_modified_bessel_k1(0.0), kInf);
  EXPECT_TRUE(std::isnan(kiln_special_modified_bessel_k1(-1.0)));
  EXPECT_EQ(kiln_special_modified_bessel_k0(kInf), 0.0);
  EXPECT_EQ(kiln_special_scaled_modified_bessel_k0(kInf), 0.0);
  EXPECT_EQ(kiln_special_i0(0.0), 1.0);
  EXPECT_EQ(kiln_special_i0(800.0), kInf);
  EXPECT_EQ(kiln_special_i0e(kInf), 0.0);
  EXPECT_EQ(kiln_special_bessel_j0(0.0), 1.0);
  EXPECT_EQ(kiln_special_bessel_y0(0.0), -kInf);
  EXPECT_EQ(kiln_special_bessel_y1(0.0), -kInf);
  EXPECT_TRUE(std::isnan(kiln_special_bessel_y0(-1.0)));
  EXPECT_EQ(kiln_special_spherical_bessel_j0(0.0), 1.0);
  EXPECT_EQ(kiln_special_spherical_bessel_j0(-kInf), 0.0);
  EXPECT_TRUE(std::isnan(kiln_special_bessel_j1(kNan)));
}

// ndtri against its tabulated quantiles and as the inverse of the normal
// cdf, erfc(-x / sqrt 2) / 2, into the far lower tail (above 1, p's own
// rounding would dominate the comparison: 1 - p keeps few digits).
TEST(KilnSpecialTest, NdtriInvertsTheNormalCdf) {
  EXPECT_NEAR(kiln_special_ndtri(0.975), 1.95996398454005423552, 1e-15);
  EXPECT_NEAR(kiln_special_ndtri(0.5), 0.0, 1e-16);
  for (double x = -37.0; x < 1.0; x += 0.01) {
    const double p = 0.5 * std::erfc(-x / std::sqrt(2.0));
    EXPECT_NEAR(kiln_special_ndtri(p), x, 1e-12 * std::fmax(1.0, std::fabs(x))) << "p = " << p;
  }
  EXPECT_EQ(kiln_special_ndtri(0.0), -kInf);
  EXPECT_EQ(kiln_special_ndtri(1.0), kInf);
  EXPECT_TRUE(std::isnan(kiln_special_ndtri(1.5)));
  EXPECT_TRUE(std::isnan(kiln_special_ndtri(-0.1)));
}

// The polynomials against std::hermite, std::laguerre, std::legendre and the
// trigonometric forms of Chebyshev's, for degrees 0..40, beside their values
// at +-1, negative and non-finite degrees.
TEST(KilnSpecialTest, OrthogonalPolynomialsMatchStd) {
  for (int n = 0; n <= 40; ++n) {
    for (double x = -0.995; x < 1.0; x += 0.0173) {
      const double theta = std::acos(x);
      const double tolerance = 1e-11;
      EXPECT_NEAR(kiln_special_chebyshev_polynomial_t(x, n), std::cos(n * theta), tolerance);
      EXPECT_NEAR(kiln_special_chebyshev_polynomial_u(x, n),
                  std::sin((n + 1) * theta) / std::sin(theta), tolerance * (n + 1));
      EXPECT_NEAR(kiln_special_chebyshev_polynomial_v(x, n),
                  std::cos((n + 0.5) * theta) / std::cos(theta / 2), tolerance * (n + 1) * 20);
      EXPECT_NEAR(kiln_special_chebyshev_polynomial_w(x, n),
                  std::sin((n + 0.5) * theta) / std::sin(theta / 2), tolerance * (n + 1) * 20);
      EXPECT_NEAR(kiln_special_shifted_chebyshev_polynomial_t((x + 1) / 2, n), std::cos(n * theta),
                  tolerance);
      EXPECT_NEAR(kiln_special_legendre_polynomial_p(x, n), std::legendre(n, x), tolerance);
      const double h = std::hermite(n, 3 * x);
      EXPECT_NEAR(kiln_special_hermite_polynomial_h(3 * x, n, 512), h,
                  1e-13 * std::fmax(1.0, std::fabs(h)));
      const double he = std::pow(2.0, -n / 2.0) * std::hermite(n, x / std::sqrt(2.0));
      EXPECT_NEAR(kiln_special_hermite_polynomial_he(x, n, 512), he,
                  1e-11 * std::fmax(1.0, std::fabs(he)));
      const double l = std::laguerre(n, 10 * (x + 1));
      EXPECT_NEAR(kiln_special_laguerre_polynomial_l(10 * (x + 1), n), l,
                  1e-11 * std::fmax(1.0, std::fabs(l)));
    }
  }
  EXPECT_EQ(kiln_special_chebyshev_polynomial_t(-8.5, 3.7), 4 * -614.125 - 3 * -8.5);
  EXPECT_EQ(kiln_special_chebyshev_polynomial_t(-1.0, 5), -1.0);
  EXPECT_EQ(kiln_special_chebyshev_polynomial_u(-1.0, 5), -6.0);
  EXPECT_EQ(kiln_special_chebyshev_polynomial_v(-1.0, 4), 9.0);
  EXPECT_EQ(kiln_special_chebyshev_polynomial_w(1.0, 4), 9.0);
  EXPECT_EQ(kiln_special_chebyshev_polynomial_t(0.3, -1.0), 0.0);
  EXPECT_EQ(kiln_special_legendre_polynomial_p(0.3, kNan), 0.0);
  EXPECT_EQ(kiln_special_hermite_polynomial_h(0.3, kInf, 128), 0.0);
  EXPECT_TRUE(std::isnan(kiln_special_hermite_polynomial_h(0.3, 129, 128)));
  EXPECT_EQ(kiln_special_laguerre_polynomial_l(0.0, 7), 1.0);
}

}  // namespace
}  // namespace kiln
