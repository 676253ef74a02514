"""Lookups: embedding, index_select and gather over every table dtype, with
int64 and (where eager takes them) int32 indices, repeated indices, the
first and last positions, 0-dim indices, transposed and sliced tables, and
out-of-range indices (which eager refuses with an IndexError and Kiln reads
as 0, never touching memory: one-node graphs built by hand, the reference
computed here)."""
import torch
import torch.nn.functional as F

from cases_common import ERROR, EXACT, NAMES, Case, claimed, generator, random

A = torch.ops.aten


def indices(shape, high, g, dtype=torch.int64):
    """Random indices in [0, high) with the first and last positions at the
    front."""
    index = torch.randint(0, high, shape, generator=g).flatten()
    index[:2] = torch.tensor([0, high - 1])[:index.numel()]
    return index.reshape(shape).to(dtype)


def zero_out_of_range(table, index, dim, lookup):
    """`lookup` with each out-of-range index read as 0 (Kiln's policy)."""
    size = table.shape[dim]
    inside = (index >= 0) & (index < size)
    return lookup(table, torch.where(inside, index, torch.zeros_like(index))), inside


def embed(w, i):
    return F.embedding(i, w)


def embedding_cases(claims):
    op = "aten.embedding.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        weight = random((10, 6), dtype, g)
        yield Case(op, dtype, "2d_indices", embed, [weight, indices((3, 4), 10, g)], EXACT)
        yield Case(op, dtype, "1d_indices", embed, [weight, indices((7,), 10, g)], EXACT)
        yield Case(op, dtype, "0d_index", embed, [weight, torch.tensor(9)], EXACT)
        yield Case(op, dtype, "int32", embed,
                   [weight, indices((2, 5), 10, g, torch.int32)], EXACT)
        yield Case(op, dtype, "padding_idx", lambda w, i: F.embedding(i, w, padding_idx=2),
                   [weight, torch.tensor([[2, 1], [2, 9]])], EXACT)
        yield Case(op, dtype, "transposed_weight", lambda w, i: embed(w.t(), i),
                   [random((6, 10), dtype, g), indices((4, 3), 10, g)], EXACT)
        yield Case(op, dtype, "sliced_weight", lambda w, i: embed(w[2:, 1:4], i),
                   [weight, indices((5,), 8, g)], EXACT)
        yield Case(op, dtype, "then_add", lambda w, i, b: embed(w, i) + b,
                   [weight, indices((3, 4), 10, g), random((6,), dtype, g)], EXACT)
        out_of_range = torch.tensor([[0, -1, 10], [9, 1 << 40, -(1 << 40)]])

        def reference(w, i):
            result, inside = zero_out_of_range(w, i, 0, embed)
            return torch.where(inside.unsqueeze(-1), result, torch.zeros_like(result))
        yield Case(op, dtype, "out_of_range_reads_zero", reference, [weight, out_of_range], EXACT,
                   manual=(op, []))
    weight = random((4, 3), torch.float32, generator(op, "refused"))
    yield Case(op, torch.float32, "float_indices", lambda w, i: w[:1],
               [weight, torch.tensor([1.0])], ERROR,
               error=("INVALID_ARGUMENT", "neither does eager PyTorch"), manual=(op, []))
    yield Case(op, torch.float32, "1d_weight", lambda w, i: w[i], [weight[0], torch.tensor([1])],
               ERROR, error=("INVALID_ARGUMENT", "'weight' must be 2-D"), manual=(op, []))


def index_select_cases(claims):
    op = "aten.index_select.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = random((5, 7), dtype, g)
        yield Case(op, dtype, "dim0", lambda x, i: torch.index_select(x, 0, i),
                   [x, indices((8,), 5, g)], EXACT)
        yield Case(op, dtype, "dim1", lambda x, i: torch.index_select(x, 1, i),
                   [x, indices((4,), 7, g)], EXACT)
        yield Case(op, dtype, "dim_negative", lambda x, i: torch.index_select(x, -2, i),
                   [random((3, 4, 6), dtype, g), indices((5,), 4, g)], EXACT)
        yield Case(op, dtype, "int32", lambda x, i: torch.index_select(x, 1, i),
                   [x, indices((3,), 7, g, torch.int32)], EXACT)
        yield Case(op, dtype, "0d_index", lambda x, i: torch.index_select(x, 1, i),
                   [x, torch.tensor(6)], EXACT)
        yield Case(op, dtype, "transposed", lambda x, i: torch.index_select(x.t(), 0, i),
                   [x, indices((6,), 7, g)], EXACT)
        yield Case(op, dtype, "1d", lambda x, i: torch.index_select(x, 0, i),
                   [random((9,), dtype, g), indices((12,), 9, g)], EXACT)
        out_of_range = torch.tensor([6, 7, -1, 0, 1 << 40])

        def reference(x, i):
            result, inside = zero_out_of_range(x, i, 1, lambda t, j: torch.index_select(t, 1, j))
            return torch.where(inside, result, torch.zeros_like(result))
        yield Case(op, dtype, "out_of_range_reads_zero", reference, [x, out_of_range], EXACT,
                   manual=(op, [("dim", 1)]))
    x = random((4, 3), torch.float32, generator(op, "refused"))
    yield Case(op, torch.float32, "matrix_index", lambda x, i: x[i], [x, torch.tensor([[1]])],
               ERROR, error=("INVALID_ARGUMENT", "must be a vector"), manual=(op, [("dim", 0)]))
    yield Case(op, torch.float32, "float_index", lambda x, i: x[i.long()],
               [x, torch.tensor([1.0])], ERROR,
               error=("INVALID_ARGUMENT", "neither does eager PyTorch"), manual=(op, [("dim", 0)]))


def gather_cases(claims):
    op = "aten.gather.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = random((5, 7), dtype, g)
        yield Case(op, dtype, "dim1", lambda x, i: torch.gather(x, 1, i),
                   [x, indices((5, 9), 7, g)], EXACT)
        yield Case(op, dtype, "dim0", lambda x, i: torch.gather(x, 0, i),
                   [x, indices((3, 7), 5, g)], EXACT)
        # Off the gathered dim the index may be smaller than the input.
        yield Case(op, dtype, "smaller_index", lambda x, i: torch.gather(x, 1, i),
                   [x, indices((2, 3), 7, g)], EXACT)
        yield Case(op, dtype, "3d_dim_negative", lambda x, i: torch.gather(x, -1, i),
                   [random((2, 3, 4), dtype, g), indices((2, 3, 6), 4, g)], EXACT)
        yield Case(op, dtype, "transposed", lambda x, i: torch.gather(x.t(), 1, i),
                   [x, indices((7, 4), 5, g)], EXACT)
        if dtype in (torch.float32, torch.float64):
            yield Case(op, dtype, "argmax_keepdim",
                       lambda x: torch.gather(x, 1, torch.argmax(x, 1, keepdim=True)), [x], EXACT)
        out_of_range = torch.tensor([[0, 7, -1], [6, 1 << 40, -8]])

        def reference(x, i):
            result, inside = zero_out_of_range(x, i, 1, lambda t, j: torch.gather(t, 1, j))
            return torch.where(inside, result, torch.zeros_like(result))
        yield Case(op, dtype, "out_of_range_reads_zero", reference, [x, out_of_range], EXACT,
                   manual=(op, [("dim", 1)]))
    x = random((4, 3), torch.float32, generator(op, "refused"))
    yield Case(op, torch.float32, "int32_index", lambda x, i: torch.gather(x, 1, i.long()),
               [x, torch.tensor([[1]], dtype=torch.int32)], ERROR,
               error=("INVALID_ARGUMENT", "neither does eager PyTorch"), manual=(op, [("dim", 1)]))
    yield Case(op, torch.float32, "rank_mismatch", lambda x, i: x[0, :1],
               [x, torch.tensor([1])], ERROR,
               error=("INVALID_ARGUMENT", "not the input's 2"), manual=(op, [("dim", 1)]))
    yield Case(op, torch.float32, "index_too_large", lambda x, i: torch.gather(x[:, :1], 1, i[:4]),
               [x, torch.zeros((5, 1), dtype=torch.int64)], ERROR,
               error=("INVALID_ARGUMENT", "larger than the input's 4"), manual=(op, [("dim", 1)]))


def cases(claims):
    yield from embedding_cases(claims)
    yield from index_select_cases(claims)
    yield from gather_cases(claims)
