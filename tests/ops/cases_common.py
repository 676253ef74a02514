"""What every case family shares: the Case record, dtypes, input values and
layouts. A family module (cases_*.py) exposes `cases(claims)`, yielding Case
records for the ops it covers; `claims` maps an op name to the dtypes the
op table claims for it (docs/OPS.md), so each family tests exactly those.
"""
import math
import zlib
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import torch

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
NAMES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
         torch.bfloat16: "bfloat16", torch.int64: "int64", torch.bool: "bool",
         torch.complex64: "complex64", torch.complex128: "complex128",
         torch.int8: "int8", torch.uint8: "uint8", torch.int16: "int16",
         torch.int32: "int32"}
SMALL_INTS = [torch.int8, torch.uint8, torch.int16, torch.int32]
BY_NAME = {name: dtype for dtype, name in NAMES.items()}

# Checks (tests/ops/op_case.proto).
CLOSE, EXACT, ULP, ERROR = "ASSERT_CLOSE", "BIT_EXACT", "ULP", "ERROR"


@dataclass
class Case:
    op: str                 # the op under test, as the table names it
    dtype: torch.dtype      # the dtype under test (claims are per op and dtype)
    variant: str            # "broadcast", "edges", ...
    fn: Callable            # traced with make_fx
    inputs: List[torch.Tensor]
    check: str = CLOSE
    function: str = ""      # ULP: the function whose bound applies
    tolerance: Optional[Tuple[float, float]] = None  # CLOSE: (rtol, atol)
    error: Optional[Tuple[str, str]] = None          # ERROR: (code, substring)
    # ERROR cases and ops make_fx never emits: (op, args) of a one-node graph
    # built by hand over `inputs`; `fn` then computes the eager reference
    # (for ERROR cases: tensors of the declared result types).
    manual: Optional[Tuple[str, list]] = None
    # The reference is float32 math rounded to the output dtype, not eager's
    # 16-bit kernel: for bfloat16 kernels that round every intermediate to
    # bfloat16 (Kiln computes 16-bit floats in float32, as specified).
    float32_reference: bool = False
    # Eager's result computed another way (same math), where eager's own
    # kernel for the traced layout is wrong: the graph is still `fn`'s.
    reference_fn: Optional[Callable] = None
    # A bug outside the op table (emitter, passes), for ops_test to track.
    known_bug: str = ""

    @property
    def name(self):
        return f"{self.op}/{NAMES[self.dtype]}/{self.variant}"


def claimed(claims, op, dtypes=None):
    """The dtypes `op` claims, in the table's order (optionally only those in
    `dtypes`)."""
    return [BY_NAME[d] for d in claims.get(op, []) if dtypes is None or BY_NAME[d] in dtypes]


def generator(*parts):
    """A torch.Generator seeded from the case's name: the same values on
    every build."""
    return torch.Generator().manual_seed(zlib.crc32("/".join(map(str, parts)).encode()))


def random(shape, dtype, g, scale=2.0, low=-9, high=10):
    if dtype.is_complex:
        parts = torch.randn(tuple(shape) + (2,), generator=g, dtype=torch.float64) * scale
        return torch.view_as_complex(parts).to(dtype)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) < 0.5
    if dtype == torch.uint8:
        low, high = max(low, 0), max(high, 1)
    return torch.randint(low, high, shape, generator=g, dtype=dtype)


def positive(shape, dtype, g):
    """Log-normal values: inside the domain of log and sqrt."""
    return torch.exp(torch.randn(shape, generator=g, dtype=torch.float64) * 2).to(dtype)


def denormal(dtype):
    info = torch.finfo(dtype)
    return info.tiny * info.eps


def edges(dtype):
    """Exceptional and extreme values of `dtype`."""
    if dtype == torch.bool:
        return [False, True]
    if dtype == torch.int64:
        return [0, 1, -1, 2, -7, 1 << 40, -(1 << 40)]
    if dtype in SMALL_INTS:  # the extremes, whose sums and products wrap
        info = torch.iinfo(dtype)
        return [0, 1, 2, 7, info.max, info.min, info.max - 1, info.min + 1, info.max // 2 + 1]
    info = torch.finfo(dtype)
    return [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -2.5, info.max, -info.max,
            info.tiny, -info.tiny, denormal(dtype), -denormal(dtype), 3.0]


def with_edges(shape, dtype, g, values=None):
    """Random values with the edge values of `dtype` at the first positions."""
    tensor = random(shape, dtype, g).flatten()
    values = (edges(dtype) if values is None else values)[:tensor.numel()]
    tensor[:len(values)] = torch.tensor(values, dtype=torch.float64).to(dtype)
    return tensor.reshape(shape)


def edge_pairs(dtype):
    """(a, b): every pair of edge values of `dtype`, as two [n, n] tensors."""
    values = torch.tensor(edges(dtype), dtype=torch.float64).to(dtype)
    n = values.numel()
    return values.repeat_interleave(n).reshape(n, n), values.repeat(n).reshape(n, n)


def sweep(dtype, g, extra=()):
    """A 1-D sweep for transcendentals: exceptional values, both signs of a
    log-spaced range from the smallest denormal to the largest finite value,
    random values at several scales, and `extra` (domain edges)."""
    info = torch.finfo(dtype)
    low, high = math.log10(denormal(dtype)), math.log10(info.max)
    spaced = torch.logspace(low, high, 96, dtype=torch.float64).clamp(max=info.max)
    parts = [torch.tensor(edges(dtype), dtype=torch.float64), spaced, -spaced,
             torch.randn(64, generator=g, dtype=torch.float64),
             torch.randn(64, generator=g, dtype=torch.float64) * 10,
             torch.rand(64, generator=g, dtype=torch.float64) * 200 - 100,
             torch.tensor(list(extra), dtype=torch.float64)]
    return torch.cat(parts).to(dtype)


# make_fx traces every parameter of a function, so a loop variable cannot be
# bound as a lambda default: these close over it instead.
def unary(fn, *args, **kwargs):
    return lambda x: fn(x, *args, **kwargs)


def binary(fn, *args, **kwargs):
    return lambda a, b: fn(a, b, *args, **kwargs)


def refused(op, dtype, fn, inputs, args=(), substring="neither does eager PyTorch"):
    """A one-node graph Kiln must refuse as eager does (InvalidArgument);
    `fn` gives tensors of the declared result types."""
    return Case(op, dtype, "refused", fn, inputs, ERROR, error=("INVALID_ARGUMENT", substring),
                manual=(op, list(args)))


def bfloat16_from_float32(cases):
    """Eager's bfloat16 CPU kernels round intermediates to bfloat16 (bmm
    accumulates in it, addmm rounds the product before adding the bias,
    layer_norm and multi-dim reductions accumulate in it); Kiln keeps 16-bit
    floats in float32 until a kernel's end, so these cases take their
    reference from float32 math rounded to bfloat16."""
    for case in cases:
        case.float32_reference = case.float32_reference or case.dtype == torch.bfloat16
        yield case
