"""Pointwise ops: arithmetic, unary math, comparisons, logical ops,
selection and clamps, over every claimed dtype, with random and edge values,
on contiguous, transposed, broadcast and stride-0 inputs."""
import torch
import torch.nn.functional as F

from cases_common import (CLOSE, ERROR, EXACT, FLOATS, NAMES, SMALL_INTS, ULP, Case, binary,
                          claimed, edge_pairs, generator, positive, random, refused, sweep,
                          unary, with_edges)

SHAPE = (6, 40)
# Python scalars next to a tensor: ints, floats eager rounds to 16-bit
# dtypes first (0.1, 1/3), a negative zero and a bool.
SCALARS = (3, -2, 2.5, 0.1, 1.0 / 3, -0.0, True)
# Mixed dtypes: PyTorch's promotion of two tensors.
PROMOTIONS = [(torch.float32, torch.float64), (torch.float16, torch.float32),
              (torch.float16, torch.bfloat16), (torch.bfloat16, torch.float64),
              (torch.int64, torch.float32), (torch.int64, torch.float16),
              (torch.bool, torch.int64), (torch.bool, torch.float32), (torch.int64, torch.bfloat16),
              (torch.uint8, torch.int8), (torch.int8, torch.int16), (torch.uint8, torch.int16),
              (torch.int16, torch.int64), (torch.bool, torch.uint8), (torch.int8, torch.float16)]
INT32_PROMOTIONS = [(torch.float32, torch.int32), (torch.int32, torch.int16),
                    (torch.int32, torch.int64), (torch.int32, torch.int32)]


def layouts(op, dtype, fn, make, check=CLOSE, function="", prefix=""):
    """fn over one input in each layout: contiguous, transposed and permuted
    (the view taken inside the traced function), and stride 0 (expand)."""
    g = generator(op, NAMES[dtype], prefix)
    yield Case(op, dtype, prefix + "contiguous", fn, [make(SHAPE, dtype, g)], check, function)
    yield Case(op, dtype, prefix + "transposed", lambda x: fn(x.t()), [make(SHAPE[::-1], dtype, g)],
               check, function)
    yield Case(op, dtype, prefix + "permuted", lambda x: fn(x.permute(2, 0, 1)),
               [make((4, 5, 6), dtype, g)], check, function)
    yield Case(op, dtype, prefix + "stride0", lambda x: fn(x.expand(*SHAPE)),
               [make((1, 40), dtype, g)], check, function)


def binary_layouts(op, dtype, fn, check=CLOSE, make=random):
    """fn over two inputs: same shape, broadcast (row and outer product),
    one transposed, one stride 0, and every pair of edge values."""
    g = generator(op, NAMES[dtype])
    yield Case(op, dtype, "contiguous", fn, [make(SHAPE, dtype, g), make(SHAPE, dtype, g)], check)
    yield Case(op, dtype, "broadcast_row", fn, [make(SHAPE, dtype, g), make((40,), dtype, g)],
               check)
    yield Case(op, dtype, "broadcast_outer", fn, [make((6, 1), dtype, g), make((1, 40), dtype, g)],
               check)
    yield Case(op, dtype, "transposed", lambda a, b: fn(a.t(), b),
               [make(SHAPE[::-1], dtype, g), make(SHAPE, dtype, g)], check)
    yield Case(op, dtype, "stride0", lambda a, b: fn(a, b.expand(*SHAPE)),
               [make(SHAPE, dtype, g), make((6, 1), dtype, g)], check)
    if dtype != torch.bool:
        yield Case(op, dtype, "edges", fn, list(edge_pairs(dtype)), check)


def as_seen(scalar, dtype):
    """A Python scalar as eager's float16 kernels would see it: float16's
    reference is float32 math, which would not round it first."""
    if dtype == torch.float16 and isinstance(scalar, float):
        return float(torch.tensor(scalar, dtype=torch.float16))
    return scalar


def float16_exact(tensor, other):
    """A 0-dim `tensor` rounded to the values of a 16-bit `other` it meets:
    eager rounds it to the common dtype before computing, while a float16
    case's reference (float32 math) would not."""
    if other in (torch.float16, torch.bfloat16) and tensor.dtype.is_floating_point:
        return tensor.to(other).to(tensor.dtype)
    return tensor


# --- Unary ------------------------------------------------------------------

# Exact in IEEE arithmetic or pure selection: eager's bits, edges included.
EXACT_UNARY = {"neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "floor": torch.floor,
               "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc}
# One or two IEEE roundings, but eager's 16-bit scalar loops round an
# intermediate (rsqrt: 1 / bfloat16(sqrt(x))): an ulp bound, edges included.
ROUNDED_UNARY = {"sqrt": torch.sqrt, "reciprocal": torch.reciprocal, "rsqrt": torch.rsqrt}
# Through the runtime's libm (or built on it): an ulp bound per function,
# over a sweep with each function's own hard inputs added.
TRANSCENDENTAL = {
    "exp": (torch.exp, [88.7, -87.3, 89.0, -104.0, 709.7, -745.0, 11.0, -17.0]),
    "expm1": (torch.expm1, [1e-8, -1e-8, 88.7, -20.0, 709.7]),
    "log": (torch.log, [1.0 + 1e-7, 1.0 - 1e-7, 2.0, 10.0]),
    "log1p": (torch.log1p, [-1.0, -0.999999, -0.5, 1e-8, -1e-8]),
    "tanh": (torch.tanh, [9.0, -9.0, 20.0, 1e-5, 0.55]),
    "erf": (torch.erf, [3.9, -3.9, 6.0, 1e-5, 0.85]),
    "sin": (torch.sin, [3.14159265, 6.28318531, 1e5, 1e22, 1e-5]),
    "cos": (torch.cos, [1.57079633, 4.71238898, 1e5, 1e22, 1e-5]),
    "sigmoid": (torch.sigmoid, [-88.0, -104.0, 88.0, 16.0, -16.0]),
    "silu": (unary(F.silu), [-88.0, -104.0, 88.0, 16.0, -16.0]),
    "tan": (torch.tan, [1.5707963, -1.5707963, 1e5, 1e-5, 0.785398]),
    "asin": (torch.asin, [1.0, -1.0, 0.5, 1e-5, 0.99999]),
    "acos": (torch.acos, [1.0, -1.0, 0.5, 1e-5, 0.99999]),
    "atan": (torch.atan, [1e10, -1e10, 1.0, 1e-5]),
    "sinh": (torch.sinh, [89.0, -89.0, 710.0, 1e-5, 0.5]),
    "cosh": (torch.cosh, [89.0, -89.0, 710.0, 1e-5, 0.5]),
    "asinh": (torch.asinh, [1e20, -1e20, 1e-5, 0.5]),
    "acosh": (torch.acosh, [1.0, 1.0001, 1e20, 2.0]),
    "atanh": (torch.atanh, [1.0, -1.0, 0.99999, 1e-5]),
    "log2": (torch.log2, [1.0, 2.0, 0.5, 1.0 + 1e-7]),
    "log10": (torch.log10, [1.0, 10.0, 0.1, 1000.0]),
    "exp2": (torch.exp2, [127.9, -149.0, 128.0, 1023.9, -1074.0]),
}
# Eager's bfloat16 kernels for these round intermediates to bfloat16 (erf is
# up to ~10 ulps off for |x| < 1e-4); Kiln computes in float32, as
# specified: the reference is float32 math.
ROUNDS_INTERMEDIATES = {"silu", "erf"}


def unary_cases(claims):
    for name, fn in EXACT_UNARY.items():
        op = f"aten.{name}.default"
        for dtype in claimed(claims, op):
            yield from layouts(op, dtype, fn, random)
            yield Case(op, dtype, "edges", fn, [with_edges(SHAPE, dtype, generator(op, dtype))],
                       EXACT)
        yield refused(op, torch.bool, torch.zeros_like, [random(SHAPE, torch.bool, generator(op))])
    for name, fn in ROUNDED_UNARY.items():
        op = f"aten.{name}.default"
        for dtype in claimed(claims, op):
            make = positive if name != "reciprocal" and dtype.is_floating_point else random
            yield from layouts(op, dtype, fn, make, ULP, name)
            yield Case(op, dtype, "edges", fn, [with_edges(SHAPE, dtype, generator(op, dtype))],
                       ULP, name)
    for name, (fn, extra) in TRANSCENDENTAL.items():
        op = f"aten.{name}.default"
        for dtype in claimed(claims, op):
            make = (positive if name in ("log", "log2", "log10", "acosh") and dtype.is_floating_point
                    else random)
            for case in layouts(op, dtype, fn, make, ULP, name):
                case.float32_reference = dtype == torch.bfloat16 and name in ROUNDS_INTERMEDIATES
                yield case
            if not dtype.is_floating_point:
                continue  # computed in float32: the float32 sweep covers it
            values = sweep(dtype, generator(op, dtype, "sweep"), extra)
            contiguous = values
            if name == "log1p":
                # SLEEF's log1p (eager's contiguous path) returns inf above
                # 1e38 (float) and 1e307 (double); libm and eager's strided
                # path give the finite log. The strided sweep keeps them.
                contiguous = values[values.double().abs() < 1e38]
            if name in ("sinh", "cosh"):
                # SLEEF's float32 cosh (eager's contiguous path) overflows
                # to inf below float's largest result (cosh(88.7) = 1.7e38);
                # libm and eager's strided path are finite there.
                contiguous = values[values.double().abs() < 88.5]
            float32 = dtype == torch.bfloat16 and name in ROUNDS_INTERMEDIATES
            yield Case(op, dtype, "sweep", fn, [contiguous], ULP, name, float32_reference=float32)
            # The same sweep strided: eager takes its scalar (libm) path.
            yield Case(op, dtype, "sweep_strided", lambda x: fn(x[::2]), [values], ULP, name,
                       float32_reference=float32)
    for op in ("aten.silu.default", "aten.gelu.default"):
        yield refused(op, torch.int64, lambda x: x, [random(SHAPE, torch.int64, generator(op))])
    yield from gelu_cases(claims)
    yield from pow_cases(claims)


def gelu_cases(claims):
    # gelu: x/2 (1 + erf(x / sqrt 2)) cancels for x << 0, so an ulp bound on
    # the result would only measure erf's last bit amplified; and eager's
    # contiguous float32/bfloat16 gelu is oneDNN's own approximation:
    # assert_close's tolerances. Eager's bfloat16 gelu (and backward) rounds
    # every intermediate to bfloat16: the reference is float32 math.
    for approximate in ("none", "tanh"):
        op = "aten.gelu.default"
        for dtype in claimed(claims, op):
            fn = unary(F.gelu, approximate=approximate)
            for case in layouts(op, dtype, fn, random, prefix=f"{approximate}_"):
                case.float32_reference = dtype == torch.bfloat16
                yield case
            yield Case(op, dtype, f"{approximate}_sweep", fn,
                       [sweep(dtype, generator(op, dtype, approximate), [-5.0, 5.0, -10.0])],
                       float32_reference=dtype == torch.bfloat16)
        op = "aten.gelu_backward.default"
        for dtype in claimed(claims, op):
            fn = binary(torch.ops.aten.gelu_backward, approximate=approximate)
            for case in binary_layouts(op, dtype, fn):
                case.variant = f"{approximate}_{case.variant}"
                case.float32_reference = dtype == torch.bfloat16
                if "transposed" in case.variant:
                    # Eager's float32 oneDNN gelu_backward reads a
                    # transposed grad as if it were contiguous.
                    case.reference_fn = lambda g, x, f=fn: f(g.t().contiguous(), x)
                # Eager's oneDNN gelu_backward fails on broadcast operands.
                if "edges" not in case.variant and "broadcast" not in case.variant:
                    yield case


def pow_cases(claims):
    op = "aten.pow.Tensor_Scalar"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        # Special exponents are exact (square, sqrt, reciprocal); others go
        # through the runtime's pow. Eager rounds the exponent to 16-bit
        # dtypes first (1/3 -> 0.333984375 in bfloat16).
        for exponent in (2, 3, 0.5, -0.5, -1, -2, 0, 1):
            yield Case(op, dtype, f"exponent_{exponent}", unary(torch.pow, exponent),
                       [with_edges(SHAPE, dtype, g)], CLOSE)
        for exponent in (2.5, -1.5, 1.0 / 3):
            yield Case(op, dtype, f"exponent_{exponent:.3g}", unary(torch.pow, exponent),
                       [with_edges(SHAPE, dtype, g)], ULP, "pow")
        yield Case(op, dtype, "transposed", lambda x: x.t() ** 2.5, [positive((40, 6), dtype, g)],
                   ULP, "pow")
        yield Case(op, dtype, "stride0", lambda x: x.expand(6, 40) ** 1.5,
                   [positive((1, 40), dtype, g)], ULP, "pow")
    op = "aten.pow.Tensor_Tensor"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "broadcast", torch.pow,
                   [positive(SHAPE, dtype, g), random((40,), dtype, g)], ULP, "pow")
        yield Case(op, dtype, "transposed", lambda a, b: torch.pow(a.t(), b),
                   [positive(SHAPE[::-1], dtype, g), random(SHAPE, dtype, g)], ULP, "pow")
        # Strided: eager's libm path (SLEEF's pow overflows at DBL_MAX ** 1).
        a, b = edge_pairs(dtype)
        yield Case(op, dtype, "edges", lambda a, b: torch.pow(a[:, ::2], b[:, ::2]),
                   [a.repeat(1, 2), b.repeat(1, 2)], ULP, "pow")


# --- Binary arithmetic -------------------------------------------------------

ARITHMETIC = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}


def arithmetic_cases(claims):
    for name, fn in ARITHMETIC.items():
        op = f"aten.{name}.Tensor"
        for dtype in claimed(claims, op):
            # IEEE arithmetic: one rounding, the same bits as eager.
            yield from binary_layouts(op, dtype, fn, EXACT if dtype.is_floating_point else CLOSE)
            g = generator(op, NAMES[dtype], "scalar")
            for scalar in SCALARS:
                if name == "sub" and isinstance(scalar, bool):
                    continue  # eager refuses bool operands of sub
                yield Case(op, dtype, f"scalar_{scalar!r:.6}", unary(fn, as_seen(scalar, dtype)),
                           [with_edges(SHAPE, dtype, g)])
            if name in ("add", "sub") and dtype != torch.bool:
                for alpha in (2, -1) + ((0.5, 0.1) if dtype.is_floating_point else ()):
                    # Eager's bfloat16 a + alpha * b rounds alpha * b to
                    # bfloat16; Kiln computes in float32: float32 reference.
                    yield Case(op, dtype, f"alpha_{alpha}", binary(fn, alpha=as_seen(alpha, dtype)),
                               [random(SHAPE, dtype, g), random((40,), dtype, g)],
                               float32_reference=dtype == torch.bfloat16)
        for a, b in PROMOTIONS:
            if a in claimed(claims, op) and b in claimed(claims, op):
                g = generator(op, NAMES[a], NAMES[b])
                yield Case(op, a, f"promote_{NAMES[b]}", fn,
                           [random(SHAPE, a, g), random((40,), b, g)])
                # A 0-dim tensor promotes only across categories (bool <
                # integer < floating): float16 + float32 0-dim is float16.
                yield Case(op, a, f"promote_zero_dim_{NAMES[b]}", fn,
                           [random(SHAPE, a, g), float16_exact(random((), b, g), a)])
                yield Case(op, b, f"promote_zero_dim_{NAMES[a]}", fn,
                           [float16_exact(random((), a, g), b), random(SHAPE, b, g)])
        scalar_op = f"aten.{name}.Scalar"
        aten = getattr(torch.ops.aten, name).Scalar
        for dtype in claimed(claims, scalar_op):
            g = generator(scalar_op, NAMES[dtype])
            for scalar in (3, 0.1):
                yield Case(scalar_op, dtype, f"scalar_{scalar}",
                           unary(aten, as_seen(scalar, dtype)),
                           [with_edges(SHAPE, dtype, g)])
    g = generator("sub refused")
    yield refused("aten.sub.Tensor", torch.bool, lambda a, b: a,
                  [random(SHAPE, torch.bool, g), random(SHAPE, torch.bool, g)])
    op = "aten.rsub.Scalar"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "int", lambda x: 1 - x, [with_edges(SHAPE, dtype, g)])
        yield Case(op, dtype, "float_alpha", unary(torch.rsub, as_seen(0.1, dtype), alpha=2),
                   [random(SHAPE, dtype, g)])


def scalar_loop(fn):
    """fn as eager's scalar loop computes it (inner stride 2): C's fmod.
    Its vectorized loop (SLEEF's fmod) returns NaN for quotients past its
    range (fmod(3.4e38, 0.1)) and its vectorized floor division has no
    zero-divisor case (1 // 0 is NaN, not inf)."""
    def strided(*tensors):
        return fn(*(torch.stack([t, t], -1)[..., 0] for t in tensors))
    return strided


def division_cases(claims):
    """atan2; fmod, remainder and floor division (floor_divide, and div's
    rounding modes): every pair of edge values, scalar divisors of both
    signs, and quotients near integers; against eager's scalar loop."""
    op = "aten.atan2.default"
    for dtype in claimed(claims, op):
        yield from binary_layouts(op, dtype, torch.atan2)
    for name, fn in (("fmod", torch.fmod), ("remainder", torch.remainder)):
        for overload in ("Tensor", "Scalar"):
            op = f"aten.{name}.{overload}"
            for dtype in claimed(claims, op, FLOATS):
                g = generator(op, NAMES[dtype])
                if overload == "Tensor":
                    for case in binary_layouts(op, dtype, fn, EXACT):
                        case.reference_fn = scalar_loop(case.fn)
                        yield case
                    continue
                for divisor in (2.5, -3, 0.1):
                    f = unary(fn, as_seen(divisor, dtype))
                    yield Case(op, dtype, f"scalar_{divisor}", f, [with_edges(SHAPE, dtype, g)],
                               EXACT, reference_fn=scalar_loop(f))
    modes = {"aten.floor_divide.default": torch.floor_divide,
             "aten.div.Tensor_mode": lambda a, b: (torch.div(a, b, rounding_mode="floor"),
                                                   torch.div(a, b, rounding_mode="trunc"))}
    for op, fn in modes.items():
        for dtype in claimed(claims, op, FLOATS):
            g = generator(op, NAMES[dtype])
            for case in binary_layouts(op, dtype, fn, EXACT):
                case.reference_fn = scalar_loop(case.fn)
                yield case
            # Quotients at and beside integers, and of both signs.
            a = torch.tensor([7.0, -7.0, 7.5, -7.5, 1.0, -1.0, 0.3, 6.0, -6.0, 1e30], dtype=dtype)
            b = torch.tensor([2.0, 2.0, -2.5, 2.5, 0.1, 0.1, 0.1, 3.0, -3.0, 7.0], dtype=dtype)
            yield Case(op, dtype, "near_integers", fn, [a, b], EXACT, reference_fn=scalar_loop(fn))
    # A scalar divisor traces as a 0-dim tensor.
    for op, fn in (("aten.floor_divide.default", lambda x: torch.floor_divide(x, 2.5)),
                   ("aten.div.Tensor_mode", lambda x: torch.div(x, -3, rounding_mode="floor"))):
        for dtype in claimed(claims, op, FLOATS):
            yield Case(op, dtype, "scalar", fn,
                       [with_edges(SHAPE, dtype, generator(op, NAMES[dtype]))], EXACT,
                       reference_fn=scalar_loop(fn))
    yield from integer_division_cases(claims)


INTEGER_DIVISIONS = {
    "aten.fmod.Scalar": torch.fmod,
    "aten.remainder.Scalar": torch.remainder,
    "aten.floor_divide.default": torch.floor_divide,
    "aten.div.Tensor_mode": lambda x, d: (torch.div(x, d, rounding_mode="floor"),
                                          torch.div(x, d, rounding_mode="trunc")),
}


def integer_division_cases(claims):
    """Integers divided by constants of both signs, 1 and -1 among them.
    A tensor divisor is refused: eager raises on a zero one, which a
    kernel cannot."""
    for op, fn in INTEGER_DIVISIONS.items():
        for dtype in claimed(claims, op, [torch.int64] + SMALL_INTS):
            g = generator(op, NAMES[dtype])
            x = with_edges(SHAPE, dtype, g)
            for divisor in (2, -3, 7, 1, -1):
                if dtype == torch.uint8 and divisor < 0:
                    continue  # eager refuses: it does not fit
                dividend = x
                if dtype == torch.int32 and divisor == -1:
                    # int32's lowest / -1 overflows: x86's division traps, in eager too.
                    dividend = x.clamp(min=torch.iinfo(dtype).min + 1)
                yield Case(op, dtype, f"by_{divisor}", unary(fn, divisor), [dividend], EXACT)
    # No elements: nothing is divided, by zero or by a tensor, as eager.
    for op, fn in INTEGER_DIVISIONS.items():
        empty = torch.zeros((0, 3), dtype=torch.int64)
        yield Case(op, torch.int64, "empty_by_0", unary(fn, 0), [empty], EXACT)
    op = "aten.floor_divide.default"
    yield Case(op, torch.int64, "empty_by_a_tensor", torch.floor_divide,
               [torch.zeros((2, 0), dtype=torch.int64), torch.zeros((1, 0), dtype=torch.int64)],
               EXACT)
    # By a tensor: Unimplemented (the client runs it through torch).
    op = "aten.floor_divide.default"
    g = generator(op, "refused")
    yield Case(op, torch.int64, "refused", lambda a, b: a,
               [random(SHAPE, torch.int64, g), random(SHAPE, torch.int64, g)], ERROR,
               error=("UNIMPLEMENTED", "an integer division by a tensor"), manual=(op, []))


def sign_xlogy_lerp_cases(claims):
    """sign (edges: NaN and -0.0 give 0), xlogy (x = 0 gives 0 unless y is
    NaN; a scalar y), lerp with a scalar weight on either side of 0.5 and
    outside [0, 1], and with a tensor weight."""
    op = "aten.sign.default"
    for dtype in claimed(claims, op):
        yield from layouts(op, dtype, torch.sign, random, EXACT)
        yield Case(op, dtype, "edges", torch.sign, [with_edges(SHAPE, dtype, generator(op, dtype))],
                   EXACT)
    op = "aten.xlogy.Tensor"
    for dtype in claimed(claims, op):
        # Eager's 16-bit xlogy rounds log(y) to the dtype before the
        # product: the reference is float32 math.
        for case in binary_layouts(op, dtype, torch.xlogy, make=positive):
            case.float32_reference = dtype in (torch.float16, torch.bfloat16)
            yield case
        g = generator(op, NAMES[dtype], "zeros")
        x = random(SHAPE, dtype, g)
        x[::2] = 0
        yield Case(op, dtype, "zero_x", torch.xlogy, [x, with_edges(SHAPE, dtype, g)],
                   float32_reference=dtype in (torch.float16, torch.bfloat16))
    op = "aten.xlogy.Scalar_Other"
    for dtype in claimed(claims, op):
        yield Case(op, dtype, "scalar", unary(torch.xlogy, 2.5),
                   [with_edges(SHAPE, dtype, generator(op, dtype))])
    op = "aten.lerp.Scalar"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        for weight in (0.3, 0.5, 0.8, -0.7, 1.5):
            yield Case(op, dtype, f"weight_{weight}", binary(torch.lerp, weight),
                       [random(SHAPE, dtype, g), random(SHAPE, dtype, g)])
        yield Case(op, dtype, "broadcast", lambda a, b: torch.lerp(a, b, 0.25),
                   [random(SHAPE, dtype, g), random((40,), dtype, g)])
    op = "aten.lerp.Tensor"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        weight = random(SHAPE, dtype, g)
        yield Case(op, dtype, "contiguous", torch.lerp,
                   [random(SHAPE, dtype, g), random(SHAPE, dtype, g), weight])
        yield Case(op, dtype, "broadcast_weight", torch.lerp,
                   [random(SHAPE, dtype, g), random(SHAPE, dtype, g), random((40,), dtype, g)])


# --- Comparisons, logical ops, selection --------------------------------------

COMPARISONS = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
               "ge": torch.ge}


def comparison_cases(claims):
    for name, fn in COMPARISONS.items():
        op = f"aten.{name}.Tensor"
        for dtype in claimed(claims, op):
            yield from binary_layouts(op, dtype, fn, EXACT)
        for a, b in PROMOTIONS[:5]:
            g = generator(op, NAMES[a], NAMES[b])
            yield Case(op, a, f"promote_{NAMES[b]}", fn,
                       [random(SHAPE, a, g), random((40,), b, g)], EXACT)
        op = f"aten.{name}.Scalar"
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for scalar in (0, 2, 0.1, 1.0 / 3, float("nan"), float("inf"), True):
                yield Case(op, dtype, f"scalar_{scalar!r:.6}", unary(fn, as_seen(scalar, dtype)),
                           [with_edges(SHAPE, dtype, g)], EXACT)
    for name in ("logical_and", "logical_or", "logical_xor"):
        op = f"aten.{name}.default"
        for dtype in claimed(claims, op):
            yield from binary_layouts(op, dtype, getattr(torch, name), EXACT)
    op = "aten.logical_not.default"
    for dtype in claimed(claims, op):
        yield from layouts(op, dtype, torch.logical_not, random, EXACT)
        yield Case(op, dtype, "edges", torch.logical_not,
                   [with_edges(SHAPE, dtype, generator(op, dtype))], EXACT)


def selection_cases(claims):
    for name in ("maximum", "minimum"):
        op = f"aten.{name}.default"
        for dtype in claimed(claims, op):
            yield from binary_layouts(op, dtype, getattr(torch, name), EXACT)
        for a, b in PROMOTIONS[:6]:
            g = generator(op, NAMES[a], NAMES[b])
            yield Case(op, a, f"promote_{NAMES[b]}", getattr(torch, name),
                       [random(SHAPE, a, g), random((40,), b, g)], EXACT)
        # int32 operands: clamp(x, min=int32 tensor) of a float32 x traces to
        # maximum(x, int32 bound); int32 with int16 stays int32, with int64 widens.
        for a, b in INT32_PROMOTIONS:
            g = generator(op, NAMES[a], NAMES[b])
            yield Case(op, a, f"promote_{NAMES[b]}", getattr(torch, name),
                       [with_edges(SHAPE, a, g), with_edges(SHAPE, b, g)], EXACT)
    op = "aten.where.self"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        mask = random(SHAPE, torch.bool, g)
        yield Case(op, dtype, "edges", torch.where,
                   [mask, with_edges(SHAPE, dtype, g), random(SHAPE, dtype, g)], EXACT)
        yield Case(op, dtype, "broadcast", torch.where,
                   [random((6, 1), torch.bool, g), random((40,), dtype, g),
                    random(SHAPE, dtype, g)],
                   EXACT)
        yield Case(op, dtype, "transposed", lambda c, x, y: torch.where(c.t(), x, y.t()),
                   [random(SHAPE[::-1], torch.bool, g), random(SHAPE, dtype, g),
                    random(SHAPE[::-1], dtype, g)], EXACT)
        yield Case(op, dtype, "stride0", lambda c, x, y: torch.where(c.expand(*SHAPE), x, y),
                   [random((1, 40), torch.bool, g), random(SHAPE, dtype, g),
                    random(SHAPE, dtype, g)], EXACT)
        if dtype.is_floating_point:
            # make_fx: where(c, x, scalar_tensor(0.0)), a float32 0-dim
            # tensor that must not promote x.
            yield Case(op, dtype, "scalar", lambda c, x: torch.where(c, x, 0.0),
                       [mask, with_edges(SHAPE, dtype, g)], EXACT)
    for a, b in PROMOTIONS[:6]:
        g = generator(op, NAMES[a], NAMES[b])
        yield Case(op, a, f"promote_{NAMES[b]}", torch.where,
                   [random(SHAPE, torch.bool, g), random(SHAPE, a, g), random((40,), b, g)], EXACT)
    op = "aten.masked_fill.Scalar"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        for value in (-1.5, 0.1, 2, float("-inf"), True):
            if (value == float("-inf") and not dtype.is_floating_point) or (
                    dtype == torch.uint8 and value < 0):
                continue  # eager refuses: it does not fit
            yield Case(op, dtype, f"value_{value!r:.6}", binary(torch.masked_fill, value),
                       [with_edges(SHAPE, dtype, g), random(SHAPE, torch.bool, g)], EXACT)
        yield Case(op, dtype, "broadcast_mask", binary(torch.masked_fill, 0),
                   [random(SHAPE, dtype, g), random((40,), torch.bool, g)], EXACT)
        yield Case(op, dtype, "transposed", lambda x, m: torch.masked_fill(x.t(), m, 0),
                   [random(SHAPE[::-1], dtype, g), random(SHAPE, torch.bool, g)], EXACT)
    op = "aten.masked_fill.Tensor"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        for value_dtype in sorted({dtype, torch.float64, torch.int64}, key=NAMES.get):
            value = float16_exact(random((), value_dtype, g), dtype)
            yield Case(op, dtype, f"value_{NAMES[value_dtype]}", torch.masked_fill,
                       [with_edges(SHAPE, dtype, g), random((40,), torch.bool, g), value], EXACT)
    yield from clamp_cases(claims)
    op = "aten.threshold_backward.default"
    for dtype in claimed(claims, op):
        for threshold in (0, 0.1, -1):
            fn = binary(torch.ops.aten.threshold_backward, threshold)
            for case in binary_layouts(op, dtype, fn, EXACT):
                case.variant = f"threshold_{threshold}_{case.variant}"
                yield case
    yield refused(op, torch.bool, lambda a, b: a,
                  [random(SHAPE, torch.bool, generator(op)),
                   random(SHAPE, torch.bool, generator(op))],
                  [("threshold", 0)])


def clamp_cases(claims):
    # A NaN bound is ignored; min > max gives max everywhere.
    bounds = {"aten.clamp.default": [(-1, 1), (0.1, None), (None, 1.0 / 3), (-0.0, 0.0),
                                     (float("nan"), None), (2, -1)],
              "aten.clamp_min.default": [(0, None), (0.1, None)],
              "aten.clamp_max.default": [(None, 0), (None, -0.1)]}
    for op, pairs in bounds.items():
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for low, high in pairs:
                if op == "aten.clamp.default":
                    fn = unary(torch.clamp, low, high)
                elif op == "aten.clamp_min.default":
                    fn = unary(torch.clamp_min, low)
                else:
                    fn = unary(torch.clamp_max, high)
                variant = f"{low!r:.6}_{high!r:.6}"
                if not dtype.is_floating_point and isinstance(low, float) and low != low:
                    continue  # NaN does not convert to an integer bound
                if dtype == torch.uint8 and high is not None and high < 0:
                    continue  # eager refuses: it does not fit
                yield Case(op, dtype, f"edges_{variant}", fn, [with_edges(SHAPE, dtype, g)], EXACT)
            fn = unary(torch.clamp, -1, 1) if op == "aten.clamp.default" else (
                unary(torch.clamp_min, 0) if op == "aten.clamp_min.default"
                else unary(torch.clamp_max, 0))
            yield from layouts(op, dtype, fn, random, EXACT)


def cases(claims):
    yield from unary_cases(claims)
    yield from arithmetic_cases(claims)
    yield from sign_xlogy_lerp_cases(claims)
    yield from division_cases(claims)
    yield from comparison_cases(claims)
    yield from selection_cases(claims)
