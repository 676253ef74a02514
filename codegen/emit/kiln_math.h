/* Kiln's vectorizable transcendentals: the named source of float32 exp, log
 * and tanh (and gelu's erf) in every artifact; the rest come from the
 * runtime table (kiln_abi.h).
 *
 * Plain C with no includes and no libm calls, pasted into generated sources:
 * branch-free (selects only), bit casts through __builtin_memcpy, so clang
 * vectorizes loops that call them without fast-math. Accuracy, checked
 * against double-precision libm over sweeps that include huge, tiny,
 * denormal and exceptional inputs (kiln_math_test): kiln_expf and kiln_logf
 * <= 1 ulp (also over every float, checked once when they were written),
 * kiln_tanhf <= 2 ulp;
 * kiln_erf_for_gelu within 5e-7 absolute (1.7e-7 measured), kiln_gelu_derivative
 * too (1.9e-7 measured). NaN in gives NaN out;
 * exp(-inf) = 0, exp(inf) = inf, log(+-0) = -inf, log(x < 0) = NaN,
 * log(inf) = inf, tanh(+-inf) = +-1, tanh(-0) = -0.
 * Changing any result here changes generated code: bump kCodegenVersion. */
#ifndef KILN_MATH_H_
#define KILN_MATH_H_

static inline float kiln_bits_to_float(unsigned int bits) {
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

/* exp's reduction and polynomial, for x (already clamped) = k ln 2 + r with
 * k = round(x / ln 2): exp(r) and k. Cody-Waite with a two-part ln 2 and
 * Cephes' degree-6 polynomial; k comes out of one FMA with 1.5 * 2^23 added
 * (the rounded value lands in the low mantissa bits), which saves the round
 * and the conversion. */
typedef struct {
  float exp_r;
  int k;
} kiln_exp_parts;

static inline kiln_exp_parts kiln_exp_reduced(float x) {
  const float shifted = __builtin_fmaf(x, 0x1.715476p+0f, 0x1.8p+23f);
  const float kf = shifted - 0x1.8p+23f;
  float r = __builtin_fmaf(kf, -0x1.62e400p-1f, x);
  r = __builtin_fmaf(kf, -0x1.7f7d1cp-20f, r);
  float p = 0x1.a0c1d6p-13f;
  p = __builtin_fmaf(p, r, 0x1.6e8d44p-10f);
  p = __builtin_fmaf(p, r, 0x1.11115ap-7f);
  p = __builtin_fmaf(p, r, 0x1.5554b8p-5f);
  p = __builtin_fmaf(p, r, 0x1.555556p-3f);
  p = __builtin_fmaf(p, r, 0x1.000000p-1f);
  unsigned int shifted_bits;
  __builtin_memcpy(&shifted_bits, &shifted, 4);
  const kiln_exp_parts parts = {__builtin_fmaf(p * r, r, r) + 1.0f,
                                (int)(shifted_bits - 0x4b400000u)};
  return parts;
}

/* exp(x) = 2^k * exp(r), 2^k applied in two steps so that denormal results
 * round once. No special-case selects: NaN passes through the clamps and the
 * arithmetic, and past the clamps the scaling itself overflows to inf
 * (x > 88.72) or rounds to 0 (x < -103.97). Exhaustively within 1 ulp of the
 * correctly rounded result. */
static inline float kiln_expf(float x) {
  float clamped = x < -104.0f ? -104.0f : x;
  clamped = clamped > 89.0f ? 89.0f : clamped;
  const kiln_exp_parts parts = kiln_exp_reduced(clamped);
  const int half = parts.k >> 1;
  const float scale1 = kiln_bits_to_float((unsigned int)(half + 127) << 23);
  const float scale2 = kiln_bits_to_float((unsigned int)(parts.k - half + 127) << 23);
  return parts.exp_r * scale1 * scale2;
}

/* kiln_expf(x) for x <= 0 or NaN (softmax's exp(x - max)), bit for bit
 * (kiln_math_test checks every such float), in fewer instructions: with
 * k <= 0, p * 2^(k + 64) is a normal number, exact, and one multiply by
 * 2^-64 rounds once. No upper clamp; exact up to x = 43, wrong above. */
static inline float kiln_expf_nonpositive(float x) {
  const float clamped = x < -104.0f ? -104.0f : x;
  const kiln_exp_parts parts = kiln_exp_reduced(clamped);
  return parts.exp_r * kiln_bits_to_float((unsigned int)(parts.k + 64 + 127) << 23) * 0x1p-64f;
}

/* log(x) = e ln 2 + log(m), x = m 2^e with m in [sqrt(1/2), sqrt(2))
 * (denormals scaled by 2^23 first), log(1 + f) = f - f^2/2 + f^3 P(f) with
 * Cephes' degree-8 P, ln 2 in two parts. */
static inline float kiln_logf(float x) {
  const int denormal = x < 0x1p-126f;
  const float scaled = denormal ? x * 0x1p+23f : x;
  unsigned int bits;
  __builtin_memcpy(&bits, &scaled, 4);
  int exponent = (int)((bits >> 23) & 0xffu) - (denormal ? 150 : 127);
  float m = kiln_bits_to_float((bits & 0x007fffffu) | 0x3f800000u);
  const int high = m > 0x1.6a09e6p+0f;
  m = high ? m * 0.5f : m;
  exponent = high ? exponent + 1 : exponent;
  const float f = m - 1.0f;
  const float z = f * f;
  float p = 0x1.204376p-4f;
  p = __builtin_fmaf(p, f, -0x1.d7a37p-4f);
  p = __builtin_fmaf(p, f, 0x1.de4a34p-4f);
  p = __builtin_fmaf(p, f, -0x1.fcba9ep-4f);
  p = __builtin_fmaf(p, f, 0x1.23d37ep-3f);
  p = __builtin_fmaf(p, f, -0x1.555cap-3f);
  p = __builtin_fmaf(p, f, 0x1.999d58p-3f);
  p = __builtin_fmaf(p, f, -0x1.fffff8p-3f);
  p = __builtin_fmaf(p, f, 0x1.555554p-2f);
  const float e = (float)exponent;
  float y = p * f * z;
  y = __builtin_fmaf(e, -0x1.bd0106p-13f, y);
  y = __builtin_fmaf(z, -0.5f, y);
  float result = __builtin_fmaf(e, 0x1.63p-1f, f + y);
  result = x == __builtin_inff() ? x : result;
  result = x == 0.0f ? -__builtin_inff() : result;
  result = x < 0.0f ? __builtin_nanf("") : result;
  return x != x ? x : result;
}

/* tanh: an odd polynomial for |x| < 0.4 (Cephes; its error grows past that),
 * else 1 - 2 / (exp(2|x|) + 1)
 * with the sign of x; +-1 beyond |x| = 9 (where tanh rounds to 1). */
static inline float kiln_tanhf(float x) {
  const float a = x < 0.0f ? -x : x;
  const float z = x * x;
  float p = -0x1.75e1c6p-8f;
  p = __builtin_fmaf(p, z, 0x1.52258ap-6f);
  p = __builtin_fmaf(p, z, -0x1.b83f96p-5f);
  p = __builtin_fmaf(p, z, 0x1.1104b6p-3f);
  p = __builtin_fmaf(p, z, -0x1.555514p-2f);
  const float small = __builtin_fmaf(p * z, x, x);
  const float e = kiln_expf(2.0f * (a > 9.0f ? 9.0f : a));
  float large = 1.0f - 2.0f / (e + 1.0f);
  large = a > 9.0f ? 1.0f : large;
  large = x < 0.0f ? -large : large;
  float result = a < 0.4f ? small : large;
  result = a == 0.0f ? x : result;  // keeps the sign of zero
  return x != x ? x : result;
}

/* erf for gelu only (the erf op itself is libm's, to 1 ulp): polynomials
 * with no division and no exp, so gelu vectorizes cheaply. |x| < 1: x P(x^2),
 * P of degree 5; 1 <= |x| < 4: Q(|x| - 2.5), Q of degree 12 (least-squares
 * fits to erf in double, coefficients rounded to float); +-1 beyond 4 (where
 * erf rounds to 1). Within 1.7e-7 absolute over a dense sweep of
 * [-10, 10] (kiln_math_test allows 5e-7); gelu is held to assert_close
 * tolerances against eager, whose own contiguous float32 gelu is an
 * approximation too. Two polynomials in FMAs: no division and no exp, which
 * the Abramowitz-Stegun form needs. */
static inline float kiln_erf_for_gelu(float x) {
  const float a = x < 0.0f ? -x : x;
  const float z = a * a;
  float p = -0x1.2bbdb0p-11f;
  p = __builtin_fmaf(p, z, 0x1.43ab10p-8f);
  p = __builtin_fmaf(p, z, -0x1.b5f0fap-6f);
  p = __builtin_fmaf(p, z, 0x1.ce1040p-4f);
  p = __builtin_fmaf(p, z, -0x1.8126b0p-2f);
  p = __builtin_fmaf(p, z, 0x1.20dd74p+0f);
  const float small = p * a;
  const float t = a - 2.5f;
  float q = -0x1.274b86p-17f;
  q = __builtin_fmaf(q, t, 0x1.665940p-16f);
  q = __builtin_fmaf(q, t, 0x1.f761dcp-15f);
  q = __builtin_fmaf(q, t, -0x1.2638fcp-12f);
  q = __builtin_fmaf(q, t, 0x1.30aab4p-12f);
  q = __builtin_fmaf(q, t, 0x1.2cbb2ep-11f);
  q = __builtin_fmaf(q, t, -0x1.71e754p-9f);
  q = __builtin_fmaf(q, t, 0x1.8fcef2p-8f);
  q = __builtin_fmaf(q, t, -0x1.1a4000p-7f);
  q = __builtin_fmaf(q, t, 0x1.11bf5ap-7f);
  q = __builtin_fmaf(q, t, -0x1.64f838p-8f);
  q = __builtin_fmaf(q, t, 0x1.1d799ep-9f);
  q = __builtin_fmaf(q, t, 0x1.ffcaaap-1f);
  float y = a < 1.0f ? small : q;
  y = a >= 4.0f ? 1.0f : y;
  y = x < 0.0f ? -y : y;
  return x != x ? x : y;
}

/* gelu's derivative, cdf(x) + x pdf(x) with cdf(x) = (1 + erf(x / sqrt 2))
 * / 2 and pdf(x) = exp(-x^2 / 2) / sqrt(2 pi), for gelu_backward. One exp
 * serves both: erf(z) = 1 - P(t) t exp(-z^2), t = 1 / (1 + p |z|)
 * (Abramowitz-Stegun 7.1.26, within 1.5e-7), with exp(-z^2) the pdf's own
 * exp(-x^2 / 2): one exp where the pdf's exp beside kiln_erf_for_gelu's
 * polynomials would take more work per element. Past |x| = 12.6
 * (x^2 / 2 > 80) the exp is taken as 0, so that no step is a denormal (a
 * denormal operand costs a microcode assist on x86), and the result is
 * exactly 0 or 1, less than 1e-33
 * from the true value; at +-inf it is NaN (inf times a zero pdf), as the
 * unfused formula's. */
static inline float kiln_gelu_derivative(float x) {
  const float arg = x * x * -0.5f;
  const float e = arg < -80.0f ? 0.0f : kiln_expf_nonpositive(arg < -80.0f ? -80.0f : arg);
  const float z = x * 0x1.6a09e6p-1f; /* x / sqrt 2 */
  const float a = z < 0.0f ? -z : z;
  const float t = 1.0f / __builtin_fmaf(0x1.4f740ap-2f, a, 1.0f);
  float p = 0x1.0fb844p+0f;
  p = __builtin_fmaf(p, t, -0x1.7401c6p+0f);
  p = __builtin_fmaf(p, t, 0x1.6be1c6p+0f);
  p = __builtin_fmaf(p, t, -0x1.23531cp-2f);
  p = __builtin_fmaf(p, t, 0x1.04f20cp-2f);
  const float erf_abs = 1.0f - p * t * e;
  const float erf = z < 0.0f ? -erf_abs : erf_abs;
  return __builtin_fmaf(0.5f, erf, 0.5f) + x * (0x1.988454p-2f * e);
}

/* Python's floor division and modulo of integers, as eager's int64
 * kernels: the quotient rounded down, the remainder with the divisor's sign.
 * The divisor is a nonzero constant (codegen/ops/pointwise.cc takes no
 * other: eager raises on a zero divisor, which a kernel cannot). */
static inline long long kiln_floor_divide_i64(long long a, long long b) {
  const long long q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static inline long long kiln_remainder_i64(long long a, long long b) {
  const long long r = a % b;
  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}

/* IEEE 754 bit operations, exact as eager's (std::nextafter, std::frexp,
 * and c10's gcd and lcm). */
static inline unsigned int kiln_float_to_bits(float f) {
  unsigned int bits;
  __builtin_memcpy(&bits, &f, 4);
  return bits;
}

static inline double kiln_bits_to_double(unsigned long long bits) {
  double d;
  __builtin_memcpy(&d, &bits, 8);
  return d;
}

static inline unsigned long long kiln_double_to_bits(double d) {
  unsigned long long bits;
  __builtin_memcpy(&bits, &d, 8);
  return bits;
}

/* The next float after x towards y: y itself when equal (so +-0 towards
 * -+0 is y), NaN when either is, the smallest denormal of y's sign from a
 * zero; else x's bit pattern one step away from or towards zero. */
static inline float kiln_nextafterf(float x, float y) {
  if (x != x || y != y) return x + y;
  if (x == y) return y;
  if (x == 0.0f) return y > 0.0f ? 0x1p-149f : -0x1p-149f;
  const unsigned int bits = kiln_float_to_bits(x);
  return kiln_bits_to_float((x < y) == (x > 0.0f) ? bits + 1 : bits - 1);
}

static inline double kiln_nextafter(double x, double y) {
  if (x != x || y != y) return x + y;
  if (x == y) return y;
  if (x == 0.0) return y > 0.0 ? 0x1p-1074 : -0x1p-1074;
  const unsigned long long bits = kiln_double_to_bits(x);
  return kiln_bits_to_double((x < y) == (x > 0.0) ? bits + 1 : bits - 1);
}

/* frexp's exponent: x = m 2^e with 0.5 <= |m| < 1; 0 for a zero, an
 * infinity or NaN. A denormal is scaled into the normal range first. */
static inline int kiln_frexp_exponentf(float x) {
  if (x == 0.0f || x - x != 0.0f) return 0;
  const int scaled = (kiln_float_to_bits(x) & 0x7f800000u) == 0;
  const unsigned int bits = kiln_float_to_bits(scaled ? x * 0x1p25f : x);
  return (int)((bits >> 23) & 0xffu) - 126 - (scaled ? 25 : 0);
}

static inline int kiln_frexp_exponent(double x) {
  if (x == 0.0 || x - x != 0.0) return 0;
  const int scaled = (kiln_double_to_bits(x) & 0x7ff0000000000000ull) == 0;
  const unsigned long long bits = kiln_double_to_bits(scaled ? x * 0x1p54 : x);
  return (int)((bits >> 52) & 0x7ffull) - 1022 - (scaled ? 54 : 0);
}

/* frexp's mantissa: x with its exponent replaced by -1 (x itself for a
 * zero, an infinity or NaN). */
static inline float kiln_frexp_mantissaf(float x) {
  if (x == 0.0f || x - x != 0.0f) return x;
  const int scaled = (kiln_float_to_bits(x) & 0x7f800000u) == 0;
  const unsigned int bits = kiln_float_to_bits(scaled ? x * 0x1p25f : x);
  return kiln_bits_to_float((bits & 0x807fffffu) | 0x3f000000u);
}

static inline double kiln_frexp_mantissa(double x) {
  if (x == 0.0 || x - x != 0.0) return x;
  const int scaled = (kiln_double_to_bits(x) & 0x7ff0000000000000ull) == 0;
  const unsigned long long bits = kiln_double_to_bits(scaled ? x * 0x1p54 : x);
  return kiln_bits_to_double((bits & 0x800fffffffffffffull) | 0x3fe0000000000000ull);
}

/* Euclid's algorithm on the magnitudes, as c10's calc_gcd; magnitudes and
 * products wrap as unsigned (eager's overflow there is undefined). */
static inline long long kiln_gcd_i64(long long a, long long b) {
  unsigned long long x = a < 0 ? 0ull - (unsigned long long)a : (unsigned long long)a;
  unsigned long long y = b < 0 ? 0ull - (unsigned long long)b : (unsigned long long)b;
  while (x != 0) {
    const unsigned long long r = y % x;
    y = x;
    x = r;
  }
  return (long long)y;
}

/* |a / gcd(a, b) * b|, 0 when the gcd is, as c10's lcm. */
static inline long long kiln_lcm_i64(long long a, long long b) {
  const long long g = kiln_gcd_i64(a, b);
  if (g == 0) return 0;
  const long long product = (long long)((unsigned long long)(a / g) * (unsigned long long)b);
  return product < 0 ? (long long)(0ull - (unsigned long long)product) : product;
}

#endif /* KILN_MATH_H_ */
