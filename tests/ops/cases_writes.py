"""Writes (codegen/ops/writes.cc): index_copy and scatter replace the
elements an index names, over every dtype they claim, along each dim, with
negative dims, 0-dim tensors, scatter's
scalar value, and an index narrower than `self` in scatter's other dims.
Indices never repeat, where eager leaves the element written unspecified.
Values are copied, so every case is exact."""
import torch

from cases_common import EXACT, NAMES, Case, claimed, generator, random


def distinct(count, high, g):
    """`count` distinct positions in [0, high), in random order."""
    return torch.randperm(high, generator=g)[:count]


def scatter_index(shape, dim, high, g):
    """A scatter index of `shape`: along `dim`, each line's positions are
    distinct positions of [0, high)."""
    lines = torch.stack([torch.randperm(high, generator=g)[:shape[dim]]
                         for _ in range(torch.Size(shape).numel() // shape[dim])])
    moved = list(shape[:dim]) + list(shape[dim + 1:]) + [shape[dim]]
    return lines.reshape(moved).movedim(-1, dim).contiguous()


def scatter_value(dim, value):
    return lambda x, i: torch.scatter(x, dim, i, value)


def index_copy_cases(claims):
    op = "aten.index_copy.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = random((5, 7), dtype, g)
        yield Case(op, dtype, "dim0", lambda x, i, s: torch.index_copy(x, 0, i, s),
                   [x, distinct(3, 5, g), random((3, 7), dtype, g)], EXACT)
        yield Case(op, dtype, "dim1", lambda x, i, s: torch.index_copy(x, 1, i, s),
                   [x, distinct(4, 7, g), random((5, 4), dtype, g)], EXACT)
        yield Case(op, dtype, "dim_negative", lambda x, i, s: torch.index_copy(x, -2, i, s),
                   [random((3, 4, 6), dtype, g), distinct(2, 4, g), random((3, 2, 6), dtype, g)],
                   EXACT)
        yield Case(op, dtype, "0d", lambda x, i, s: torch.index_copy(x, 0, i, s),
                   [random((), dtype, g), torch.tensor([0]), random((), dtype, g)], EXACT)


def scatter_cases(claims):
    op = "aten.scatter.src"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = random((5, 7), dtype, g)
        yield Case(op, dtype, "dim0", lambda x, i, s: torch.scatter(x, 0, i, s),
                   [x, scatter_index((3, 7), 0, 5, g), random((3, 7), dtype, g)], EXACT)
        yield Case(op, dtype, "dim1_narrower", lambda x, i, s: torch.scatter(x, 1, i, s),
                   [x, scatter_index((4, 3), 1, 7, g), random((5, 6), dtype, g)], EXACT)
        yield Case(op, dtype, "dim_negative", lambda x, i, s: torch.scatter(x, -1, i, s),
                   [random((3, 4, 6), dtype, g), scatter_index((3, 4, 2), 2, 6, g),
                    random((3, 4, 2), dtype, g)], EXACT)
    op = "aten.scatter.value"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        value = True if dtype == torch.bool else 3
        yield Case(op, dtype, "dim0", scatter_value(0, value),
                   [random((5, 7), dtype, g), scatter_index((2, 7), 0, 5, g)], EXACT)
        yield Case(op, dtype, "dim1", scatter_value(1, value),
                   [random((5, 7), dtype, g), scatter_index((5, 3), 1, 7, g)], EXACT)


def cases(claims):
    yield from index_copy_cases(claims)
    yield from scatter_cases(claims)
