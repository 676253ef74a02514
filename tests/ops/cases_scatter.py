"""The index and scatter family (codegen/ops/scatter_reduce.cc): every
reduction of scatter_reduce, scatter's reduce=, index_reduce, with and
without self, over indices that repeat (folded in eager's order), put with
negative and repeated indices, masked_scatter with a broadcast mask,
diagonal_scatter, as_strided_scatter and segment_reduce, for each dtype the
table claims. Floats are held to tolerances that hold for any order of the
few elements folded into one; integers are exact."""
import torch

from cases_common import CLOSE, EXACT, NAMES, Case, claimed, generator, random

REDUCTIONS = ["sum", "prod", "mean", "amax", "amin"]


def check(dtype):
    return EXACT if not dtype.is_floating_point else CLOSE


def tolerance(dtype):
    return None if not dtype.is_floating_point else (1e-5, 1e-5)


def scatter_reduce_cases(claims):
    op = "aten.scatter_reduce.two"
    index = torch.tensor([[0, 3, 3, 0], [3, 0, 3, 2], [0, 0, 4, 3]])
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x, src = random((6, 4), dtype, g), random((3, 4), dtype, g)
        for reduce in REDUCTIONS:
            for include_self in (True, False):
                yield Case(op, dtype, f"{reduce}_{'with' if include_self else 'without'}_self",
                           lambda a, i, s, r=reduce, k=include_self:
                           a.scatter_reduce(0, i, s, r, include_self=k),
                           [x, index, src], check(dtype), tolerance=tolerance(dtype))
        yield Case(op, dtype, "dim_negative_transposed_src",
                   lambda a, i, s: a.scatter_reduce(-1, i, s.t(), "amax"),
                   [random((4, 6), dtype, g), index.t().contiguous(), src],
                   check(dtype), tolerance=tolerance(dtype))


def scatter_cases(claims):
    index = torch.tensor([[5, 5, 0, 1], [2, 2, 2, 2], [0, 4, 4, 5]])
    for op, variant, fn in [
            ("aten.scatter.reduce", "add", lambda a, i, s: a.scatter(1, i, s, reduce="add")),
            ("aten.scatter.reduce", "multiply",
             lambda a, i, s: a.scatter(1, i, s, reduce="multiply")),
            ("aten.scatter.value_reduce", "multiply",
             lambda a, i, s: a.scatter(1, i, 3, reduce="multiply")),
            ("aten.scatter.value_reduce", "add",
             lambda a, i, s: a.scatter(-1, i, 2, reduce="add"))]:
        for dtype in claimed(claims, op):
            g = generator(op, variant, NAMES[dtype])
            yield Case(op, dtype, variant, fn,
                       [random((3, 6), dtype, g), index, random((3, 4), dtype, g)],
                       check(dtype), tolerance=tolerance(dtype))


def index_reduce_cases(claims):
    op = "aten.index_reduce.default"
    index = torch.tensor([4, 0, 4, 4, 1, 0, 2])
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x, source = random((3, 5, 2), dtype, g), random((3, 7, 2), dtype, g)
        for reduce in ["prod", "mean", "amax", "amin"]:
            for include_self in (True, False):
                yield Case(op, dtype, f"{reduce}_{'with' if include_self else 'without'}_self",
                           lambda a, i, s, r=reduce, k=include_self:
                           a.index_reduce(-2, i, s, r, include_self=k),
                           [x, index, source], check(dtype), tolerance=tolerance(dtype))
        yield Case(op, dtype, "0d", lambda a, i, s: a.index_reduce(0, i, s, "amin"),
                   [random((), dtype, g), torch.tensor([0]), random((), dtype, g)], EXACT)


def put_cases(claims):
    op = "aten.put.default"
    index = torch.tensor([[0, -1, 5], [-12, 5, 6]])
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x, source = random((3, 4), dtype, g), random((2, 3), dtype, g)
        yield Case(op, dtype, "accumulate", lambda a, i, s: a.put(i, s, accumulate=True),
                   [x, index, source], check(dtype), tolerance=tolerance(dtype))
        yield Case(op, dtype, "write", lambda a, i, s: a.put(i, s),
                   [x, torch.tensor([[0, -1, 5], [-12, 7, 6]]), source], EXACT)
        yield Case(op, dtype, "0d", lambda a, i, s: a.put(i, s),
                   [random((), dtype, g), torch.tensor(0), random((1,), dtype, g)], EXACT)


def masked_scatter_cases(claims):
    op = "aten.masked_scatter.default"
    mask = torch.tensor([[True, False, True], [False, False, True]])
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "same_shape", lambda a, m, s: a.masked_scatter(m, s),
                   [random((2, 3), dtype, g), mask, random((4, 2), dtype, g)], EXACT)
        yield Case(op, dtype, "broadcast_self", lambda a, m, s: a.masked_scatter(m, s),
                   [random((3,), dtype, g), mask, random((6,), dtype, g)], EXACT)
        yield Case(op, dtype, "broadcast_mask", lambda a, m, s: a.masked_scatter(m, s),
                   [random((2, 3), dtype, g), mask[1], random((9,), dtype, g)], EXACT)


def diagonal_scatter_cases(claims):
    op = "aten.diagonal_scatter.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = random((4, 3, 5), dtype, g)
        for offset, dim1, dim2 in [(0, 0, 1), (2, 0, 1), (-2, 1, 0), (1, -1, 0)]:
            src = random(tuple(torch.diagonal(x, offset, dim1, dim2).shape), dtype, g)
            yield Case(op, dtype, f"offset{offset}_dims{dim1}{dim2}".replace("-", "m"),
                       lambda a, s, o=offset, d1=dim1, d2=dim2:
                       torch.diagonal_scatter(a, s, o, d1, d2), [x, src], EXACT)


def as_strided_scatter_cases(claims):
    op = "aten.as_strided_scatter.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "offset",
                   lambda a, s: torch.as_strided_scatter(a, s, (2, 2), (1, 2), 1),
                   [random((3, 3), dtype, g), random((2, 2), dtype, g)], EXACT)
        yield Case(op, dtype, "0d", lambda a, s: torch.as_strided_scatter(a, s, (), ()),
                   [random((1,), dtype, g), random((), dtype, g)], EXACT)


def segment_reduce_cases(claims):
    op = "aten.segment_reduce.default"
    lengths, offsets = torch.tensor([2, 0, 3, 1, 0]), torch.tensor([1, 1, 3, 5, 5])
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        data = random((6, 3), dtype, g)
        for reduce in ["sum", "prod", "mean", "max", "min"]:
            yield Case(op, dtype, f"{reduce}_lengths",
                       lambda d, n, r=reduce: torch.segment_reduce(d, r, lengths=n),
                       [data, lengths], CLOSE, tolerance=(1e-5, 1e-5))
            yield Case(op, dtype, f"{reduce}_offsets_initial",
                       lambda d, o, r=reduce: torch.segment_reduce(d, r, offsets=o, initial=2.5),
                       [data, offsets], CLOSE, tolerance=(1e-5, 1e-5))


def cases(claims):
    yield from scatter_reduce_cases(claims)
    yield from scatter_cases(claims)
    yield from index_reduce_cases(claims)
    yield from put_cases(claims)
    yield from masked_scatter_cases(claims)
    yield from diagonal_scatter_cases(claims)
    yield from as_strided_scatter_cases(claims)
    yield from segment_reduce_cases(claims)
