/* The orthogonal polynomials for generated sources: Chebyshev T, U, V, W
 * and their shifted forms, Hermite H and He, Laguerre L, Legendre P, each
 * of a degree n given as a float (truncated, as eager). Pasted after
 * kiln_special.h (its sin, cos and acos). They follow eager's
 * *_polynomial_*_forward kernels: the values at +-1, a trigonometric form
 * for |x| < 1 and high degrees, else the three-term recurrence, whose loop
 * over n is the one loop here that clang cannot vectorize. Changing any
 * result here changes generated code: bump kCodegenVersion. */
#ifndef KILN_POLYNOMIALS_H_
#define KILN_POLYNOMIALS_H_

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

#endif /* KILN_POLYNOMIALS_H_ */
