"""Lookups: embedding, index_select and gather over every table dtype, with
int64 and (where eager takes them) int32 indices, repeated indices, the
first and last positions, 0-dim indices, transposed and sliced tables, and
out-of-range indices (which eager refuses with an IndexError, gather's a
RuntimeError, and so does Kiln, checking the index before the lookup runs:
one-node graphs built by hand).

Their backward ops, the scatter-adds embedding_dense_backward, index_add
and scatter_add: the same kinds of indices, many repeated (eager adds in
order, and so does Kiln: bit for bit; embedding_dense_backward rounds each
16-bit sum to the dtype, index_add and scatter_add sum in float32 and round
once), onto inputs and onto pointwise expressions, traced from training
steps, and out-of-range indices, which index_add refuses as eager does."""
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
        # Eager's IndexError, checked before the lookup (passes/check_lookups.h).
        yield Case(op, dtype, "out_of_range", reference, [weight, out_of_range], ERROR,
                   error=("OUT_OF_RANGE", "embedding: index -1 is out of bounds for dim 0 with "
                          "size 10"), manual=(op, []))
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
        # A 0-dim table: index 0 reads it (eager's only index in range).
        for variant, index in (("0d_table", torch.tensor([0])), ("0d_table_0d_index",
                                                                 torch.tensor(0))):
            yield Case(op, dtype, variant, lambda x, i: torch.index_select(x, 0, i),
                       [random((), dtype, g), index], EXACT)
        out_of_range = torch.tensor([6, 7, -1, 0, 1 << 40])

        def reference(x, i):
            result, inside = zero_out_of_range(x, i, 1, lambda t, j: torch.index_select(t, 1, j))
            return torch.where(inside, result, torch.zeros_like(result))
        # Eager's IndexError, checked before the lookup (passes/check_lookups.h).
        yield Case(op, dtype, "out_of_range", reference, [x, out_of_range], ERROR,
                   error=("OUT_OF_RANGE", "index_select: index 7 is out of bounds for dim 1 with "
                          "size 7"), manual=(op, [("dim", 1)]))
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
        for variant, index in (("0d_table", torch.tensor(0)), ("0d_table_1d_index",
                                                               torch.tensor([0]))):
            yield Case(op, dtype, variant, lambda x, i: torch.gather(x, -1, i),
                       [random((), dtype, g), index], EXACT)
        if dtype in (torch.float32, torch.float64):
            yield Case(op, dtype, "argmax_keepdim",
                       lambda x: torch.gather(x, 1, torch.argmax(x, 1, keepdim=True)), [x], EXACT)
        out_of_range = torch.tensor([[0, 7, -1], [6, 1 << 40, -8]])

        def reference(x, i):
            result, inside = zero_out_of_range(x, i, 1, lambda t, j: torch.gather(t, 1, j))
            return torch.where(inside, result, torch.zeros_like(result))
        # Eager's RuntimeError, checked before the lookup (passes/check_lookups.h).
        yield Case(op, dtype, "out_of_range", reference, [x, out_of_range], ERROR,
                   error=("FAILED_PRECONDITION", "gather: index 7 is out of bounds for dim 1 "
                          "with size 7"), manual=(op, [("dim", 1)]))
    x = random((4, 3), torch.float32, generator(op, "refused"))
    yield Case(op, torch.float32, "int32_index", lambda x, i: torch.gather(x, 1, i),
               [x, torch.tensor([[1, 0], [2, 2], [0, 1], [1, 1]], dtype=torch.int32)], EXACT)
    # Eager checks the index's dtype only when it has elements.
    yield Case(op, torch.float32, "empty_uint8_index", lambda x, i: torch.gather(x, 1, i),
               [x, torch.zeros((2, 0), dtype=torch.uint8)], EXACT)
    # An empty index may have any rank, and any sizes off the dim: the result
    # is empty in its shape.
    yield Case(op, torch.float32, "empty_index_of_another_rank",
               lambda x, i: torch.gather(x[0], 0, i), [x, torch.zeros((2, 0), dtype=torch.int64)],
               EXACT)
    yield Case(op, torch.float32, "empty_index_larger_off_dim", lambda x, i: torch.gather(x, 0, i),
               [x, torch.zeros((0, 9), dtype=torch.int64)], EXACT)
    yield Case(op, torch.float32, "int16_index", lambda x, i: torch.gather(x, 1, i.long()),
               [x, torch.tensor([[1]], dtype=torch.int16)], ERROR,
               error=("INVALID_ARGUMENT", "neither does eager PyTorch"), manual=(op, [("dim", 1)]))
    yield Case(op, torch.float32, "rank_mismatch", lambda x, i: x[0, :1],
               [x, torch.tensor([1])], ERROR,
               error=("INVALID_ARGUMENT", "not the input's 2"), manual=(op, [("dim", 1)]))
    yield Case(op, torch.float32, "index_too_large", lambda x, i: torch.gather(x[:, :1], 1, i[:4]),
               [x, torch.zeros((5, 1), dtype=torch.int64)], ERROR,
               error=("INVALID_ARGUMENT", "larger than the input's 4"), manual=(op, [("dim", 1)]))


def addends(shape, dtype, g, integers=False):
    """Values to scatter-add. float16 references are float32 math rounded
    once (op_cases.py), where eager and Kiln round every partial sum:
    float16's are small integers (as are `integers`), whose sums are exact
    in any order. The other dtypes' references are eager's own sums, in
    eager's order."""
    if dtype == torch.float16 or integers:
        return torch.randint(-4, 5, shape, generator=g).to(dtype)
    return random(shape, dtype, g)


def gradient_of(forward):
    """fn(grad, table, index): the gradient of forward(table, index) with
    respect to the table, as a training step's graph has it."""
    def fn(grad, table, index):
        table = table.detach().requires_grad_(True)
        return torch.autograd.grad(forward(table, index), table, grad)[0]
    return fn


def embedding_backward(num_weights, padding_idx=-1):
    return lambda grad, i: A.embedding_dense_backward(grad, i, num_weights, padding_idx, False)


def embedding_backward_cases(claims):
    op = "aten.embedding_dense_backward.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "2d_indices", embedding_backward(10),
                   [addends((3, 4, 6), dtype, g), indices((3, 4), 10, g)], EXACT)
        yield Case(op, dtype, "1d_indices", embedding_backward(10),
                   [addends((7, 6), dtype, g), indices((7,), 10, g)], EXACT)
        yield Case(op, dtype, "0d_index", embedding_backward(10),
                   [addends((6,), dtype, g), torch.tensor(9)], EXACT)
        yield Case(op, dtype, "int32", embedding_backward(10),
                   [addends((2, 5, 6), dtype, g), indices((2, 5), 10, g, torch.int32)], EXACT)
        # 48 positions onto 3 rows: long sums, whose order shows.
        yield Case(op, dtype, "repeated", embedding_backward(3),
                   [addends((48, 5), dtype, g), indices((48,), 3, g)], EXACT)
        yield Case(op, dtype, "padding_idx_row_stays_zero", embedding_backward(10, 2),
                   [addends((2, 2, 6), dtype, g), torch.tensor([[2, 1], [2, 9]])], EXACT)
        yield Case(op, dtype, "transposed_grad",
                   lambda grad, i: embedding_backward(10)(grad.t(), i),
                   [addends((6, 4), dtype, g), indices((4,), 10, g)], EXACT)
        # Eager's embedding_dense_backward skips out-of-range indices too.
        yield Case(op, dtype, "out_of_range_adds_nothing", embedding_backward(10),
                   [addends((2, 3, 6), dtype, g),
                    torch.tensor([[0, -1, 10], [9, 1 << 40, -(1 << 40)]])], EXACT)
        if dtype.is_floating_point:
            weight = random((10, 6), dtype, g)
            yield Case(op, dtype, "from_embedding", gradient_of(embed),
                       [addends((3, 4, 6), dtype, g), weight, indices((3, 4), 10, g)], EXACT)
            yield Case(op, dtype, "from_embedding_padding_idx",
                       gradient_of(lambda w, i: F.embedding(i, w, padding_idx=0)),
                       [addends((3, 4, 6), dtype, g), weight, indices((3, 4), 10, g)], EXACT)
    grad, index = random((2, 3), torch.float32, generator(op, "refused")), torch.tensor([1, 4])
    yield Case(op, torch.float32, "scale_grad_by_freq", lambda grad, i: torch.zeros(5, 3),
               [grad, index], ERROR, error=("UNIMPLEMENTED", "scale_grad_by_freq=True"),
               manual=(op, [("num_weights", 5), ("padding_idx", -1),
                            ("scale_grad_by_freq", True)]))
    yield Case(op, torch.float32, "float_indices", lambda grad, i: torch.zeros(5, 3),
               [grad, index.float()], ERROR,
               error=("INVALID_ARGUMENT", "neither does eager PyTorch"),
               manual=(op, [("num_weights", 5), ("padding_idx", -1),
                            ("scale_grad_by_freq", False)]))


def index_add(dim, **kwargs):
    return lambda x, i, source: torch.index_add(x, dim, i, source, **kwargs)


def summed_in_float32(cases):
    """Eager's bfloat16 index_add sums in float32 and rounds once on its
    fast path, but rounds each sum to bfloat16 where it takes its general
    loop (a 1-d self, an int32 index, alpha, a middle dim); Kiln always sums
    in float32, as eager's scatter_add: these cases' references are float32
    math rounded once."""
    for case in cases:
        if case.dtype == torch.bfloat16 and case.check == EXACT and not case.manual:
            case.float32_reference = True
        yield case


def index_add_cases(claims):
    op = "aten.index_add.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = addends((5, 7), dtype, g)
        yield Case(op, dtype, "dim0", index_add(0),
                   [x, indices((8,), 5, g), addends((8, 7), dtype, g)], EXACT)
        yield Case(op, dtype, "dim1", index_add(1),
                   [x, indices((4,), 7, g), addends((5, 4), dtype, g)], EXACT)
        yield Case(op, dtype, "dim_negative", index_add(-2),
                   [addends((3, 4, 6), dtype, g), indices((5,), 4, g),
                    addends((3, 5, 6), dtype, g)], EXACT)
        yield Case(op, dtype, "int32", index_add(1),
                   [x, indices((3,), 7, g, torch.int32), addends((5, 3), dtype, g)], EXACT)
        yield Case(op, dtype, "0d_index", index_add(1),
                   [x, torch.tensor(6), addends((5, 1), dtype, g)], EXACT)
        yield Case(op, dtype, "repeated", index_add(0),
                   [addends((3, 5), dtype, g), indices((40,), 3, g), addends((40, 5), dtype, g)],
                   EXACT)
        # -2 * source is exact, so eager's fused multiply-add rounds as
        # Kiln's multiply, then add.
        yield Case(op, dtype, "alpha", index_add(0, alpha=-2),
                   [x, indices((6,), 5, g), addends((6, 7), dtype, g)], EXACT)
        yield Case(op, dtype, "transposed_self",
                   lambda x, i, source: index_add(0)(x.t(), i, source),
                   [x, indices((6,), 7, g), addends((6, 5), dtype, g)], EXACT)
        # Kiln keeps 16-bit expressions inlined into a kernel in float32
        # where eager rounds them: integers, exact either way.
        yield Case(op, dtype, "onto_expressions",
                   lambda x, i, source: index_add(0)(x * 2, i, source - x[:3]),
                   [addends((5, 7), dtype, g, True), indices((3,), 5, g),
                    addends((3, 7), dtype, g, True)], EXACT)
        if dtype in (torch.float32, torch.float64, torch.bfloat16):
            # Eager rounds alpha to the dtype, then fuses the multiply-add.
            yield Case(op, dtype, "alpha_rounded_to_dtype", index_add(0, alpha=0.1),
                       [x, indices((6,), 5, g), addends((6, 7), dtype, g)])
        if dtype.is_floating_point:
            yield Case(op, dtype, "from_index_select",
                       gradient_of(lambda t, i: torch.index_select(t, 0, i)),
                       [addends((9, 7), dtype, g), x, indices((9,), 5, g)], EXACT)
        # Eager's IndexError: the kernel checks every index before it writes.
        yield Case(op, dtype, "out_of_range", lambda x, i, source: x,
                   [x, torch.tensor([6, 7, -1, 0, 1 << 40]), addends((5, 5), dtype, g)], ERROR,
                   error=("OUT_OF_RANGE", "index_add: index 7 is out of bounds for dim 1 with "
                          "size 7"), manual=(op, [("dim", 1)]))
    x = random((4, 3), torch.float32, generator(op, "refused"))
    yield Case(op, torch.float32, "source_float64", lambda x, i, source: x,
               [x, torch.tensor([1]), x[:1].double()], ERROR,
               error=("INVALID_ARGUMENT", "neither does eager PyTorch"), manual=(op, [("dim", 0)]))
    yield Case(op, torch.float32, "matrix_index", lambda x, i, source: x,
               [x, torch.tensor([[1]]), x[:1]], ERROR,
               error=("INVALID_ARGUMENT", "must be a vector"), manual=(op, [("dim", 0)]))
    yield Case(op, torch.float32, "index_length", lambda x, i, source: x,
               [x, torch.tensor([1, 2, 3]), x[:2]], ERROR,
               error=("INVALID_ARGUMENT", "source's size at dim 0 differ: 3 and 2"),
               manual=(op, [("dim", 0)]))


def scatter_add(dim):
    return lambda x, i, source: torch.scatter_add(x, dim, i, source)


def scatter_add_cases(claims):
    op = "aten.scatter_add.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = addends((5, 7), dtype, g)
        yield Case(op, dtype, "dim0", scatter_add(0),
                   [x, indices((3, 7), 5, g), addends((3, 7), dtype, g)], EXACT)
        yield Case(op, dtype, "dim1", scatter_add(1),
                   [x, indices((5, 9), 7, g), addends((5, 9), dtype, g)], EXACT)
        # The index may be smaller than src, and off `dim` than self.
        yield Case(op, dtype, "smaller_index", scatter_add(1),
                   [x, indices((2, 3), 7, g), addends((4, 5), dtype, g)], EXACT)
        # Along `dim` it may be longer than self: 24 rows onto 2.
        yield Case(op, dtype, "repeated", scatter_add(0),
                   [addends((2, 4), dtype, g), indices((24, 4), 2, g), addends((24, 4), dtype, g)],
                   EXACT)
        yield Case(op, dtype, "3d_dim_negative", scatter_add(-1),
                   [addends((2, 3, 4), dtype, g), indices((2, 3, 6), 4, g),
                    addends((2, 3, 6), dtype, g)], EXACT)
        yield Case(op, dtype, "transposed_src",
                   lambda x, i, source: scatter_add(1)(x, i, source.t()),
                   [x, indices((5, 4), 7, g), addends((4, 5), dtype, g)], EXACT)
        # Integers: see index_add's.
        yield Case(op, dtype, "onto_expressions",
                   lambda x, i, source: scatter_add(0)(x * 2, i, source - x[:3]),
                   [addends((5, 7), dtype, g, True), indices((3, 7), 5, g),
                    addends((3, 7), dtype, g, True)], EXACT)
        if dtype.is_floating_point:
            yield Case(op, dtype, "from_gather", gradient_of(lambda t, i: torch.gather(t, 1, i)),
                       [addends((5, 9), dtype, g), x, indices((5, 9), 7, g)], EXACT)
        out_of_range = torch.tensor([[0, 7, -1], [6, 1 << 40, -8]])

        def reference(x, i, source):
            inside = (i >= 0) & (i < x.shape[1])
            # Adding 0 at index 0 changes no sum: x has no -0.0.
            return torch.scatter_add(x, 1, torch.where(inside, i, torch.zeros_like(i)),
                                     torch.where(inside, source, torch.zeros_like(source)))
        yield Case(op, dtype, "out_of_range_adds_nothing", reference,
                   [x, out_of_range, addends((2, 3), dtype, g)], EXACT, manual=(op, [("dim", 1)]))
    x = random((4, 3), torch.float32, generator(op, "refused"))
    yield Case(op, torch.float32, "int32_index", scatter_add(1),
               [x, torch.tensor([[1, 0], [2, 2]], dtype=torch.int32), x], EXACT)
    yield Case(op, torch.float32, "int16_index", lambda x, i, source: x,
               [x, torch.tensor([[1]], dtype=torch.int16), x], ERROR,
               error=("INVALID_ARGUMENT", "neither does eager PyTorch"), manual=(op, [("dim", 1)]))
    yield Case(op, torch.float32, "rank_mismatch", lambda x, i, source: x,
               [x, torch.tensor([1]), x], ERROR,
               error=("INVALID_ARGUMENT", "not self's 2"), manual=(op, [("dim", 1)]))
    yield Case(op, torch.float32, "index_larger_than_src", lambda x, i, source: x,
               [x, torch.zeros((3, 1), dtype=torch.int64), x[:2]], ERROR,
               error=("INVALID_ARGUMENT", "larger than src's 2"), manual=(op, [("dim", 1)]))


def cases(claims):
    yield from embedding_cases(claims)
    yield from index_select_cases(claims)
    yield from gather_cases(claims)
    yield from embedding_backward_cases(claims)
    yield from summed_in_float32(index_add_cases(claims))
    yield from scatter_add_cases(claims)
