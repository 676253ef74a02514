"""The special functions (codegen/ops/special.cc) in float32 and float64:
each over a sweep of its domain with its edges, poles, zeros and the
exceptional values, against eager at tolerances that hold between two
accurate algorithms (Kiln computes in double; eager's float32 kernels in
float, which costs them a few ulp of float)."""
import torch

import math

from cases_common import CLOSE, Case, claimed, generator, unary

A = torch.ops.aten
S = torch.special

# op -> (fn, extra values: the function's poles, zeros and domain edges).
UNARY = {
    "aten.lgamma.default": (torch.lgamma, [-1.0, -2.0, -0.5, 1.0, 2.0, 1e-30, 171.0, 1e30]),
    "aten.digamma.default": (torch.digamma, [-3.0, -0.5, 1.4616321449683623, 1e-30, 1e17]),
    "aten.erfc.default": (torch.erfc, [0.49, 0.51, -0.51, 9.0, 26.5, 27.0, -6.0]),
    "aten.special_erfcx.default": (S.erfcx, [0.49, 0.51, -0.51, -26.0, -27.0, 30.0, 1e8]),
    "aten.erfinv.default": (torch.erfinv, [0.69, 0.71, -0.71, 0.999999, -1.0 + 1e-7, 1.5]),
    "aten.i0.default": (torch.i0, [7.99, 8.01, -8.01, 700.0, 720.0]),
    "aten.special_i0e.default": (S.i0e, [7.99, 8.01, -8.01, 1e5]),
    "aten.special_i1.default": (S.i1, [7.99, 8.01, -8.01, 700.0, 720.0]),
    "aten.special_i1e.default": (S.i1e, [7.99, 8.01, -8.01, 1e5]),
    "aten.special_modified_bessel_i0.default": (S.modified_bessel_i0, [7.99, 8.01, 700.0]),
    "aten.special_modified_bessel_i1.default": (S.modified_bessel_i1, [7.99, 8.01, -700.0]),
    "aten.special_modified_bessel_k0.default": (S.modified_bessel_k0, [1.99, 2.01, 700.0]),
    "aten.special_modified_bessel_k1.default": (S.modified_bessel_k1, [1.99, 2.01, 700.0]),
    "aten.special_scaled_modified_bessel_k0.default": (S.scaled_modified_bessel_k0,
                                                       [1.99, 2.01, 1e5]),
    "aten.special_scaled_modified_bessel_k1.default": (S.scaled_modified_bessel_k1,
                                                       [1.99, 2.01, 1e5]),
    "aten.special_bessel_j0.default": (S.bessel_j0, [2.404825557695773, 4.99, 5.01, 1e-6]),
    "aten.special_bessel_j1.default": (S.bessel_j1, [3.8317059702075125, 4.99, 5.01, -5.01]),
    "aten.special_bessel_y0.default": (S.bessel_y0, [0.8935769662791675, 4.99, 5.01]),
    "aten.special_bessel_y1.default": (S.bessel_y1, [2.197141326031017, 4.99, 5.01]),
    "aten.special_spherical_bessel_j0.default": (S.spherical_bessel_j0, [0.49, 0.51, 3.14159]),
    "aten.special_airy_ai.default": (S.airy_ai, [-2.1, -2.08, 2.08, 2.1, 8.3, 8.4, 103.0, 104.0]),
    "aten.special_ndtri.default": (S.ndtri, [0.5, 0.135, 0.136, 0.864, 0.866, 1e-14, 1e-300,
                                             1.0 - 1e-7]),
}

# Values of the functions with a second argument: x (or a) over a moderate
# range with its edges, the second operand as given.
POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
               "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p"]
DEGREES = [-1.0, 0.0, 1.0, 2.0, 3.0, 3.7, 5.0, 6.0, 7.0, 8.0, 9.0, 12.0]


def sweep(dtype, g, extra=()):
    """Exceptional values, both signs of a log-spaced range from 1e-30 to
    1e4 (beyond 2^40, Kiln's sin and cos reduction, and so the oscillating
    functions, part from eager's: docs/OPS.md), random values at several
    scales, and `extra`."""
    spaced = torch.logspace(-30, 4, 60, dtype=torch.float64)
    parts = [torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -2.5, 3.0],
                          dtype=torch.float64), spaced, -spaced,
             torch.randn(64, generator=g, dtype=torch.float64),
             torch.randn(64, generator=g, dtype=torch.float64) * 10,
             torch.rand(64, generator=g, dtype=torch.float64) * 200 - 100,
             torch.tensor(list(extra), dtype=torch.float64)]
    return torch.cat(parts).to(dtype)


def tolerance(dtype):
    return (2e-5, 1e-6) if dtype == torch.float32 else (1e-10, 1e-13)


# Where eager is less accurate than these tolerances: its ports of Cephes'
# J0, J1, Y0, Y1 and Airy Ai drop the implicit leading 1 of Cephes' monic
# denominators (p1evl), up to 5e-5 relative from libstdc++'s and mpmath's
# values, which Kiln's match (//codegen:kiln_special_test); its float32 Airy
# Ai rounds the phase 2/3 |x|^1.5 to float for x << 0, and its float32
# trigamma rounds sin(pi x) to float near the poles.
LOOSER = {
    ("aten.special_bessel_j0.default", torch.float64): (1e-4, 1e-6),
    ("aten.special_bessel_j1.default", torch.float64): (1e-4, 1e-6),
    ("aten.special_bessel_y0.default", torch.float64): (1e-4, 1e-6),
    ("aten.special_bessel_y1.default", torch.float64): (1e-4, 1e-6),
    ("aten.special_bessel_j1.default", torch.float32): (1e-4, 1e-5),
    ("aten.special_bessel_y0.default", torch.float32): (1e-4, 1e-5),
    ("aten.special_airy_ai.default", torch.float64): (1e-4, 1e-5),
    ("aten.special_airy_ai.default", torch.float32): (1e-1, 5e-3),
    ("aten.polygamma.default/n1", torch.float32): (2e-3, 1e-5),
}
# float32 arguments past which eager's float exp overflows where the result
# does not (I0 and I1 of 88.8 to 91.9): left out of the float32 sweeps.
OVERFLOWS_IN_FLOAT = {"aten.i0.default", "aten.special_i1.default",
                      "aten.special_modified_bessel_i0.default",
                      "aten.special_modified_bessel_i1.default"}


def cases(claims):
    for op, (fn, extra) in UNARY.items():
        for dtype in claimed(claims, op):
            x = sweep(dtype, generator(op, dtype), extra)
            if dtype == torch.float32 and op in OVERFLOWS_IN_FLOAT:
                x = x[~((x.abs() > 80) & x.isfinite())]
            yield Case(op, dtype, "sweep", unary(fn), [x], CLOSE,
                       tolerance=LOOSER.get((op, dtype), tolerance(dtype)))
    for n in (0, 1, 2, 3):
        op = "aten.polygamma.default"
        for dtype in claimed(claims, op):
            # Not the negative integers: trigamma's float32 value there is
            # float64's (docs/OPS.md), eager's float kernel another.
            x = sweep(dtype, generator(op, n, dtype), [-2.5, 0.5, 1.0, 7.5, 1e-3])
            x = x[~((x <= 0) & (x == x.round()))]
            yield Case(op, dtype, f"n{n}", lambda v, n=n: torch.polygamma(n, v), [x], CLOSE,
                       tolerance=LOOSER.get((f"{op}/n{n}", dtype), tolerance(dtype)))
    for op, fn in [("aten.special_zeta.default", S.zeta), ("aten.igamma.default", torch.igamma),
                   ("aten.igammac.default", torch.igammac)]:
        for dtype in claimed(claims, op):
            g = generator(op, dtype)
            a = torch.cat([torch.tensor([1.0, 1.5, 2.0, 3.0, 0.5, 0.0, -1.0, float("inf"),
                                         float("nan"), 10.0], dtype=dtype),
                           (torch.rand(6, generator=g, dtype=torch.float64) * 12).to(dtype)])
            b = torch.cat([torch.tensor([2.0, 0.5, -1.5, -2.0, 3.0, 1.0, 2.0, 1.0, 1.0, 0.0],
                                        dtype=dtype),
                           (torch.rand(6, generator=g, dtype=torch.float64) * 12).to(dtype)])
            yield Case(op, dtype, "pairs", lambda p, q, fn=fn: fn(p, q),
                       [a.reshape(-1, 1), b.reshape(1, -1)], CLOSE, tolerance=tolerance(dtype))
    for name in POLYNOMIALS:
        op = f"aten.special_{name}.default"
        fn = getattr(S, name)
        for dtype in claimed(claims, op):
            g = generator(op, dtype)
            x = torch.cat([torch.tensor([-1.0, 1.0, 0.0, 0.5, -0.3, 0.999, 2.0, -2.5],
                                        dtype=dtype),
                           (torch.rand(8, generator=g, dtype=torch.float64) * 6 - 3).to(dtype)])
            n = torch.tensor(DEGREES, dtype=dtype)
            yield Case(op, dtype, "degrees", lambda p, q, fn=fn: fn(p, q),
                       [x.reshape(-1, 1), n.reshape(1, -1)], CLOSE, tolerance=tolerance(dtype))
            op_scalar = f"aten.special_{name}.n_scalar"
            if dtype in claimed(claims, op_scalar):
                yield Case(op_scalar, dtype, "degree5", lambda p, fn=fn: fn(p, 5), [x], CLOSE,
                           tolerance=tolerance(dtype))
    op = "aten.special_zeta.other_scalar"
    for dtype in claimed(claims, op):
        x = torch.tensor([1.5, 2.0, 3.0, 7.5, 1.0, 0.5], dtype=dtype)
        yield Case(op, dtype, "q2.5", lambda p: S.zeta(p, 2.5), [x], CLOSE,
                   tolerance=tolerance(dtype))
