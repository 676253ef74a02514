/* Kiln's special functions for generated sources: the gamma family
 * (lgamma, digamma, trigamma, the regularized incomplete gamma functions),
 * Hurwitz zeta, erf, erfc, erfcx, erfinv and the normal quantile, and the
 * elementary functions they and kiln_bessel.h and kiln_polynomials.h
 * (pasted after this file) build on.
 * The emitter pastes the three into a source that calls one of them
 * (codegen/emit/emit_cpp.cc).
 *
 * Plain C with no includes and no libm calls, like kiln_math.h: every
 * function computes in double (float32 operands are widened and the result
 * rounded once), with its own exp, log, sin, cos and atan. Branches are
 * selects and coefficient loops have constant trip counts (unrolled), so
 * clang vectorizes loops that call them; zeta's sum for a negative q and
 * the incomplete gamma functions' series and continued fraction are the
 * data-dependent loops here.
 * Algorithms: Cephes (zeta, digamma, trigamma, ndtri, and in kiln_bessel.h
 * i0, i1, k0, k1 and their scaled forms, j0, j1, y0, y1 and airy), derived
 * from the Cephes Math Library (3-clause BSD, Copyright (c) 2018, Steven
 * Moshier); lgamma from Lanczos's approximation (g = 7, 9 terms); erfcx from
 * a Chebyshev series fitted by kiln_special_fit.py; erfinv by Newton's
 * method from eager's rational first guess; the incomplete gamma functions
 * by Numerical Recipes' series and continued fraction. Special values
 * (poles, infinities, NaN, domain edges) follow eager PyTorch's CPU kernels.
 * Accuracy: kiln_special_test checks each against libm, libstdc++'s special
 * functions or tabulated values, to 1e-14 relative or better for most (the
 * test states each bound).
 * Changing any result here changes generated code: bump kCodegenVersion. */
#ifndef KILN_SPECIAL_H_
#define KILN_SPECIAL_H_

#define KILN_SPECIAL_UNROLL _Pragma("clang loop unroll(full)")

static inline double kiln_special_bits_to_double(unsigned long long bits) {
  double d;
  __builtin_memcpy(&d, &bits, 8);
  return d;
}

static inline double kiln_special_select_nan(double x, double result) {
  return x != x ? x : result;
}

/* Horner's rule over coefficients highest degree first. */
static inline double kiln_special_polevl(double x, const double* c, int count) {
  double p = c[0];
  KILN_SPECIAL_UNROLL for (int i = 1; i < count; ++i) p = __builtin_fma(p, x, c[i]);
  return p;
}

/* Clenshaw's sum of a Chebyshev series at x (Cephes' chbevl: coefficients
 * highest order first, x already mapped to [-2, 2]). */
static inline double kiln_special_chbevl(double x, const double* c, int count) {
  double b0 = c[0], b1 = 0.0, b2 = 0.0;
  KILN_SPECIAL_UNROLL for (int i = 1; i < count; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = x * b1 - b2 + c[i];
  }
  return 0.5 * (b0 - b2);
}

/* exp(x) = 2^k exp(r), |r| <= ln2 / 2, exp(r) by its Taylor series to
 * degree 13, 2^k applied in two steps so that denormal results round once. */
static inline double kiln_special_exp(double x) {
  double c = x < -746.0 ? -746.0 : x;
  c = c > 710.0 ? 710.0 : c;
  c = c == c ? c : 0.0; /* NaN: any finite k (the result is x), never a NaN cast */
  const double kf = __builtin_rint(c * 1.4426950408889634);
  double r = __builtin_fma(kf, -6.93147180369123816490e-01, c);
  r = __builtin_fma(kf, -1.90821492927058770002e-10, r);
  double p = 1.0 / 6227020800.0;
  p = __builtin_fma(p, r, 1.0 / 479001600.0);
  p = __builtin_fma(p, r, 1.0 / 39916800.0);
  p = __builtin_fma(p, r, 1.0 / 3628800.0);
  p = __builtin_fma(p, r, 1.0 / 362880.0);
  p = __builtin_fma(p, r, 1.0 / 40320.0);
  p = __builtin_fma(p, r, 1.0 / 5040.0);
  p = __builtin_fma(p, r, 1.0 / 720.0);
  p = __builtin_fma(p, r, 1.0 / 120.0);
  p = __builtin_fma(p, r, 1.0 / 24.0);
  p = __builtin_fma(p, r, 1.0 / 6.0);
  p = __builtin_fma(p, r, 0.5);
  p = __builtin_fma(p * r, r, r) + 1.0;
  const long long k = (long long)kf;
  const long long half = k >> 1;
  const double scale1 = kiln_special_bits_to_double((unsigned long long)(half + 1023) << 52);
  const double scale2 = kiln_special_bits_to_double((unsigned long long)(k - half + 1023) << 52);
  return kiln_special_select_nan(x, p * scale1 * scale2);
}

/* log(x) = e ln 2 + log(1 + f), 1 + f in [sqrt(1/2), sqrt(2)), with
 * s = f / (2 + f): log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)) (fdlibm's
 * form), R's series 2 z / 3 + 2 z^2 / 5 + ... to z^11. */
static inline double kiln_special_log(double x) {
  const int denormal = x < 0x1p-1022;
  const double scaled = denormal ? x * 0x1p+54 : x;
  unsigned long long bits;
  __builtin_memcpy(&bits, &scaled, 8);
  long long exponent = (long long)((bits >> 52) & 0x7ff) - (denormal ? 1077 : 1023);
  double m = kiln_special_bits_to_double((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
  const int high = m > 1.4142135623730951;
  m = high ? m * 0.5 : m;
  exponent = high ? exponent + 1 : exponent;
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  double r = 2.0 / 23.0;
  r = __builtin_fma(r, z, 2.0 / 21.0);
  r = __builtin_fma(r, z, 2.0 / 19.0);
  r = __builtin_fma(r, z, 2.0 / 17.0);
  r = __builtin_fma(r, z, 2.0 / 15.0);
  r = __builtin_fma(r, z, 2.0 / 13.0);
  r = __builtin_fma(r, z, 2.0 / 11.0);
  r = __builtin_fma(r, z, 2.0 / 9.0);
  r = __builtin_fma(r, z, 2.0 / 7.0);
  r = __builtin_fma(r, z, 2.0 / 5.0);
  r = __builtin_fma(r, z, 2.0 / 3.0);
  r *= z;
  const double e = (double)exponent;
  const double half_square = 0.5 * f * f;
  double result = e * 6.93147180369123816490e-01 +
                  (f - (half_square - (s * (half_square + r) + e * 1.90821492927058770002e-10)));
  result = x == __builtin_inf() ? x : result;
  result = x == 0.0 ? -__builtin_inf() : result;
  result = x < 0.0 ? __builtin_nan("") : result;
  return kiln_special_select_nan(x, result);
}

/* sin(r) and cos(r) for |r| <= pi/4, Taylor series to degree 17 and 16. */
static inline double kiln_special_sin_kernel(double r) {
  const double z = r * r;
  double p = 1.0 / 355687428096000.0;
  p = __builtin_fma(p, z, -1.0 / 1307674368000.0);
  p = __builtin_fma(p, z, 1.0 / 6227020800.0);
  p = __builtin_fma(p, z, -1.0 / 39916800.0);
  p = __builtin_fma(p, z, 1.0 / 362880.0);
  p = __builtin_fma(p, z, -1.0 / 5040.0);
  p = __builtin_fma(p, z, 1.0 / 120.0);
  p = __builtin_fma(p, z, -1.0 / 6.0);
  return __builtin_fma(p * z, r, r);
}

static inline double kiln_special_cos_kernel(double r) {
  const double z = r * r;
  double p = 1.0 / 20922789888000.0;
  p = __builtin_fma(p, z, -1.0 / 87178291200.0);
  p = __builtin_fma(p, z, 1.0 / 479001600.0);
  p = __builtin_fma(p, z, -1.0 / 3628800.0);
  p = __builtin_fma(p, z, 1.0 / 40320.0);
  p = __builtin_fma(p, z, -1.0 / 720.0);
  p = __builtin_fma(p, z, 1.0 / 24.0);
  p = __builtin_fma(p, z, -0.5);
  return __builtin_fma(p, z, 1.0);
}

/* sin(x) (cosine = 0) or cos(x) (cosine = 1): x = k pi/2 + r with pi/2 in
 * four parts (fdlibm's), accurate while |x| < 2^40; infinities give NaN. */
static inline double kiln_special_sin_or_cos(double x, int cosine) {
  double kf = __builtin_rint(x * 6.36619772367581382433e-01);
  kf = kf > 0x1p+52 ? 0x1p+52 : (kf < -0x1p+52 ? -0x1p+52 : kf);
  kf = kf != kf ? 0.0 : kf;
  double r = __builtin_fma(kf, -1.57079632673412561417e+00, x);
  r = __builtin_fma(kf, -6.07710050630396597660e-11, r);
  r = __builtin_fma(kf, -2.02226624871116645580e-21, r);
  r = __builtin_fma(kf, -8.47842766036889956997e-32, r);
  const int quadrant = (int)((long long)kf & 3) + cosine;
  const double s = kiln_special_sin_kernel(r);
  const double c = kiln_special_cos_kernel(r);
  const double value = (quadrant & 1) ? c : s;
  const double result = (quadrant & 2) ? -value : value;
  return __builtin_fabs(x) == __builtin_inf() ? __builtin_nan("") : result;
}

static inline double kiln_special_sin(double x) { return kiln_special_sin_or_cos(x, 0); }
static inline double kiln_special_cos(double x) { return kiln_special_sin_or_cos(x, 1); }

/* sin(pi x) and cos(pi x) with the reduction exact: x = n/2 + r, |r| <= 1/4.
 * sin(pi n) is +0 at integers; infinities give NaN. */
static inline double kiln_special_sinpi_or_cospi(double x, int cosine) {
  double n = __builtin_rint(x + x);
  n = __builtin_fabs(x) < 0x1p+52 ? n : 0.0; /* also NaN: never a NaN cast */
  const double r = (__builtin_fabs(x) >= 0x1p+52 ? 0.0 : x - 0.5 * n) * 3.14159265358979323846;
  const int quadrant = (int)((long long)n & 3) + cosine;
  const double value = (quadrant & 1) ? kiln_special_cos_kernel(r) : kiln_special_sin_kernel(r);
  const double result = (quadrant & 2) ? -value : value;
  return __builtin_fabs(x) == __builtin_inf() ? __builtin_nan("") : result;
}

static inline double kiln_special_sinpi(double x) { return kiln_special_sinpi_or_cospi(x, 0); }
static inline double kiln_special_cospi(double x) { return kiln_special_sinpi_or_cospi(x, 1); }

/* atan(x): atan(|x|) = pi/2 - atan(1/|x|) past 1, then two halvings
 * atan(t) = 2 atan(t / (1 + sqrt(1 + t^2))) to |t| <= tan(pi/16), and the
 * Taylor series to degree 25. */
static inline double kiln_special_atan(double x) {
  const double a = __builtin_fabs(x);
  const int inverted = a > 1.0;
  double t = inverted ? 1.0 / a : a;
  t = t / (1.0 + __builtin_sqrt(__builtin_fma(t, t, 1.0)));
  t = t / (1.0 + __builtin_sqrt(__builtin_fma(t, t, 1.0)));
  const double z = t * t;
  double p = 1.0 / 25.0;
  KILN_SPECIAL_UNROLL for (int k = 11; k >= 1; --k) { p = __builtin_fma(p, -z, 1.0 / (2 * k + 1)); }
  p = __builtin_fma(p * -z, t, t) * 4.0;
  const double result = inverted ? 1.57079632679489661923 - p : p;
  return kiln_special_select_nan(x, x < 0.0 ? -result : result);
}

/* acos(x) = 2 atan(sqrt((1 - x) / (1 + x))); NaN outside [-1, 1]. */
static inline double kiln_special_acos(double x) {
  const double result = 2.0 * kiln_special_atan(__builtin_sqrt((1.0 - x) / (1.0 + x)));
  return x == -1.0 ? 3.14159265358979323846 : result;
}

/* lgamma: log(Gamma(y)) by Lanczos's sum for y >= 1/2, and the reflection
 * lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x) below; +inf at the
 * poles (0 and the negative integers) and at +-inf. */
static inline double kiln_special_lgamma(double x) {
  static const double kCoefficients[8] = {
      676.5203681218851,  -1259.1392167224028,  771.32342877765313,    -176.61502916214059,
      12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7};
  const int reflect = x < 0.5;
  const double y = (reflect ? 1.0 - x : x) - 1.0;
  double sum = 0.99999999999980993;
  KILN_SPECIAL_UNROLL for (int i = 0; i < 8; ++i) sum += kCoefficients[i] / (y + (double)(i + 1));
  const double t = y + 7.5;
  const double lanczos =
      0.91893853320467274178 + (y + 0.5) * kiln_special_log(t) - t + kiln_special_log(sum);
  const double reflected =
      kiln_special_log(3.14159265358979323846 / __builtin_fabs(kiln_special_sinpi(x))) - lanczos;
  const double result = reflect ? reflected : lanczos;
  return __builtin_fabs(x) == __builtin_inf() ? __builtin_inf()
                                              : kiln_special_select_nan(x, result);
}

/* digamma (Cephes psi): the recurrence psi(y) = psi(y + 1) - 1/y up to
 * y >= 10, then the asymptotic series; psi(x) = psi(1 - x) - pi / tan(pi x)
 * for x < 0. +-inf at +-0 (sign of -x), NaN at the negative integers. */
static inline double kiln_special_digamma(double x) {
  static const double kAsymptotic[7] = {8.33333333333333333333E-2, -2.10927960927960927961E-2,
                                        7.57575757575757575758E-3, -4.16666666666666666667E-3,
                                        3.96825396825396825397E-3, -8.33333333333333333333E-3,
                                        8.33333333333333333333E-2};
  const int negative = x < 0.0;
  double y = negative ? 1.0 - x : x;
  double result = 0.0;
  KILN_SPECIAL_UNROLL for (int i = 0; i < 10; ++i) {
    const int small = y < 10.0;
    result -= small ? 1.0 / y : 0.0;
    y = small ? y + 1.0 : y;
  }
  const double z = 1.0 / (y * y);
  const double series = y < 1.0e17 ? z * kiln_special_polevl(z, kAsymptotic, 7) : 0.0;
  result += kiln_special_log(y) - 0.5 / y - series;
  const double reflected =
      result - 3.14159265358979323846 * kiln_special_cospi(x) / kiln_special_sinpi(x);
  result = negative ? reflected : result;
  result = negative && x == __builtin_trunc(x) ? __builtin_nan("") : result;
  result = x == 0.0 ? (__builtin_signbit(x) ? __builtin_inf() : -__builtin_inf()) : result;
  result = x == __builtin_inf() ? x : result;
  return kiln_special_select_nan(x, result);
}

/* trigamma (eager's): psi'(x) = sum 1/(x + k)^2, six terms of the sum, then
 * the asymptotic series; the reflection pi^2 / sin^2(pi x) below 1/2, with
 * sin(pi x) rounded as eager's, so that at the negative integers it is the
 * same large finite value (eager's float64; its float32 kernel computes in
 * float and gives another). */
static inline double kiln_special_trigamma(double x) {
  const int reflect = x < 0.5;
  const double sin_pi_x = kiln_special_sin(3.14159265358979323846 * x);
  double result = reflect ? -(9.86960440108935861883 / (sin_pi_x * sin_pi_x)) : 0.0;
  double y = reflect ? 1.0 - x : x;
  KILN_SPECIAL_UNROLL for (int i = 0; i < 6; ++i) {
    result += 1.0 / (y * y);
    y += 1.0;
  }
  const double ixx = 1.0 / (y * y);
  result += (1.0 + 1.0 / (2.0 * y) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / y;
  return reflect ? -result : result;
}

/* a^-x, a negative base taking an integer x's sign. */
static inline double kiln_special_pow_negated(double a, double x) {
  const double power = kiln_special_exp(-x * kiln_special_log(__builtin_fabs(a)));
  const double magnitude = __builtin_fabs(a) == 1.0 ? 1.0 : power;          /* 1^inf = 1, as pow */
  const int odd = __builtin_fabs(x - 2.0 * __builtin_rint(0.5 * x)) == 1.0; /* not inf */
  return a < 0.0 && odd ? -magnitude : magnitude;
}

/* Hurwitz zeta(x, q) = sum_k (q + k)^-x (Cephes zeta): the sum to k with
 * q + k > 9 and k >= 9 (about -q terms for a negative q, as eager's), then
 * the Euler-Maclaurin tail with 12 terms. inf at x = 1 and at the poles
 * q = 0, -1, ... (and -inf); NaN for x < 1, and for q < 0 with a
 * non-integer x. */
static inline double kiln_special_zeta(double x, double q) {
  static const double kEulerMaclaurin[12] = {12.0,
                                             -720.0,
                                             30240.0,
                                             -1209600.0,
                                             47900160.0,
                                             -1.8924375803183791606e9,
                                             7.47242496e10,
                                             -2.950130727918164224e12,
                                             1.1646782814350067249e14,
                                             -4.5979787224074726105e15,
                                             1.8152105401943546773e17,
                                             -7.1661652561756670113e18};
  if (x == 1.0) return __builtin_inf();
  if (x < 1.0) return __builtin_nan("");
  if (q <= 0.0 && q == __builtin_floor(q)) return __builtin_inf();
  if (q <= 0.0 && x != __builtin_floor(x)) return __builtin_nan("");
  double s = kiln_special_pow_negated(q, x);
  double a = q, b = 0.0;
  int i = 0;
  while (i < 9 || a <= 9.0) {
    ++i;
    a += 1.0;
    b = kiln_special_pow_negated(a, x);
    s += b;
    /* Cephes' early exit, as eager's: the terms no longer count. */
    if (-1.11022302462515654042e-16 * s < b && b < 1.11022302462515654042e-16 * s) return s;
  }
  if (s == __builtin_inf()) return s; /* x = inf and q < 1 */
  const double w = a;
  s += b * w / (x - 1.0);
  s -= 0.5 * b;
  double factor = 1.0, k = 0.0;
  KILN_SPECIAL_UNROLL for (int j = 0; j < 12; ++j) {
    factor *= x + k;
    b /= w;
    s += factor * b / kEulerMaclaurin[j];
    k += 1.0;
    factor *= x + k;
    b /= w;
    k += 1.0;
  }
  return x != x || q != q ? x + q : s;
}

/* The regularized incomplete gamma functions P(a, x) (upper = 0) and
 * Q(a, x) = 1 - P (upper = 1): x^a e^-x / Gamma(a) times the series
 * sum x^n / (a (a+1) ... (a+n)) below x = a + 1, times Lentz's continued
 * fraction above (Numerical Recipes' gser and gcf); each runs to
 * convergence, the two loops here whose trip counts depend on the data.
 * Boundary values as eager's (after SciPy): NaN for a or x < 0; at a = 0,
 * P = 1 for x > 0 (else NaN); at x = 0, P = 0; P = 0 at a = inf (NaN if x
 * is inf too), P = 1 at x = inf. */
static inline double kiln_special_incomplete_gamma(double a, double x, int upper) {
  const double prefactor = kiln_special_exp(a * kiln_special_log(x) - x - kiln_special_lgamma(a));
  double lower, upper_value;
  if (x < a + 1.0) {
    double term = 1.0 / a, sum = term, denominator = a;
    for (int n = 0; n < 1000000 && term > sum * 1e-17; ++n) {
      denominator += 1.0;
      term *= x / denominator;
      sum += term;
    }
    lower = sum * prefactor;
    upper_value = 1.0 - lower;
  } else {
    const double tiny = 1e-300;
    double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, fraction = d, change = 0.0;
    for (int i = 1; i < 1000000 && __builtin_fabs(change - 1.0) > 1e-16; ++i) {
      const double numerator = -i * (i - a);
      b += 2.0;
      d = numerator * d + b;
      d = __builtin_fabs(d) < tiny ? tiny : d;
      c = b + numerator / c;
      c = __builtin_fabs(c) < tiny ? tiny : c;
      d = 1.0 / d;
      change = d * c;
      fraction *= change;
    }
    upper_value = prefactor * fraction;
    lower = 1.0 - upper_value;
  }
  return upper ? upper_value : lower;
}

static inline double kiln_special_incomplete_gamma_edges(double a, double x, int upper) {
  const double one = upper ? 0.0 : 1.0, zero = upper ? 1.0 : 0.0;
  /* In eager's order: a NaN passes every test but x == 0's. */
  if (x < 0.0 || a < 0.0) return __builtin_nan("");
  if (a == 0.0) return x > 0.0 ? one : __builtin_nan("");
  if (x == 0.0) return zero;
  if (a == __builtin_inf()) return x == __builtin_inf() ? __builtin_nan("") : zero;
  if (x == __builtin_inf()) return one;
  return kiln_special_incomplete_gamma(a, x, upper);
}

static inline double kiln_special_igamma(double a, double x) {
  return kiln_special_incomplete_gamma_edges(a, x, 0);
}

static inline double kiln_special_igammac(double a, double x) {
  return kiln_special_incomplete_gamma_edges(a, x, 1);
}

/* sum c[k] T_k(u) for u in [-1, 1] (Clenshaw's recurrence). */
static inline double kiln_special_chebyshev_sum(double u, const double* c, int count) {
  double b1 = 0.0, b2 = 0.0;
  KILN_SPECIAL_UNROLL for (int k = count - 1; k >= 1; --k) {
    const double b0 = __builtin_fma(2.0 * u, b1, c[k] - b2);
    b2 = b1;
    b1 = b0;
  }
  return __builtin_fma(u, b1, c[0] - b2);
}

/* erfcx(x) = exp(x^2) erfc(x) for x >= 1/2 (and +inf): with t = 2 / (2 + x)
 * in (0, 4/5], erfcx(x) / t is smooth down to t = 0 (x = inf), and a
 * Chebyshev series in t of 26 terms holds it within 2.5e-16 relative (fitted
 * by codegen/emit/kiln_special_fit.py). */
static inline double kiln_special_erfcx_large(double x) {
  static const double kSeries[26] = {
      0.4869974896593381,     0.24101444861760662,     0.03917158019801934,
      0.0028202013162589696,  -0.0003190025880142985,  -7.762458294633769e-05,
      3.904758903066749e-06,  2.10650100538356e-06,    -1.1719156145292982e-07,
      -6.458612977687303e-08, 6.547928118976531e-09,   2.0176470623078224e-09,
      -3.982401175873017e-10, -4.976143621029052e-11,  2.213944839159895e-11,
      -1.7358623528111e-13,   -1.0262097876304724e-12, 1.4448991184489502e-13,
      3.1589800537884334e-14, -1.242896002532121e-14,  3.029584811636206e-16,
      6.422215650726381e-16,  -1.3294531893466635e-16, -1.2788608649261552e-17,
      1.0545691191061839e-17, -1.5265200756160606e-18};
  const double t = 2.0 / (2.0 + x);
  return t * kiln_special_chebyshev_sum(t * 2.5 - 1.0, kSeries, 26);
}

/* erf(x) for |x| < 1/2: its Taylor series, 2/sqrt(pi) sum (-1)^n x^(2n+1) /
 * (n! (2n + 1)), to n = 14. */
static inline double kiln_special_erf_small(double x) {
  static const double kTaylor[15] = {1.0,
                                     -0.3333333333333333,
                                     0.1,
                                     -0.023809523809523808,
                                     0.004629629629629629,
                                     -0.0007575757575757576,
                                     0.00010683760683760684,
                                     -1.3227513227513228e-05,
                                     1.4589169000933706e-06,
                                     -1.4503852223150468e-07,
                                     1.3122532963802806e-08,
                                     -1.0892221037148573e-09,
                                     8.35070279514724e-11,
                                     -5.9477940136376354e-12,
                                     3.9554295164585257e-13};
  const double z = x * x;
  double p = kTaylor[14];
  KILN_SPECIAL_UNROLL for (int n = 13; n >= 0; --n) p = __builtin_fma(p, z, kTaylor[n]);
  return 1.12837916709551257390 * x * p;
}

/* exp(-x^2) and exp(x^2) with x^2 = high + low split exactly (an FMA), so
 * that the rounding of x^2 does not cost digits when x is large. */
static inline double kiln_special_exp_square(double x, double sign) {
  const double high = x * x;
  const double low = __builtin_fma(x, x, -high);
  const double scaled = kiln_special_exp(sign * high) * (1.0 + sign * low);
  return high > 1e300 ? kiln_special_exp(sign * high) : scaled;
}

/* erfc, erf and erfcx: the Taylor series of erf below |x| = 1/2, else
 * erfcx's Chebyshev series, with erfc(-x) = 2 - erfc(x). */
static inline double kiln_special_erfc(double x) {
  const double a = __builtin_fabs(x);
  const double tail =
      kiln_special_exp_square(a, -1.0) * kiln_special_erfcx_large(a < 0.5 ? 0.5 : a);
  double result = x < 0.0 ? 2.0 - tail : tail;
  result = a < 0.5 ? 1.0 - kiln_special_erf_small(x) : result;
  return kiln_special_select_nan(x, result);
}

static inline double kiln_special_erf(double x) {
  const double a = __builtin_fabs(x);
  const double tail =
      1.0 - kiln_special_exp_square(a, -1.0) * kiln_special_erfcx_large(a < 0.5 ? 0.5 : a);
  double result = x < 0.0 ? -tail : tail;
  result = a < 0.5 ? kiln_special_erf_small(x) : result;
  return kiln_special_select_nan(x, result);
}

/* erfcx(x) = exp(x^2) erfc(x): 2 exp(x^2) - erfcx(-x) below -1/2 (+inf
 * below -26.6, where exp(x^2) overflows), 0 at +inf. */
static inline double kiln_special_erfcx(double x) {
  const double a = __builtin_fabs(x);
  const double large = kiln_special_erfcx_large(a < 0.5 ? 0.5 : a);
  const double e = kiln_special_exp_square(a < 27.0 ? x : 27.0, 1.0);
  double result = x < 0.0 ? 2.0 * e - large : large;
  result = x < -26.7 ? __builtin_inf() : result;
  result = a < 0.5 ? e * (1.0 - kiln_special_erf_small(x)) : result;
  return kiln_special_select_nan(x, result);
}

/* erfinv: eager's rational first guess, then three Newton steps (eager
 * takes two, which leave 1e-12 in the far tails); the residual
 * erf(x) - y is taken as (1 - |y|) - erfc(|x|) past |y| = 1/2, where
 * 1 - |y| is exact. +-inf at +-1, NaN beyond. */
static inline double kiln_special_erfinv(double y) {
  const double a = __builtin_fabs(y);
  const double z = y * y;
  const double central =
      y * (((-0.140543331 * z + 0.914624893) * z - 1.645349621) * z + 0.886226899) /
      ((((0.012229801 * z - 0.329097515) * z + 1.442710462) * z - 2.118377725) * z + 1.0);
  const double w = __builtin_sqrt(-kiln_special_log((1.0 - a) / 2.0));
  const double tail_abs = (((1.641345311 * w + 3.429567803) * w - 1.624906493) * w - 1.970840454) /
                          ((1.637067800 * w + 3.543889200) * w + 1.0);
  double x = a <= 0.7 ? central : (y < 0.0 ? -tail_abs : tail_abs);
  KILN_SPECIAL_UNROLL for (int step = 0; step < 3; ++step) {
    const double xa = __builtin_fabs(x);
    const double tail_residual = (1.0 - a) - kiln_special_erfc(xa);
    const double residual =
        a > 0.5 ? (y < 0.0 ? -tail_residual : tail_residual) : kiln_special_erf(x) - y;
    x -= residual / (1.12837916709551257390 * kiln_special_exp_square(x, -1.0));
  }
  double result = a > 1.0 ? __builtin_nan("") : x;
  result = a == 1.0 ? (y < 0.0 ? -__builtin_inf() : __builtin_inf()) : result;
  return kiln_special_select_nan(y, result);
}

/* The normal quantile (Cephes ndtri): a rational function of p - 1/2 in the
 * middle, of 1/sqrt(-2 log p) in the tails; -inf at 0, inf at 1, NaN
 * outside [0, 1]. */
static inline double kiln_special_ndtri(double p) {
  static const double kP0[5] = {-5.99633501014107895267E1, 9.80010754185999661536E1,
                                -5.66762857469070293439E1, 1.39312609387279679503E1,
                                -1.23916583867381258016E0};
  static const double kQ0[9] = {1.0,
                                1.95448858338141759834E0,
                                4.67627912898881538453E0,
                                8.63602421390890590575E1,
                                -2.25462687854119370527E2,
                                2.00260212380060660359E2,
                                -8.20372256168333339912E1,
                                1.59056225126211695515E1,
                                -1.18331621121330003142E0};
  static const double kP1[9] = {
      4.05544892305962419923E0,   3.15251094599893866154E1,   5.71628192246421288162E1,
      4.40805073893200834700E1,   1.46849561928858024014E1,   2.18663306850790267539E0,
      -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4};
  static const double kQ1[9] = {1.0,
                                1.57799883256466749731E1,
                                4.53907635128879210584E1,
                                4.13172038254672030440E1,
                                1.50425385692907503408E1,
                                2.50464946208309415979E0,
                                -1.42182922854787788574E-1,
                                -3.80806407691578277194E-2,
                                -9.33259480895457427372E-4};
  static const double kP2[9] = {
      3.23774891776946035970E0,  6.91522889068984211695E0,  3.93881025292474443415E0,
      1.33303460815807542389E0,  2.01485389549179081538E-1, 1.23716634817820021358E-2,
      3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9};
  static const double kQ2[9] = {1.0,
                                6.02427039364742014255E0,
                                3.67983563856160859403E0,
                                1.37702099489081330271E0,
                                2.16236993594496635890E-1,
                                1.34204006088543189037E-2,
                                3.28014464682127739104E-4,
                                2.89247864745380683936E-6,
                                6.79019408009981274425E-9};
  const double kExpMinus2 = 0.13533528323661269189;
  const int upper = p > 1.0 - kExpMinus2;
  const double y = upper ? 1.0 - p : p;
  const double centered = y - 0.5;
  const double y2 = centered * centered;
  const double middle = (centered + centered * (y2 * kiln_special_polevl(y2, kP0, 5) /
                                                kiln_special_polevl(y2, kQ0, 9))) *
                        2.50662827463100050242;
  const double t = __builtin_sqrt(-2.0 * kiln_special_log(y));
  const double z = 1.0 / t;
  const double tail1 = z * kiln_special_polevl(z, kP1, 9) / kiln_special_polevl(z, kQ1, 9);
  const double tail2 = z * kiln_special_polevl(z, kP2, 9) / kiln_special_polevl(z, kQ2, 9);
  const double tail = (t - kiln_special_log(t) / t) - (t < 8.0 ? tail1 : tail2);
  double result = y > kExpMinus2 ? middle : (upper ? tail : -tail);
  result = p < 0.0 || p > 1.0 ? __builtin_nan("") : result;
  result = p == 0.0 ? -__builtin_inf() : result;
  result = p == 1.0 ? __builtin_inf() : result;
  return kiln_special_select_nan(p, result);
}

#endif /* KILN_SPECIAL_H_ */
