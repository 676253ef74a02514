"""Fits kiln_special.h's erfcx series and prints it.

erfcx(x) = exp(x^2) erfc(x) for x >= 1/2 is t h(t) with t = 2 / (2 + x) in
(0, 4/5]; h is smooth down to t = 0 (x = inf, where h = 1 / (2 sqrt(pi))).
This interpolates h at Chebyshev nodes in 50-digit arithmetic (mpmath) and
prints the coefficients of sum c[k] T_k(u), u = 2.5 t - 1, with the largest
relative error of the series evaluated in double over a dense grid.

Run: .venv/bin/python codegen/emit/kiln_special_fit.py [terms]
"""
import sys

import mpmath

mpmath.mp.dps = 50
T_MAX = mpmath.mpf(4) / 5


def h(u):
    t = (u + 1) * T_MAX / 2
    if t == 0:
        return 1 / (2 * mpmath.sqrt(mpmath.pi))
    x = 2 / t - 2
    return mpmath.erfc(x) * mpmath.exp(x * x) / t


def chebyshev_coefficients(f, terms):
    angles = [mpmath.pi * (j + mpmath.mpf(1) / 2) / terms for j in range(terms)]
    values = [f(mpmath.cos(a)) for a in angles]
    coefficients = [2 * sum(v * mpmath.cos(k * a) for v, a in zip(values, angles)) / terms
                    for k in range(terms)]
    coefficients[0] /= 2
    return coefficients


def clenshaw(u, coefficients):
    b1 = b2 = 0.0
    for c in reversed(coefficients[1:]):
        b1, b2 = 2 * u * b1 - b2 + c, b1
    return u * b1 - b2 + coefficients[0]


def main():
    terms = int(sys.argv[1]) if len(sys.argv) > 1 else 26
    coefficients = [float(c) for c in chebyshev_coefficients(h, terms)]
    grid = [-1 + 2 * i / 4000 for i in range(4001)]
    worst = max(abs(clenshaw(u, coefficients) / h(mpmath.mpf(u)) - 1) for u in grid)
    print(",\n".join(repr(c) for c in coefficients))
    print(f"largest relative error: {float(worst):.3g}", file=sys.stderr)


if __name__ == "__main__":
    main()
