"""Sorting and selection (sort, topk, kthvalue, median, nanmedian, mode) in
every claimed dtype: edge values (NaN sorts as the largest, -0.0 equals
0.0), many ties (the position of each among equals must be eager's), rows
along the last dim and along a dim of a transposed input, and rows long
enough for topk's two algorithms (partial sort, selection). Values and
indices are compared exactly: these ops only choose elements."""
import torch

from cases_common import ERROR, EXACT, NAMES, Case, claimed, generator, random, with_edges


def ties(shape, dtype, g):
    """Few distinct values: ties everywhere (bools: two)."""
    return random(shape, dtype, g, scale=1.0).round().to(dtype) if dtype.is_floating_point \
        else random(shape, dtype, g, low=-3, high=3)


def cases(claims):
    op = "aten.sort.default"  # eager's unstable sort is stable up to 16 elements
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "edges", lambda a: list(torch.sort(a)),
                   [with_edges((3, 16), dtype, g)], EXACT)
        yield Case(op, dtype, "ties_descending_dim0", lambda a: list(torch.sort(a.t(), 0, True)),
                   [ties((5, 16), dtype, g)], EXACT)
        yield Case(op, dtype, "0d", lambda a: list(torch.sort(a)), [random((), dtype, g)], EXACT)
    op = "aten.sort.stable"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "ties", lambda a: list(torch.sort(a, stable=True)),
                   [ties((3, 300), dtype, g)], EXACT)
        yield Case(op, dtype, "descending_dim1", lambda a: list(
            torch.sort(a, dim=1, descending=True, stable=True)), [ties((4, 70, 3), dtype, g)], EXACT)
        yield Case(op, dtype, "argsort_edges", lambda a: a.argsort(stable=True),
                   [with_edges((2, 40), dtype, g)], EXACT)
    op = "aten.topk.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = ties((3, 400), dtype, g)
        yield Case(op, dtype, "partial_sort", lambda a: list(torch.topk(a, 5)), [x], EXACT)
        yield Case(op, dtype, "selection_smallest",
                   lambda a: list(torch.topk(a, 40, largest=False)), [x], EXACT)
        yield Case(op, dtype, "unsorted_dim0", lambda a: list(torch.topk(a.t(), 9, 0, True, False)),
                   [x], EXACT)
        yield Case(op, dtype, "edges", lambda a: list(torch.topk(a, 4)),
                   [with_edges((2, 16), dtype, g)], EXACT)
        # Eager raises on such a k while tracing; a graph that names it
        # is refused with the range.
        yield Case(op, dtype, "k_out_of_range", lambda a: list(torch.topk(a, 3)),
                   [random((2, 3), dtype, g)], ERROR,
                   error=("INVALID_ARGUMENT", "topk with k=4 along dim 1 of length 3: k must be "
                          "in [0, 3]"), manual=(op, [("k", 4)]))
    op = "aten.kthvalue.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "ties", lambda a: list(torch.kthvalue(a, 37)),
                   [ties((3, 100), dtype, g)], EXACT)
        yield Case(op, dtype, "k_out_of_range", lambda a: list(torch.kthvalue(a, 1)),
                   [random((2, 3), dtype, g)], ERROR,
                   error=("INVALID_ARGUMENT", "kthvalue with k=0 along dim 1 of length 3: k must "
                          "be in [1, 3]"), manual=(op, [("k", 0)]))
        yield Case(op, dtype, "edges_dim0_keepdim",
                   lambda a: list(torch.kthvalue(a, 2, 0, keepdim=True)),
                   [with_edges((16, 2), dtype, g)], EXACT)
    op = "aten.mode.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "ties", lambda a: list(torch.mode(a)), [ties((4, 50), dtype, g)],
                   EXACT)
        yield Case(op, dtype, "dim0_keepdim", lambda a: list(torch.mode(a, 0, keepdim=True)),
                   [ties((30, 3), dtype, g)], EXACT)
    for op, fn in [("aten.median.dim", torch.median), ("aten.nanmedian.dim", torch.nanmedian)]:
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            yield Case(op, dtype, "edges", lambda a: list(fn(a, 1)),
                       [with_edges((2, 16), dtype, g)], EXACT)
            yield Case(op, dtype, "ties_dim0_keepdim", lambda a: list(fn(a, 0, keepdim=True)),
                       [ties((41, 3), dtype, g)], EXACT)
    # Without a dim, eager's median partitions the values alone, so which
    # of -0.0 and 0.0 it returns when they meet at the middle is its
    # std::nth_element's choice, not the stable sort's: these inputs hold
    # no -0.0 (x + 0 is +0 for both zeros).
    for op, fn in [("aten.median.default", torch.median),
                   ("aten.nanmedian.default", torch.nanmedian)]:
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            yield Case(op, dtype, "edges", fn, [with_edges((4, 8), dtype, g) + 0], EXACT)
            yield Case(op, dtype, "ties", fn, [ties((5, 9), dtype, g) + 0], EXACT)
