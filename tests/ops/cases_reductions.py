"""Reductions (sum, prod, amax, amin, argmax, argmin, max.dim, min.dim) and
the composites over them (mean, var, std), over any dims with and without keepdim, on
contiguous, permuted and stride-0 inputs, with random and edge values."""
import torch

from cases_common import (bfloat16_from_float32, CLOSE, EXACT, NAMES, Case, claimed, generator, random, refused, unary,
                          with_edges)

SHAPE = (4, 6, 10)
DIMS = [[0], [1], [2], [-1], [0, 2], [1, 2], [0, 1, 2]]




def near_one(shape, dtype, g):
    """Values whose products neither overflow nor vanish."""
    if not dtype.is_floating_point:
        return torch.randint(-2, 3, shape, generator=g).to(dtype)
    magnitude = torch.rand(shape, generator=g, dtype=torch.float64) + 0.5
    sign = torch.where(torch.rand(shape, generator=g) < 0.2, -1.0, 1.0).double()
    return (magnitude * sign).to(dtype)


def reduction_layouts(op, dtype, reduce, make, check=CLOSE, dims=DIMS, float32_reference=False):
    """reduce(x, dims, keepdim) over each dim list and keepdim, then on
    permuted, stride-0, long (the vectorized lanes) and edge-value inputs."""
    g = generator(op, NAMES[dtype])
    x = make(SHAPE, dtype, g)
    for dim in dims:
        for keepdim in (False, True):
            yield Case(op, dtype, f"dim{dim}_keepdim{keepdim}".replace(" ", ""),
                       unary(reduce, dim, keepdim), [x], check,
                       float32_reference=float32_reference)
    last = dims[-1]
    yield Case(op, dtype, "permuted", lambda x: reduce(x.permute(2, 0, 1), last, False),
               [make((6, 10, 4), dtype, g)], check, float32_reference=float32_reference)
    yield Case(op, dtype, "stride0", lambda x: reduce(x.expand(4, 6, 10), last, True),
               [make((1, 6, 10), dtype, g)], check, float32_reference=float32_reference)
    yield Case(op, dtype, "long", lambda x: reduce(x, [-1], False),
               [make((3, 200), dtype, g)], check, float32_reference=float32_reference)
    # Down columns (emit/reduction.h FoldsColumns): runs of 64 rows and a
    # short last one, a full block of 256 columns and a short one.
    yield Case(op, dtype, "columns", lambda x: reduce(x, [0], False),
               [make((150, 300), dtype, g)], check, float32_reference=float32_reference)
    if any(len(d) > 1 for d in dims):
        yield Case(op, dtype, "columns_two_dims", lambda x: reduce(x, [0, 1], False),
                   [make((3, 5, 40), dtype, g)], check, float32_reference=float32_reference)
    if dtype != torch.bool:
        yield Case(op, dtype, "edges", unary(reduce, dims[1], False),
                   [with_edges(SHAPE, dtype, g)], check, float32_reference=float32_reference)


def sum_dims(x, dim, keepdim):
    return torch.sum(x, dim, keepdim)


def prod_dim(x, dim, keepdim):
    return torch.prod(x, dim[0] if isinstance(dim, list) else dim, keepdim)


def arg(name):
    def fn(x, dim, keepdim):
        return getattr(torch, name)(x, dim[0] if isinstance(dim, list) else dim, keepdim)
    return fn



def ties(op, dtype, fn):
    """fn over rows of few distinct values: the first occurrence wins (and
    NaN is the extreme)."""
    g = generator(op, NAMES[dtype], "ties")
    return Case(op, dtype, "ties", fn, [torch.randint(0, 3, (5, 12), generator=g).to(dtype)], EXACT)


def values_and_positions(name):
    """x.max(dim) or x.min(dim): both of its results."""
    def fn(x, dim, keepdim):
        return tuple(getattr(torch, name)(x, dim[0] if isinstance(dim, list) else dim, keepdim))
    return fn


def cases(claims):
    return bfloat16_from_float32(all_cases(claims))


def of_transposed(fn):
    return lambda x: fn(x.transpose(0, 2))


def all_cases(claims):
    op = "aten.sum.dim_IntList"
    for dtype in claimed(claims, op):
        yield from reduction_layouts(op, dtype, sum_dims, random)
        g = generator(op, NAMES[dtype], "dtype")
        for out in (torch.float64, torch.float32):
            if dtype != out:
                yield Case(op, dtype, f"dtype_{NAMES[out]}", unary(torch.sum, [1], dtype=out),
                           [random(SHAPE, dtype, g)])
    op = "aten.sum.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "all", torch.sum, [random(SHAPE, dtype, g)])
        yield Case(op, dtype, "transposed", lambda x: torch.sum(x.t()), [random((40, 6), dtype, g)])
    op = "aten.prod.dim_int"
    for dtype in claimed(claims, op):
        yield from reduction_layouts(op, dtype, prod_dim, near_one, dims=[[0], [1], [2], [-1]])
    op = "aten.prod.default"
    for dtype in claimed(claims, op):
        yield Case(op, dtype, "all", torch.prod, [near_one((3, 8), dtype, generator(op, dtype))])
    for name in ("amax", "amin"):
        op = f"aten.{name}.default"
        for dtype in claimed(claims, op):
            yield from reduction_layouts(op, dtype, getattr(torch, name), random, EXACT)
    for name in ("argmax", "argmin"):
        op = f"aten.{name}.default"
        fn = arg(name)
        for dtype in claimed(claims, op):
            yield from reduction_layouts(op, dtype, fn, random, EXACT, dims=[[0], [1], [2], [-1]])
            g = generator(op, NAMES[dtype], "all")
            yield Case(op, dtype, "all", getattr(torch, name), [random(SHAPE, dtype, g)], EXACT)
            yield ties(op, dtype, unary(getattr(torch, name), 1))
        yield refused(op, torch.bool, lambda x: torch.zeros((), dtype=torch.int64),
                      [random(SHAPE, torch.bool, generator(op))])
    for name in ("max", "min"):
        op = f"aten.{name}.dim"
        fn = values_and_positions(name)
        for dtype in claimed(claims, op):
            yield from reduction_layouts(op, dtype, fn, random, EXACT, dims=[[0], [1], [2], [-1]])
            yield ties(op, dtype, unary(fn, 1, False))
    # x.max() and x.min(): every element, NaN first.
    for name in ("max", "min"):
        op = f"aten.{name}.default"
        fn = getattr(torch, name)
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            yield Case(op, dtype, "all", fn, [random(SHAPE, dtype, g)], EXACT)
            yield Case(op, dtype, "transposed", of_transposed(fn),
                       [random(SHAPE[::-1], dtype, g)], EXACT)
            yield Case(op, dtype, "edges", fn, [with_edges(SHAPE, dtype, g)], EXACT)
    # A reduced dim of size 0 (an empty slice): sum 0, prod 1, mean NaN.
    g = generator("empty reductions")
    x = random((3, 5, 4), torch.float32, g)
    yield Case("aten.sum.dim_IntList", torch.float32, "empty_dim",
               lambda x: torch.sum(x[:, 5:], [1]), [x])
    yield Case("aten.prod.dim_int", torch.float32, "empty_dim", lambda x: torch.prod(x[:, 5:], 1),
               [x])
    yield Case("aten.mean.dim", torch.float32, "empty_dim", lambda x: torch.mean(x[:, 5:], [1]),
               [x])
    # An empty graph input: torch's strides for [3, 0, 4] are [4, 4, 1].
    yield Case("aten.sum.dim_IntList", torch.float32, "empty_input", unary(torch.sum, [1]),
               [random((3, 0, 4), torch.float32, g)])
    g = generator("grouped reductions")
    yield Case("aten.amax.default", torch.float32, "grouped_with_sum",
               lambda x: (x.sum(0), x.amax(0)), [random((4, 10), torch.float32, g)], EXACT)
    yield from composite_cases(claims)


def composite_cases(claims):
    op = "aten.mean.dim"
    for dtype in claimed(claims, op):
        yield from reduction_layouts(op, dtype, torch.mean, random)
    op = "aten.mean.default"
    for dtype in claimed(claims, op):
        yield Case(op, dtype, "all", torch.mean, [random(SHAPE, dtype, generator(op, dtype))])
    for name in ("var", "std"):
        op = f"aten.{name}.correction"
        for dtype in claimed(claims, op):
            for correction in (0, 1, 2):
                fn = getattr(torch, name)
                def reduce(x, dim, keepdim, fn=fn, correction=correction):
                    return fn(x, dim, correction=correction, keepdim=keepdim)
                for case in reduction_layouts(op, dtype, reduce, random,
                                              dims=[[0], [2], [0, 2]]):
                    case.variant = f"correction{correction}_{case.variant}"
                    yield case
            g = generator(op, NAMES[dtype], "all")
            yield Case(op, dtype, "all", getattr(torch, name), [random(SHAPE, dtype, g)])
