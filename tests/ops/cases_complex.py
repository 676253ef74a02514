"""Complex numbers and FFTs (codegen/ops/complex.cc, fft.cc): the ops only
complex values have, complex arithmetic and functions, conversions, and
torch's three FFT ops over lengths that are not powers of two, one and
several dims, every normalization, strided inputs and batches.

FFT results are sums of n products, so their tolerances are stated for any
order of summation: relative 1e-5 and absolute 1e-4 for complex64 and
float32 (values of size ~n), 1e-10 for complex128 and float64."""
import torch

from cases_common import ERROR, NAMES, Case, claimed, generator, positive, random, with_edges

COMPLEX = (torch.complex64, torch.complex128)
REAL_OF = {torch.complex64: torch.float32, torch.complex128: torch.float64}
COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128}


def fft_tolerance(dtype):
    return (1e-5, 1e-4) if dtype in (torch.complex64, torch.float32) else (1e-10, 1e-10)


def cases(claims):
    yield from complex_only(claims)
    yield from arithmetic()
    yield from ffts(claims)
    yield from refusals()


def refusals():
    """What Kiln refuses on complex values, each naming the node and what
    to do."""
    g = generator("complex_refusals")
    x = random((5,), torch.complex64, g)
    yield Case("aten.cumsum.default", torch.complex64, "no_complex_rule", lambda x: x, [x],
               ERROR, error=("UNIMPLEMENTED", "on complex values is not supported yet"),
               manual=("aten.cumsum.default", [("dim", 0)]))
    yield Case("aten._fft_c2r.default", torch.complex64, "too_few_entries",
               lambda x: torch.zeros(12), [x], ERROR,
               error=("INVALID_ARGUMENT", "needs 7 input entries there, got 5"),
               manual=("aten._fft_c2r.default",
                       [("dim", [0]), ("normalization", 0), ("last_dim_size", 12)]))


def complex_only(claims):
    for dtype in claimed(claims, "aten.view_as_real.default"):
        g = generator("view_as_real", NAMES[dtype])
        x = random((3, 5), dtype, g)
        yield Case("aten.view_as_real.default", dtype, "plain", torch.view_as_real, [x])
        yield Case("aten.view_as_real.default", dtype, "parts_of_transpose",
                   lambda x: x.t().real * 2 + x.t().imag, [x])
    for dtype in claimed(claims, "aten._conj.default"):
        g = generator("conj", NAMES[dtype])
        yield Case("aten._conj.default", dtype, "times_two", lambda x: x.conj() * 2,
                   [random((4, 3), dtype, g)])
    for dtype in claimed(claims, "aten._conj_physical.default"):
        g = generator("conj_physical", NAMES[dtype])
        yield Case("aten._conj_physical.default", dtype, "plain", torch.conj_physical,
                   [random((4, 3), dtype, g)])
    for dtype in claimed(claims, "aten.angle.default"):
        g = generator("angle", NAMES[dtype])
        x = random((4, 3), dtype, g)
        if dtype.is_complex:
            x[0, :] = torch.tensor([1, -1, -1j], dtype=dtype)
            yield Case("aten.angle.default", dtype, "quadrants", torch.angle, [x])
        elif dtype.is_floating_point:  # 0 or pi; NaN stays NaN; -0.0 is not below 0
            yield Case("aten.angle.default", dtype, "edges", torch.angle,
                       [with_edges((4, 5), dtype, g)])
        else:
            yield Case("aten.angle.default", dtype, "signs", torch.angle, [x])
    for dtype in claimed(claims, "aten.view_as_complex.default"):
        g = generator("view_as_complex", NAMES[dtype])
        yield Case("aten.view_as_complex.default", dtype, "product",
                   lambda a, b: torch.view_as_complex(a) * torch.view_as_complex(b),
                   [random((3, 4, 2), dtype, g), random((3, 4, 2), dtype, g)])
    for dtype in claimed(claims, "aten.complex.default"):
        g = generator("complex", NAMES[dtype])
        yield Case("aten.complex.default", dtype, "broadcast", torch.complex,
                   [random((3, 1), dtype, g), random((4,), dtype, g)])
    for dtype in claimed(claims, "aten.polar.default"):
        g = generator("polar", NAMES[dtype])
        yield Case("aten.polar.default", dtype, "plain", torch.polar,
                   [positive((3, 4), dtype, g), random((3, 4), dtype, g)])


def arithmetic():
    """Complex values through ops the real table has (their complex rules):
    not claims of their own, each checked against eager."""
    for dtype in COMPLEX:
        g = generator("complex_arithmetic", NAMES[dtype])
        a, b = random((3, 4), dtype, g), random((4,), dtype, g)
        real = random((3, 4), REAL_OF[dtype], g)
        for op, fn in [("aten.add.Tensor", lambda a, b: a + b),
                       ("aten.sub.Tensor", lambda a, b: a - 2 * b),
                       ("aten.mul.Tensor", lambda a, b: a * b),
                       ("aten.div.Tensor", lambda a, b: a / b)]:
            yield Case(op, dtype, "complex_broadcast", fn, [a, b])
        yield Case("aten.mul.Tensor", dtype, "by_real", lambda a, r: a * r, [a, real])
        yield Case("aten.div.Tensor", dtype, "real_by_complex", lambda r, a: r / a, [real, a])
        yield Case("aten.add.Tensor", dtype, "scalar", lambda a: a + 1.5, [a])
        for op, fn in [("aten.exp.default", torch.exp), ("aten.log.default", torch.log),
                       ("aten.sqrt.default", torch.sqrt),
                       ("aten.reciprocal.default", torch.reciprocal),
                       ("aten.abs.default", torch.abs), ("aten.neg.default", torch.neg)]:
            yield Case(op, dtype, "complex", fn, [a])
        axes = torch.tensor([4, -4, 4j, -4j, 0, 1e-3 + 5j, -5 + 1e-3j, -5 - 1e-3j],
                            dtype=dtype)
        yield Case("aten.sqrt.default", dtype, "axes", torch.sqrt, [axes])
        yield Case("aten.sum.dim_IntList", dtype, "rows", lambda a: a.sum(-1), [a])
        yield Case("aten.mean.dim", dtype, "columns", lambda a: a.mean(0, keepdim=True), [a])
        # sgn: the tracer's decomposition, z / |z| where |z| != 0.
        yield Case("aten.where.self", dtype, "sgn_with_zero", torch.sgn,
                   [torch.cat([a.flatten(), torch.zeros(1, dtype=dtype)])])
        yield Case("aten.t.default", dtype, "transpose_then_mul",
                   lambda a, c: a.t() * c, [a, random((4, 3), dtype, g)])
        yield Case("aten.cat.default", dtype, "rows", lambda a, b: torch.cat([a, b[None]], -2),
                   [a, b])
        yield Case("aten.where.self", dtype, "mask", lambda m, a, b: torch.where(m, a, b),
                   [random((3, 4), torch.bool, g), a, b])
        yield Case("aten._to_copy.default", dtype, "from_real",
                   lambda r: r.to(dtype) * 2, [real])
        other = torch.complex128 if dtype == torch.complex64 else torch.complex64
        yield Case("aten._to_copy.default", dtype, "to_other_precision",
                   lambda a: a.to(other), [a])


def ffts(claims):
    for dtype in claimed(claims, "aten._fft_c2c.default"):
        g = generator("fft_c2c", NAMES[dtype])
        tol = fft_tolerance(dtype)
        x = random((3, 12), dtype, g)
        op = "aten._fft_c2c.default"
        yield Case(op, dtype, "fft", torch.fft.fft, [x], tolerance=tol)
        yield Case(op, dtype, "ifft_ortho", lambda x: torch.fft.ifft(x, norm="ortho"),
                   [random((2, 7), dtype, g)], tolerance=tol)
        yield Case(op, dtype, "fft2_forward_norm", lambda x: torch.fft.fft2(x, norm="forward"),
                   [random((2, 5, 6), dtype, g)], tolerance=tol)
        yield Case(op, dtype, "fft_dim0_of_transpose", lambda x: torch.fft.fft(x.t(), dim=0),
                   [random((4, 9), dtype, g)], tolerance=tol)
        yield Case(op, dtype, "fftn_of_product",
                   lambda x, y: torch.fft.fftn(x * y, dim=(0, 2)),
                   [random((3, 2, 5), dtype, g), random((3, 2, 5), dtype, g)], tolerance=tol)
    for dtype in claimed(claims, "aten._fft_r2c.default"):
        g = generator("fft_r2c", NAMES[dtype])
        tol = fft_tolerance(dtype)
        op = "aten._fft_r2c.default"
        yield Case(op, dtype, "rfft_odd", torch.fft.rfft, [random((3, 11), dtype, g)],
                   tolerance=tol)
        yield Case(op, dtype, "rfft2_ortho", lambda x: torch.fft.rfft2(x, norm="ortho"),
                   [random((2, 6, 8), dtype, g)], tolerance=tol)
        yield Case(op, dtype, "fft_of_real_both_halves", torch.fft.fft,
                   [random((2, 10), dtype, g)], tolerance=tol)
        yield Case(op, dtype, "ihfft", torch.fft.ihfft, [random((13,), dtype, g)], tolerance=tol)
        yield Case(op, dtype, "rfft_of_transpose", lambda x: torch.fft.rfft(x.t()),
                   [random((7, 3), dtype, g)], tolerance=tol)
    for dtype in claimed(claims, "aten._fft_c2r.default"):
        g = generator("fft_c2r", NAMES[dtype])
        tol = fft_tolerance(dtype)
        op = "aten._fft_c2r.default"
        yield Case(op, dtype, "irfft", torch.fft.irfft, [random((3, 6), dtype, g)], tolerance=tol)
        yield Case(op, dtype, "irfft_odd_n", lambda x: torch.fft.irfft(x, n=9),
                   [random((2, 5), dtype, g)], tolerance=tol)
        yield Case(op, dtype, "irfft2", lambda x: torch.fft.irfft2(x, norm="ortho"),
                   [random((2, 4, 5), dtype, g)], tolerance=tol)
        yield Case(op, dtype, "hfft", torch.fft.hfft, [random((6,), dtype, g)], tolerance=tol)
        yield Case(op, dtype, "round_trip",
                   lambda x: torch.fft.irfft(torch.fft.rfft(x), n=x.shape[-1]),
                   [random((3, 10), REAL_OF[dtype], g)], tolerance=tol)
