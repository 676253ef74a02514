"""Creation ops (zeros, ones, full, the _like and new_ forms, scalar_tensor,
arange, fill), copies and conversions (clone, _to_copy,
convert_element_type) between every pair of dtypes, and tril/triu."""
import torch

from cases_common import (CLOSE, EXACT, NAMES, SMALL_INTS, Case, claimed, generator, random,
                          with_edges)

A = torch.ops.aten
SHAPE = (4, 6)


def fill_value(dtype):
    return {torch.bool: True, torch.int64: -3}.get(dtype, 2.5)


# Factories close over their arguments: make_fx traces every parameter.
def sized(make, dtype):
    return lambda: make(3, 5, dtype=dtype)


def full_of(dtype):
    return lambda: torch.full((3, 5), fill_value(dtype), dtype=dtype)


def scalar_of(dtype):
    return lambda: torch.scalar_tensor(fill_value(dtype), dtype=dtype)


def empty_filled(dtype):
    """empty's values are undefined: filled (fill.Scalar) before comparing."""
    return lambda: torch.empty(3, 5, dtype=dtype).fill_(fill_value(dtype))


def filled(make, value):
    return lambda: make().fill_(value)


def of_transposed(fn):
    return lambda x: fn(x.t())


def sized_cases(claims):
    """Ops that take a size and an optional dtype, returned as they are."""
    for name, make in (("zeros", torch.zeros), ("ones", torch.ones)):
        op = f"aten.{name}.default"
        for dtype in claimed(claims, op):
            yield Case(op, dtype, "sized", sized(make, dtype), [], EXACT)
    for op, factory in (("aten.full.default", full_of), ("aten.scalar_tensor.default", scalar_of),
                        ("aten.empty.memory_format", empty_filled)):
        for dtype in claimed(claims, op):
            yield Case(op, dtype, "sized", factory(dtype), [], EXACT)
    # Strides and layouts asked for are not kept (Kiln's tensors are contiguous).
    for op, factory in (("aten.empty_strided.default",
                         lambda dtype: lambda: torch.empty_strided((3, 5), (1, 3), dtype=dtype)),
                        ("aten.empty_permuted.default",
                         lambda dtype: lambda: torch.empty_permuted((3, 5, 2), (2, 0, 1),
                                                                    dtype=dtype))):
        for dtype in claimed(claims, op):
            yield Case(op, dtype, "sized", filled(factory(dtype), fill_value(dtype)), [], EXACT)
    # Consumed by an op, like real graphs use them (a mask, a bias).
    g = generator("creation consumed")
    yield Case("aten.zeros.default", torch.float32, "consumed", lambda x: x + torch.zeros(6),
               [random(SHAPE, torch.float32, g)], EXACT)
    yield Case("aten.full.default", torch.float32, "consumed",
               lambda x: x * torch.full((4, 1), 0.5), [random(SHAPE, torch.float32, g)], EXACT)


LIKES = {
    "aten.zeros_like.default": lambda x: torch.zeros_like(x),
    "aten.ones_like.default": lambda x: torch.ones_like(x),
    "aten.full_like.default": lambda x: torch.full_like(x, fill_value(x.dtype)),
    "aten.empty_like.default": lambda x: torch.empty_like(x).fill_(fill_value(x.dtype)),
    "aten.new_zeros.default": lambda x: x.new_zeros((2, 3)),
    "aten.new_ones.default": lambda x: x.new_ones((2, 3)),
    "aten.new_full.default": lambda x: x.new_full((2, 3), fill_value(x.dtype)),
    "aten.new_empty.default": lambda x: x.new_empty((2, 3)).fill_(fill_value(x.dtype)),
}


def like_cases(claims):
    """The _like and new_ forms: shaped (and typed) like their input."""
    for op, fn in LIKES.items():
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            yield Case(op, dtype, "like", fn, [random(SHAPE, dtype, g)], EXACT)
            yield Case(op, dtype, "transposed", of_transposed(fn), [random(SHAPE, dtype, g)],
                       EXACT)
    g = generator("like dtype")
    x = random(SHAPE, torch.float32, g)
    yield Case("aten.zeros_like.default", torch.int64, "dtype_argument",
               lambda x: torch.zeros_like(x, dtype=torch.int64), [x], EXACT)
    yield Case("aten.full_like.default", torch.bool, "dtype_argument",
               lambda x: torch.full_like(x, 1, dtype=torch.bool), [x], EXACT)


def fill_cases(claims):
    op = "aten.fill.Scalar"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "value", lambda x: A.fill.Scalar(x, fill_value(x.dtype)),
                   [random(SHAPE, dtype, g)], EXACT)
        # The value converted to the tensor's dtype (2.7 -> 2 in int64).
        yield Case(op, dtype, "converted", lambda x: A.fill.Scalar(x.t(), 2.7),
                   [random(SHAPE, dtype, g)], EXACT)
    op = "aten.fill.Tensor"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "value", lambda x, v: A.fill.Tensor(x, v),
                   [random(SHAPE, dtype, g), random((), dtype, g)], EXACT)


def arange_cases(claims):
    op = "aten.arange.start_step"
    for dtype in claimed(claims, op):
        if dtype == torch.bool:
            continue
        yield Case(op, dtype, "ints", arange(1, 20, 3, dtype), [], CLOSE)
        if dtype.is_floating_point:
            # Eager computes start + step * i in double (float for 16-bit).
            yield Case(op, dtype, "tenths", arange(-1.0, 2.0, 0.1, dtype), [], CLOSE)
            yield Case(op, dtype, "descending", arange(3.0, -2.0, -0.7, dtype), [], CLOSE)
    yield Case(op, torch.int64, "inferred_int64", lambda: torch.arange(2, 30, 4), [], EXACT)
    yield Case(op, torch.float32, "inferred_float32", lambda: torch.arange(0, 3, 0.25), [],
               EXACT)
    for dtype in claimed(claims, "aten.arange.default"):
        yield Case("aten.arange.default", dtype, "end", arange_end(12, dtype), [], EXACT)
    for dtype in claimed(claims, "aten.arange.start"):
        yield Case("aten.arange.start", dtype, "start_end", arange_start(-4, 9, dtype), [], EXACT)
    yield Case("aten.arange.default", torch.float32, "consumed",
               lambda x: x + torch.arange(6, dtype=torch.float32),
               [random(SHAPE, torch.float32, generator("arange consumed"))], EXACT)


def arange_end(end, dtype):
    return lambda: torch.arange(end, dtype=dtype)


def arange_start(start, end, dtype):
    return lambda: torch.arange(start, end, dtype=dtype)


def arange(start, end, step, dtype):
    return lambda: torch.arange(start, end, step, dtype=dtype)


def conversion_cases(claims):
    """Every pair of dtypes, edge values included (NaN to bool is True)."""
    for op in ("aten._to_copy.default", "prims.convert_element_type.default"):
        for source in claimed(claims, op):
            g = generator(op, NAMES[source])
            x = with_edges(SHAPE, source, g)
            # Out-of-range floats to integers are undefined in C++ (eager gives
            # INT64_MIN on x86): only finite values in range go there.
            finite = x
            if source.is_floating_point:
                finite = x.double().nan_to_num(0.0, 0.0, 0.0).clamp(-2.0**62, 2.0**62).to(source)
            for target in claimed(claims, op):
                values = finite if target == torch.int64 else x
                if target in SMALL_INTS and source.is_floating_point:
                    info = torch.iinfo(target)  # halved: a 16-bit float rounds up
                    values = finite.double().clamp(info.min // 2, info.max // 2).to(source)
                convert = to(target) if op.startswith("aten") else convert_element_type(target)
                yield Case(op, source, f"to_{NAMES[target]}", convert, [values], EXACT)
            convert = to(torch.float64) if op.startswith("aten") else convert_element_type(
                torch.float64)
            yield Case(op, source, "transposed", of_transposed(convert), [random(SHAPE, source, g)],
                       EXACT)


def to(dtype):
    return lambda x: A._to_copy(x, dtype=dtype)  # x.to(x.dtype) would be no op at all


def convert_element_type(dtype):
    return lambda x: torch.ops.prims.convert_element_type(x, dtype)


def copy_cases(claims):
    op = "aten.clone.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "transposed", lambda x: x.t().clone(), [random(SHAPE, dtype, g)],
                   EXACT)
        yield Case(op, dtype, "stride0", lambda x: x.expand(4, 6).clone(),
                   [random((1, 6), dtype, g)], EXACT)
        yield Case(op, dtype, "contiguous", lambda x: x.t().contiguous(),
                   [with_edges(SHAPE, dtype, g)], EXACT)
    for name in ("tril", "triu"):
        op = f"aten.{name}.default"
        fn = getattr(torch, name)
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for diagonal in (0, -1, 2):
                yield Case(op, dtype, f"diagonal_{diagonal}", diagonal_of(fn, diagonal),
                           [with_edges((5, 7), dtype, g)], EXACT)
            yield Case(op, dtype, "batched_transposed", batched_transposed(fn),
                       [random((2, 6, 4), dtype, g)], EXACT)


def diagonal_of(fn, diagonal):
    return lambda x: fn(x, diagonal)


def batched_transposed(fn):
    return lambda x: fn(x.transpose(1, 2))


def cases(claims):
    yield from sized_cases(claims)
    yield from like_cases(claims)
    yield from fill_cases(claims)
    yield from arange_cases(claims)
    yield from conversion_cases(claims)
    yield from copy_cases(claims)
