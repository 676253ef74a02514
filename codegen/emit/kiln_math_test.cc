// Ulp error of Kiln's emitted transcendentals against double-precision libm
// (correctly rounded to float), over dense sweeps with huge, tiny, denormal
// and exceptional values.
#include "codegen/emit/kiln_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

int64_t Ordered(float f) {
  int32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  return bits < 0 ? -static_cast<int64_t>(bits & 0x7fffffff) : bits;
}

int64_t UlpDistance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : 1 << 30;
  return std::llabs(Ordered(a) - Ordered(b));
}

// Max ulp error of `f` vs `reference` over every float in [low, high] taken
// with a stride of `step` bit patterns, plus the special values.
template <typename F, typename R>
int64_t MaxUlp(F f, R reference, float low, float high, int step) {
  int64_t worst = 0;
  auto check = [&](float x) {
    const float want = static_cast<float>(reference(static_cast<double>(x)));
    const int64_t ulp = UlpDistance(f(x), want);
    EXPECT_LE(ulp, 4) << "x = " << x << " (" << std::hexfloat << x << "): got " << f(x) << ", want "
                      << want;
    worst = std::max(worst, ulp);
  };
  for (float x : {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                  -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()}) {
    check(x);
  }
  for (int sign : {1, -1}) {
    for (uint32_t bits = 0; bits < 0x7f800000; bits += step) {
      float x;
      memcpy(&x, &bits, sizeof(x));
      x *= sign;
      if (x >= low && x <= high) check(x);
    }
  }
  return worst;
}

TEST(KilnMathTest, ExpWithinOneUlp) {
  const int64_t worst = MaxUlp(kiln_expf, [](double x) { return std::exp(x); }, -1e30f, 1e30f, 97);
  EXPECT_LE(worst, 1);
  EXPECT_TRUE(std::isnan(kiln_expf(NAN)));
  EXPECT_EQ(kiln_expf(-INFINITY), 0.0f);
  EXPECT_EQ(kiln_expf(INFINITY), INFINITY);
  EXPECT_EQ(kiln_expf(89.0f), INFINITY);
  EXPECT_GT(kiln_expf(-100.0f), 0.0f) << "denormal results are kept";
}

// Every float from -0 down to -inf, every NaN, and +0 up to 43: the same
// bits as kiln_expf. In blocks, so that both loops vectorize as in
// generated code.
TEST(KilnMathTest, NonpositiveExpIsExpBitForBit) {
  constexpr int kBlock = 1 << 16;
  std::vector<float> x(kBlock), want(kBlock), got(kBlock);
  auto mismatches = [&](uint64_t first, uint64_t end) {
    int64_t count = 0;
    for (uint64_t base = first; base < end; base += kBlock) {
      const int n = static_cast<int>(std::min<uint64_t>(kBlock, end - base));
      for (int i = 0; i < n; ++i) {
        const uint32_t bits = static_cast<uint32_t>(base + i);
        memcpy(&x[i], &bits, sizeof(bits));
      }
      for (int i = 0; i < n; ++i) want[i] = kiln_expf(x[i]);
      for (int i = 0; i < n; ++i) got[i] = kiln_expf_nonpositive(x[i]);
      count += memcmp(want.data(), got.data(), n * sizeof(float)) != 0;
    }
    return count;  // blocks that differ
  };
  EXPECT_EQ(mismatches(0x80000000u, 0x100000000u), 0) << "negative floats and NaNs";
  EXPECT_EQ(mismatches(0x7f800001u, 0x80000000u), 0) << "positive NaNs";
  EXPECT_EQ(mismatches(0, 0x422c0001u), 0) << "+0 up to 43";
  EXPECT_TRUE(std::isnan(kiln_expf_nonpositive(NAN)));
  EXPECT_EQ(kiln_expf_nonpositive(-INFINITY), 0.0f);
  EXPECT_EQ(kiln_expf_nonpositive(0.0f), 1.0f);
  EXPECT_GT(kiln_expf_nonpositive(-100.0f), 0.0f) << "denormal results are kept";
}

TEST(KilnMathTest, LogWithinOneUlp) {
  const int64_t worst = MaxUlp(
      kiln_logf, [](double x) { return std::log(x); }, 0.0f, std::numeric_limits<float>::max(), 13);
  EXPECT_LE(worst, 1);
  EXPECT_EQ(kiln_logf(0.0f), -INFINITY);
  EXPECT_EQ(kiln_logf(-0.0f), -INFINITY);
  EXPECT_EQ(kiln_logf(1.0f), 0.0f);
  EXPECT_EQ(kiln_logf(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(kiln_logf(-1.0f)));
  EXPECT_TRUE(std::isnan(kiln_logf(-INFINITY)));
  EXPECT_TRUE(std::isnan(kiln_logf(NAN)));
}

TEST(KilnMathTest, TanhWithinTwoUlp) {
  const int64_t worst =
      MaxUlp(kiln_tanhf, [](double x) { return std::tanh(x); }, -1e30f, 1e30f, 97);
  EXPECT_LE(worst, 2);
  EXPECT_TRUE(std::isnan(kiln_tanhf(NAN)));
  EXPECT_EQ(kiln_tanhf(INFINITY), 1.0f);
  EXPECT_TRUE(std::signbit(kiln_tanhf(-0.0f)));
}

TEST(KilnMathTest, ErfForGeluWithinItsAbsoluteBound) {
  double worst = 0;
  for (float x = -10.0f; x <= 10.0f; x += 0.00123f) {
    worst = std::max(worst, std::abs(kiln_erf_for_gelu(x) - std::erf(static_cast<double>(x))));
  }
  EXPECT_LT(worst, 5e-7);  // the formula's 1.5e-7 plus float rounding
  EXPECT_TRUE(std::isnan(kiln_erf_for_gelu(NAN)));
  EXPECT_EQ(kiln_erf_for_gelu(INFINITY), 1.0f);
  EXPECT_EQ(kiln_erf_for_gelu(-INFINITY), -1.0f);
}

TEST(KilnMathTest, GeluDerivativeWithinItsAbsoluteBound) {
  double worst = 0;
  for (float x = -30.0f; x <= 30.0f; x += 0.00123f) {
    const double d = x;
    const double want =
        0.5 * (1 + std::erf(d * M_SQRT1_2)) + d * std::exp(-d * d / 2) / std::sqrt(2 * M_PI);
    worst = std::max(worst, std::abs(kiln_gelu_derivative(x) - want));
  }
  EXPECT_LT(worst, 5e-7);  // the erf formula's 1.5e-7 plus float rounding
  EXPECT_EQ(kiln_gelu_derivative(0.0f), 0.5f);
  EXPECT_EQ(kiln_gelu_derivative(12.7f), 1.0f);
  EXPECT_EQ(kiln_gelu_derivative(-12.7f), 0.0f);
  EXPECT_FLOAT_EQ(kiln_gelu_derivative(-12.6f),
                  -12.6f * 0x1.988454p-2f * kiln_expf(-12.6f * 12.6f / 2));
  EXPECT_TRUE(std::isnan(kiln_gelu_derivative(NAN)));
  EXPECT_TRUE(std::isnan(kiln_gelu_derivative(INFINITY)));
  EXPECT_TRUE(std::isnan(kiln_gelu_derivative(-INFINITY)));
}

// Every step of a float bit pattern sweep, each towards zero, the infinities
// and NaN, bit for bit as std::nextafter (eager's kernel).
template <typename T, typename Next>
void ExpectNextafterExact(Next next, T x) {
  const T inf = std::numeric_limits<T>::infinity();
  for (T y : {T(0), T(-0.0), inf, -inf, x, std::numeric_limits<T>::quiet_NaN()}) {
    const T got = next(x, y), want = std::nextafter(x, y);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hexfloat << x << " towards " << y;
    } else {
      EXPECT_EQ(std::memcmp(&got, &want, sizeof(T)), 0)
          << std::hexfloat << x << " towards " << y << ": got " << got << ", want " << want;
    }
  }
}

TEST(KilnMathTest, NextafterIsStdNextafter) {
  for (int sign : {1, -1}) {
    for (uint32_t bits = 0; bits <= 0x7f800000u; bits += 0x10001) {
      float x;
      memcpy(&x, &bits, sizeof(x));
      ExpectNextafterExact<float>(kiln_nextafterf, sign * x);
      ExpectNextafterExact<double>(kiln_nextafter, sign * static_cast<double>(x) * 0x1p-900);
      ExpectNextafterExact<double>(kiln_nextafter, sign * static_cast<double>(x));
    }
  }
  for (float x : {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::max()}) {
    ExpectNextafterExact<float>(kiln_nextafterf, x);
    ExpectNextafterExact<float>(kiln_nextafterf, -x);
  }
  for (double x : {0.0, std::numeric_limits<double>::denorm_min(),
                   std::numeric_limits<double>::min(), std::numeric_limits<double>::max()}) {
    ExpectNextafterExact<double>(kiln_nextafter, x);
    ExpectNextafterExact<double>(kiln_nextafter, -x);
  }
}

TEST(KilnMathTest, FrexpIsStdFrexp) {
  auto check_float = [](float x) {
    int want_exponent;
    const float want = std::frexp(x, &want_exponent);
    EXPECT_EQ(kiln_frexp_exponentf(x), std::isfinite(x) ? want_exponent : 0) << std::hexfloat << x;
    const float got = kiln_frexp_mantissaf(x);
    EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : std::memcmp(&got, &want, 4) == 0)
        << std::hexfloat << x << ": got " << got << ", want " << want;
  };
  auto check_double = [](double x) {
    int want_exponent;
    const double want = std::frexp(x, &want_exponent);
    EXPECT_EQ(kiln_frexp_exponent(x), std::isfinite(x) ? want_exponent : 0) << std::hexfloat << x;
    const double got = kiln_frexp_mantissa(x);
    EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : std::memcmp(&got, &want, 8) == 0)
        << std::hexfloat << x << ": got " << got << ", want " << want;
  };
  for (int sign : {1, -1}) {
    for (uint32_t bits = 0; bits <= 0x7fc00000u; bits += 0x1001) {
      float x;
      memcpy(&x, &bits, sizeof(x));
      check_float(sign * x);
      check_double(sign * static_cast<double>(x));
      check_double(sign * static_cast<double>(x) * 0x1p-1000);
    }
  }
  for (float x : {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), INFINITY, -INFINITY}) {
    check_float(x);
    check_double(x);
  }
  check_double(std::numeric_limits<double>::denorm_min());
  check_double(std::numeric_limits<double>::max());
}

TEST(KilnMathTest, GcdAndLcmAreStds) {
  for (long long a = -40; a <= 40; ++a) {
    for (long long b = -40; b <= 40; ++b) {
      EXPECT_EQ(kiln_gcd_i64(a, b), std::gcd(a, b)) << a << ", " << b;
      EXPECT_EQ(kiln_lcm_i64(a, b), std::lcm(a, b)) << a << ", " << b;
    }
  }
  EXPECT_EQ(kiln_gcd_i64(1LL << 40, 6LL << 30), 2LL << 30);
  EXPECT_EQ(kiln_lcm_i64(-(1LL << 40), 3), 3LL << 40);
}

}  // namespace
}  // namespace kiln
