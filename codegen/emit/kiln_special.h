/* Kiln's special functions (the gamma family, Hurwitz zeta, Bessel
 * functions, the normal quantile and the orthogonal polynomials), pasted
 * into a generated source that calls one (codegen/emit/emit_cpp.cc).
 *
 * Plain C with no includes and no libm calls, like kiln_math.h: every
 * function computes in double (float32 operands are widened and the result
 * rounded once), with its own exp, log, sin, cos and atan below. Branches
 * are selects and coefficient loops have constant trip counts (unrolled),
 * so clang vectorizes loops that call them; the recurrences in n of the
 * orthogonal polynomials and zeta's sum for a negative q are the loops left.
 * Algorithms: Cephes (zeta, digamma, trigamma, i0/i1 and their scaled forms,
 * j0/j1/y0/y1, ndtri), derived from the Cephes Math Library (3-clause BSD,
 * Copyright (c) 2018, Steven Moshier); lgamma from Lanczos's approximation
 * (g = 7, 9 terms). Special values follow eager PyTorch's CPU kernels.
 * Accuracy: kiln_special_test checks each against libstdc++'s special
 * functions or tabulated values, relative 1e-13 or better away from zeros.
 * Changing any result here changes generated code: bump kCodegenVersion. */
#ifndef KILN_SPECIAL_H_
#define KILN_SPECIAL_H_

#define KILN_UNROLL _Pragma("clang loop unroll(full)")

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
  KILN_UNROLL for (int i = 1; i < count; ++i) p = __builtin_fma(p, x, c[i]);
  return p;
}

/* Clenshaw's sum of a Chebyshev series at x (Cephes' chbevl: coefficients
 * highest order first, x already mapped to [-2, 2]). */
static inline double kiln_special_chbevl(double x, const double* c, int count) {
  double b0 = c[0], b1 = 0.0, b2 = 0.0;
  KILN_UNROLL for (int i = 1; i < count; ++i) {
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
  n = __builtin_fabs(x) >= 0x1p+52 ? 0.0 : n;
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
  KILN_UNROLL for (int k = 11; k >= 1; --k) { p = __builtin_fma(p, -z, 1.0 / (2 * k + 1)); }
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
  KILN_UNROLL for (int i = 0; i < 8; ++i) sum += kCoefficients[i] / (y + (double)(i + 1));
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
  KILN_UNROLL for (int i = 0; i < 10; ++i) {
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

/* trigamma: psi'(x) = sum 1/(x + k)^2, six terms of the sum, then the
 * asymptotic series; the reflection pi^2 / sin^2(pi x) below 1/2. */
static inline double kiln_special_trigamma(double x) {
  const int reflect = x < 0.5;
  const double sin_pi_x = kiln_special_sinpi(x);
  double result = reflect ? -(9.86960440108935861883 / (sin_pi_x * sin_pi_x)) : 0.0;
  double y = reflect ? 1.0 - x : x;
  KILN_UNROLL for (int i = 0; i < 6; ++i) {
    result += 1.0 / (y * y);
    y += 1.0;
  }
  const double ixx = 1.0 / (y * y);
  result += (1.0 + 1.0 / (2.0 * y) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / y;
  return reflect ? -result : result;
}

/* a^-x, a negative base taking an integer x's sign. */
static inline double kiln_special_pow_negated(double a, double x) {
  const double magnitude = kiln_special_exp(-x * kiln_special_log(__builtin_fabs(a)));
  const int odd = x - 2.0 * __builtin_rint(0.5 * x) != 0.0;
  return a < 0.0 && odd ? -magnitude : magnitude;
}

/* Hurwitz zeta(x, q) = sum_k (q + k)^-x (Cephes zeta): the sum to k with
 * q + k > 9 and k >= 9, then the Euler-Maclaurin tail with 12 terms. inf at
 * x = 1 and at the poles q = 0, -1, ...; NaN for x < 1, and for q < 0 with a
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
  double s = kiln_special_pow_negated(q, x);
  double a = q, b = 0.0;
  int i = 0;
  while (i < 9 || a <= 9.0) {
    ++i;
    a += 1.0;
    b = kiln_special_pow_negated(a, x);
    s += b;
  }
  const double w = a;
  s += b * w / (x - 1.0);
  s -= 0.5 * b;
  double factor = 1.0, k = 0.0;
  KILN_UNROLL for (int j = 0; j < 12; ++j) {
    factor *= x + k;
    b /= w;
    s += factor * b / kEulerMaclaurin[j];
    k += 1.0;
    factor *= x + k;
    b /= w;
    k += 1.0;
  }
  double result = s;
  result = q <= 0.0 && x != __builtin_floor(x) ? __builtin_nan("") : result;
  result = q <= 0.0 && q == __builtin_floor(q) ? __builtin_inf() : result;
  result = x < 1.0 ? __builtin_nan("") : result;
  result = x == 1.0 ? __builtin_inf() : result;
  return x != x || q != q ? x + q : result;
}

/* I0 and I1 scaled by exp(-|x|) (Cephes i0e, i1e): Chebyshev series on
 * [0, 8] and in 32 / x beyond. */
static inline double kiln_special_i0e(double x) {
  static const double kSmall[30] = {
      -4.41534164647933937950E-18, 3.33079451882223809783E-17,  -2.43127984654795469359E-16,
      1.71539128555513303061E-15,  -1.16853328779934516808E-14, 7.67618549860493561688E-14,
      -4.85644678311192946090E-13, 2.95505266312963983461E-12,  -1.72682629144155570723E-11,
      9.67580903537323691224E-11,  -5.18979560163526290666E-10, 2.65982372468238665035E-9,
      -1.30002500998624804212E-8,  6.04699502254191894932E-8,   -2.67079385394061173391E-7,
      1.11738753912010371815E-6,   -4.41673835845875056359E-6,  1.64484480707288970893E-5,
      -5.75419501008210370398E-5,  1.88502885095841655729E-4,   -5.76375574538582365885E-4,
      1.63947561694133579842E-3,   -4.32430999505057594430E-3,  1.05464603945949983183E-2,
      -2.37374148058994688156E-2,  4.93052842396707084878E-2,   -9.49010970480476444210E-2,
      1.71620901522208775349E-1,   -3.04682672343198398683E-1,  6.76795274409476084995E-1};
  static const double kLarge[25] = {
      -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
      3.46122286769746109310E-17,  -2.82762398051658348494E-16, -3.42548561967721913462E-16,
      1.77256013305652638360E-15,  3.81168066935262242075E-15,  -9.55484669882830764870E-15,
      -4.15056934728722208663E-14, 1.54008621752140982691E-14,  3.85277838274214270114E-13,
      7.18012445138366623367E-13,  -1.79417853150680611778E-12, -1.32158118404477131188E-11,
      -3.14991652796324136454E-11, 1.18891471078464383424E-11,  4.94060238822496958910E-10,
      3.39623202570838634515E-9,   2.26666899049817806459E-8,   2.04891858946906374183E-7,
      2.89137052083475648297E-6,   6.88975834691682398426E-5,   3.36911647825569408990E-3,
      8.04490411014108831608E-1};
  const double a = __builtin_fabs(x);
  const double small = kiln_special_chbevl(0.5 * a - 2.0, kSmall, 30);
  const double large = kiln_special_chbevl(32.0 / a - 2.0, kLarge, 25) / __builtin_sqrt(a);
  return kiln_special_select_nan(x, a <= 8.0 ? small : large);
}

static inline double kiln_special_i1e(double x) {
  static const double kSmall[29] = {
      2.77791411276104639959E-18,  -2.11142121435816608115E-17, 1.55363195773620046921E-16,
      -1.10559694773538630805E-15, 7.60068429473540693410E-15,  -5.04218550472791168711E-14,
      3.22379336594557470981E-13,  -1.98397439776494371520E-12, 1.17361862988909016308E-11,
      -6.66348972350202774223E-11, 3.62559028155211703701E-10,  -1.88724975172282928790E-9,
      9.38153738649577178388E-9,   -4.44505912879632808065E-8,  2.00329475355213526229E-7,
      -8.56872026469545474066E-7,  3.47025130813767847674E-6,   -1.32731636560394358279E-5,
      4.78156510755005422638E-5,   -1.61760815825896745588E-4,  5.12285956168575772895E-4,
      -1.51357245063125314899E-3,  4.15642294431288815669E-3,   -1.05640848946261981558E-2,
      2.47264490306265168283E-2,   -5.29459812080949914269E-2,  1.02643658689847095384E-1,
      -1.76416518357834055153E-1,  2.52587186443633654823E-1};
  static const double kLarge[25] = {
      7.51729631084210481353E-18,  4.41434832307170791151E-18,  -4.65030536848935832153E-17,
      -3.20952592199342395980E-17, 2.96262899764595013876E-16,  3.30820231092092828324E-16,
      -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
      4.27244001671195135429E-14,  -2.10154184277266431302E-14, -4.08355111109219731823E-13,
      -7.19855177624590851209E-13, 2.03562854414708950722E-12,  1.41258074366137813316E-11,
      3.25260358301548823856E-11,  -1.89749581235054123450E-11, -5.58974346219658380687E-10,
      -3.83538038596423702205E-9,  -2.63146884688951950684E-8,  -2.51223623787020892529E-7,
      -3.88256480887769039346E-6,  -1.10588938762623716291E-4,  -9.76109749136146840777E-3,
      7.78576235018280120474E-1};
  const double a = __builtin_fabs(x);
  const double small = kiln_special_chbevl(0.5 * a - 2.0, kSmall, 29) * a;
  const double large = kiln_special_chbevl(32.0 / a - 2.0, kLarge, 25) / __builtin_sqrt(a);
  const double result = a <= 8.0 ? small : large;
  return kiln_special_select_nan(x, x < 0.0 ? -result : result);
}

/* I0 and I1 = exp(|x|) times the scaled forms; +inf past |x| = 713. */
static inline double kiln_special_i0(double x) {
  return kiln_special_i0e(x) * kiln_special_exp(__builtin_fabs(x));
}

static inline double kiln_special_i1(double x) {
  return kiln_special_i1e(x) * kiln_special_exp(__builtin_fabs(x));
}

/* The Hankel asymptotic form of J and Y past 5 (Cephes j0, j1, y0, y1):
 * sqrt(2 / (pi x)) (P cos(x - phase) -+ 5 / x Q sin(x - phase)), P and Q
 * rational in 25 / x^2. `order` is 0 or 1, `second_kind` picks Y. */
static inline double kiln_special_bessel_asymptotic(double x, int order, int second_kind) {
  static const double kPP[2][7] = {
      {7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
       5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
       9.99999999999999997821e-01},
      {7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
       5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
       1.00000000000000000254e+00}};
  static const double kPQ[2][7] = {
      {9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
       5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
       1.00000000000000000218e+00},
      {5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
       5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
       9.99999999999999997461e-01}};
  static const double kQP[2][8] = {
      {-1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
       -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
       -5.14105326766599330220e+01, -6.05014350600728481186e+00},
      {5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
       3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
       2.11688757100572135698e+02, 2.52070205858023719784e+01}};
  static const double kQQ[2][8] = {
      {1.0, 6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
       7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
       2.42005740240291393179e+02},
      {1.0, 7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
       9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
       3.36093607810698293419e+02}};
  const double w = 5.0 / x;
  const double z = w * w;
  const double p = kiln_special_polevl(z, kPP[order], 7) / kiln_special_polevl(z, kPQ[order], 7);
  const double q = kiln_special_polevl(z, kQP[order], 8) / kiln_special_polevl(z, kQQ[order], 8);
  const double phase = x - (order ? 2.35619449019234492885 : 0.78539816339744830962);
  const double s = kiln_special_sin(phase), c = kiln_special_cos(phase);
  const double value = second_kind ? p * s + w * q * c : p * c - w * q * s;
  return value * 0.79788456080286535588 / __builtin_sqrt(x);
}

static inline double kiln_special_bessel_j0(double x) {
  static const double kRP[4] = {-4.79443220978201773821e+09, 1.95617491946556577543e+12,
                                -2.49248344360967716204e+14, 9.70862251047306323952e+15};
  static const double kRQ[9] = {1.0,
                                4.99563147152651017219e+02,
                                1.73785401676374683123e+05,
                                4.84409658339962045305e+07,
                                1.11855537045356834862e+10,
                                2.11277520115489217587e+12,
                                3.10518229857422583814e+14,
                                3.18121955943204943306e+16,
                                1.71086294081043136091e+18};
  const double a = __builtin_fabs(x);
  const double z = a * a;
  const double small = (z - 5.78318596294678452118e+00) * (z - 3.04712623436620863991e+01) *
                       kiln_special_polevl(z, kRP, 4) / kiln_special_polevl(z, kRQ, 9);
  const double tiny = 1.0 - z / 4.0;
  const double large = kiln_special_bessel_asymptotic(a > 5.0 ? a : 5.0, 0, 0);
  const double result = a <= 5.0 ? (a < 1e-5 ? tiny : small) : large;
  return kiln_special_select_nan(x, result);
}

static inline double kiln_special_bessel_j1(double x) {
  static const double kRP[4] = {-8.99971225705559398224e+08, 4.52228297998194034323e+11,
                                -7.27494245221818276015e+13, 3.68295732863852883286e+15};
  static const double kRQ[9] = {1.0,
                                6.20836478118054335476e+02,
                                2.56987256757748830383e+05,
                                8.35146791431949253037e+07,
                                2.21511595479792499675e+10,
                                4.74914122079991414898e+12,
                                7.84369607876235854894e+14,
                                8.95222336184627338078e+16,
                                5.32278620332680085395e+18};
  const double a = __builtin_fabs(x);
  const double z = a * a;
  const double small = kiln_special_polevl(z, kRP, 4) / kiln_special_polevl(z, kRQ, 9) * a *
                       (z - 1.46819706421238932572e+01) * (z - 4.92184563216946036703e+01);
  const double large = kiln_special_bessel_asymptotic(a > 5.0 ? a : 5.0, 1, 0);
  const double result = a <= 5.0 ? small : large;
  return kiln_special_select_nan(x, x < 0.0 ? -result : result);
}

/* Y0 and Y1: -inf at 0, NaN below. */
static inline double kiln_special_bessel_y0(double x) {
  static const double kYP[8] = {1.55924367855235737965e+04, -1.46639295903971606143e+07,
                                5.43526477051876500413e+09, -9.82136065717911466409e+11,
                                8.75906394395366999549e+13, -3.46628303384729719441e+15,
                                4.42733268572569800351e+16, -1.84950800436986690637e+16};
  static const double kYQ[8] = {1.0,
                                1.04128353664259848412e+03,
                                6.26107330137134956842e+05,
                                2.68919633393814121987e+08,
                                8.64002487103935000337e+10,
                                2.02979612750105546709e+13,
                                3.17157752842975028269e+15,
                                2.50596256172653059228e+17};
  const double z = x * x;
  const double small = kiln_special_polevl(z, kYP, 8) / kiln_special_polevl(z, kYQ, 8) +
                       0.63661977236758134308 * kiln_special_log(x) * kiln_special_bessel_j0(x);
  const double large = kiln_special_bessel_asymptotic(x > 5.0 ? x : 5.0, 0, 1);
  double result = x <= 5.0 ? small : large;
  result = x < 0.0 ? __builtin_nan("") : result;
  result = x == 0.0 ? -__builtin_inf() : result;
  return kiln_special_select_nan(x, result);
}

static inline double kiln_special_bessel_y1(double x) {
  static const double kYP[6] = {1.26320474790178026440e+09, -6.47355876379160291031e+11,
                                1.14509511541823727583e+14, -8.12770255501325109621e+15,
                                2.02439475713594898196e+17, -7.78877196265950026825e+17};
  static const double kYQ[9] = {1.0,
                                5.94301592346128195359e+02,
                                2.35564092943068577943e+05,
                                7.34811944459721705660e+07,
                                1.87601316108706159478e+10,
                                3.88231277496238566008e+12,
                                6.20557727146953693363e+14,
                                6.87141087355300489866e+16,
                                3.97270608116560655612e+18};
  const double z = x * x;
  const double small =
      x * (kiln_special_polevl(z, kYP, 6) / kiln_special_polevl(z, kYQ, 9)) +
      0.63661977236758134308 * (kiln_special_bessel_j1(x) * kiln_special_log(x) - 1.0 / x);
  const double large = kiln_special_bessel_asymptotic(x > 5.0 ? x : 5.0, 1, 1);
  double result = x <= 5.0 ? small : large;
  result = x < 0.0 ? __builtin_nan("") : result;
  result = x == 0.0 ? -__builtin_inf() : result;
  return kiln_special_select_nan(x, result);
}

/* j0(x) = sin(x) / x, by its series below 1/2; 0 at +-inf. */
static inline double kiln_special_spherical_bessel_j0(double x) {
  const double z = x * x;
  const double series =
      1.0 -
      z / 6.0 *
          (1.0 -
           z / 20.0 * (1.0 - z / 42.0 * (1.0 - z / 72.0 * (1.0 - z / 110.0 * (1.0 - z / 156.0)))));
  double result = __builtin_fabs(x) < 0.5 ? series : kiln_special_sin(x) / x;
  result = __builtin_fabs(x) == __builtin_inf() ? 0.0 : result;
  return kiln_special_select_nan(x, result);
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

/* The polynomials' degree as eager converts it: truncated; NaN, infinities
 * and values past int64 give -1 (the polynomial is then 0). */
static inline long long kiln_special_degree(double n) {
  return n != n || __builtin_fabs(n) >= 0x1p+62 ? -1 : (long long)n;
}

/* The Chebyshev recurrence r = 2x q - p from (p, q) = (1, first) for the
 * degrees 2..n, stopping at a NaN as eager does. */
static inline double kiln_special_chebyshev_recurrence(double x, long long n, double first) {
  double p = 1.0, q = first;
  for (long long k = 2; k <= n && q == q; ++k) {
    const double r = (x + x) * q - p;
    p = q;
    q = r;
  }
  return q;
}

/* Chebyshev T, U, V, W of degree n (eager's chebyshev_polynomial_*_forward):
 * their values at +-1, cos/sin forms for |x| < 1 and high degrees, else the
 * recurrence. */
static inline double kiln_special_chebyshev_polynomial_t(double x, double degree) {
  const long long n = kiln_special_degree(degree);
  if (n < 0) return 0.0;
  if (__builtin_fabs(x) == 1.0) return x > 0.0 || n % 2 == 0 ? 1.0 : -1.0;
  if (n > 6 && __builtin_fabs(x) < 1.0) return kiln_special_cos((double)n * kiln_special_acos(x));
  if (n == 0) return 1.0;
  return kiln_special_chebyshev_recurrence(x, n, x);
}

static inline double kiln_special_chebyshev_polynomial_u(double x, double degree) {
  const long long n = kiln_special_degree(degree);
  if (n < 0) return 0.0;
  if (__builtin_fabs(x) == 1.0) return x > 0.0 || n % 2 == 0 ? (double)(n + 1) : -(double)(n + 1);
  if (n > 8 && __builtin_fabs(x) < 1.0) {
    const double theta = kiln_special_acos(x);
    const double sin_theta = kiln_special_sin(theta);
    if (sin_theta != 0.0) return kiln_special_sin((double)(n + 1) * theta) / sin_theta;
    return (double)(n + 1) * kiln_special_cos((double)(n + 1) * theta) / x;
  }
  if (n == 0) return 1.0;
  return kiln_special_chebyshev_recurrence(x, n, x + x);
}

static inline double kiln_special_chebyshev_polynomial_v(double x, double degree) {
  const long long n = kiln_special_degree(degree);
  if (n < 0) return 0.0;
  const double odd_value = n % 2 == 0 ? (double)(n + n + 1) : -(double)(n + n + 1);
  if (__builtin_fabs(x) == 1.0) return x > 0.0 ? 1.0 : odd_value;
  if (n > 8 && __builtin_fabs(x) < 1.0) {
    const double theta = kiln_special_acos(x);
    if (kiln_special_sin(theta / 2.0) != 1.0) {
      return kiln_special_cos(((double)n + 0.5) * theta) / kiln_special_cos(theta / 2.0);
    }
    return odd_value;
  }
  if (n == 0) return 1.0;
  return kiln_special_chebyshev_recurrence(x, n, x + x - 1.0);
}

static inline double kiln_special_chebyshev_polynomial_w(double x, double degree) {
  const long long n = kiln_special_degree(degree);
  if (n < 0) return 0.0;
  const double at_minus_one = n % 2 == 0 ? 1.0 : -1.0;
  if (__builtin_fabs(x) == 1.0) return x > 0.0 ? (double)(n + n + 1) : at_minus_one;
  if (n > 8 && __builtin_fabs(x) < 1.0) {
    const double theta = kiln_special_acos(x);
    if (kiln_special_cos(theta / 2.0) != 1.0) {
      return kiln_special_sin(((double)n + 0.5) * theta) / kiln_special_sin(theta / 2.0);
    }
    return x > 0.0 ? (double)(n + n + 1) : at_minus_one;
  }
  if (n == 0) return 1.0;
  return kiln_special_chebyshev_recurrence(x, n, x + x + 1.0);
}

/* The shifted Chebyshev polynomials: T*(x) = T(2x - 1), and so on. */
static inline double kiln_special_shifted_chebyshev_polynomial_t(double x, double n) {
  return kiln_special_chebyshev_polynomial_t(x + x - 1.0, n);
}
static inline double kiln_special_shifted_chebyshev_polynomial_u(double x, double n) {
  return kiln_special_chebyshev_polynomial_u(x + x - 1.0, n);
}
static inline double kiln_special_shifted_chebyshev_polynomial_v(double x, double n) {
  return kiln_special_chebyshev_polynomial_v(x + x - 1.0, n);
}
static inline double kiln_special_shifted_chebyshev_polynomial_w(double x, double n) {
  return kiln_special_chebyshev_polynomial_w(x + x - 1.0, n);
}

/* Hermite H (physicists') and He (probabilists'): NaN past `limit` (eager's:
 * 128 for float32, 512 for float64). */
static inline double kiln_special_hermite_polynomial_h(double x, double degree, long long limit) {
  const long long n = kiln_special_degree(degree);
  if (n < 0) return 0.0;
  if (n == 0) return 1.0;
  if (n == 1) return x + x;
  if (n > limit) return __builtin_nan("");
  double p = 1.0, q = x + x, r = 0.0;
  for (long long k = 2; k < n + n; k += 2) {
    r = (x + x) * q - (double)k * p;
    p = q;
    q = r;
  }
  return r;
}

static inline double kiln_special_hermite_polynomial_he(double x, double degree, long long limit) {
  const long long n = kiln_special_degree(degree);
  if (n < 0) return 0.0;
  if (n == 0) return 1.0;
  if (n == 1) return x;
  if (n > limit) return __builtin_nan("");
  double p = 1.0, q = x, r = 0.0;
  for (long long k = 1; k < n; ++k) {
    r = x * q - (double)k * p;
    p = q;
    q = r;
  }
  return r;
}

/* Laguerre L and Legendre P by their three-term recurrences. */
static inline double kiln_special_laguerre_polynomial_l(double x, double degree) {
  const long long n = kiln_special_degree(degree);
  if (n < 0) return 0.0;
  if (x == 0.0 || n == 0) return 1.0;
  double p = 1.0, q = 1.0 - x;
  for (long long k = 1; k < n && q == q; ++k) {
    const double r = (((double)(k + k) + (1.0 - x)) * q - (double)k * p) / (double)(k + 1);
    p = q;
    q = r;
  }
  return q;
}

static inline double kiln_special_legendre_polynomial_p(double x, double degree) {
  const long long n = kiln_special_degree(degree);
  if (n < 0) return 0.0;
  if (__builtin_fabs(x) == 1.0) return x > 0.0 || n % 2 == 0 ? 1.0 : -1.0;
  if (n == 0) return 1.0;
  double p = 1.0, q = x;
  for (long long k = 1; k < n && q == q; ++k) {
    const double r = ((double)(k + k + 1) * x * q - (double)k * p) / (double)(k + 1);
    p = q;
    q = r;
  }
  return q;
}

#undef KILN_UNROLL

#endif /* KILN_SPECIAL_H_ */
