"""Matrix products (mm, bmm, addbmm) in every claimed dtype, with operands of any
strides: contiguous, transposed, sliced (no unit stride), stride 0
(expanded), and batch-broadcast."""
import torch
import torch.nn.functional as F

from cases_common import bfloat16_from_float32, NAMES, Case, claimed, edges, generator, random, with_edges



def cases(claims):
    yield from bfloat16_from_float32(all_cases(claims))
    yield from bfloat16_from_float32(addbmm_cases(claims))


def all_cases(claims):
    op = "aten.mm.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        a, b = random((5, 7), dtype, g), random((7, 6), dtype, g)
        yield Case(op, dtype, "contiguous", torch.mm, [a, b])
        yield Case(op, dtype, "transposed_left", lambda a, b: a.t() @ b,
                   [random((7, 5), dtype, g), b])
        yield Case(op, dtype, "transposed_both", lambda a, b: a.t() @ b.t(),
                   [random((7, 5), dtype, g), random((6, 7), dtype, g)])
        yield Case(op, dtype, "self_transpose", lambda x: x @ x.t(), [a])
        yield Case(op, dtype, "sliced", lambda a, b: a[:, ::2] @ b[::2, 1:],
                   [random((5, 14), dtype, g), random((14, 7), dtype, g)])
        yield Case(op, dtype, "stride0", lambda a, b: a.expand(5, 7) @ b,
                   [random((1, 7), dtype, g), b])
        yield Case(op, dtype, "vector_shapes", lambda a, b: a @ b,
                   [random((1, 7), dtype, g), random((7, 1), dtype, g)])
        # NaN and infinities propagate through the sums as in eager. (Not
        # the largest finite values: whether their sums overflow before an
        # infinity of the other sign arrives depends on the BLAS's order.)
        values = [v for v in edges(dtype) if abs(v) != torch.finfo(dtype).max]
        yield Case(op, dtype, "edges", torch.mm, [with_edges((5, 7), dtype, g, values), b])
        yield Case(op, dtype, "larger", torch.mm,
                   [random((33, 65), dtype, g, scale=0.3), random((65, 17), dtype, g, scale=0.3)])
    # Linear -> elementwise -> Linear at a small batch runs in transposed
    # space (codegen/passes/transpose_linear.h): with a bias, with a
    # float64 0-d operand (which must not widen the result), a per-row
    # [batch, 1] operand and a where mask, and with the result reshaped
    # (a view of the product, which keeps the pair as written).
    if torch.float32 in claimed(claims, op):
        g = generator(op, "linear_pairs")
        x, w1, b1, w2 = (random((4, 8), torch.float32, g), random((16, 8), torch.float32, g),
                         random((16,), torch.float32, g), random((8, 16), torch.float32, g))
        yield Case(op, torch.float32, "linear_pair",
                   lambda x, w1, b1, w2: F.gelu(x @ w1.t() + b1) @ w2.t(), [x, w1, b1, w2])
        yield Case(op, torch.float32, "linear_pair_0d_float64",
                   lambda x, w1, c, w2: torch.relu(x @ w1.t() * c) @ w2.t(),
                   [x, w1, torch.tensor(0.5, dtype=torch.float64), w2])
        yield Case(op, torch.float32, "linear_pair_row_scale_and_mask",
                   lambda x, w1, s, m, w2: torch.where(m, (x @ w1.t()) * s, 0.0) @ w2.t(),
                   [x, w1, random((4, 1), torch.float32, g), random((4, 16), torch.float32, g) > 0,
                    w2])
        yield Case(op, torch.float32, "linear_pair_reshaped",
                   lambda x, w1, w2: (torch.tanh(x @ w1.t()) @ w2.t()).reshape(-1),
                   [x, w1, w2])
    op = "aten.bmm.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        a, b = random((3, 5, 7), dtype, g), random((3, 7, 6), dtype, g)
        yield Case(op, dtype, "contiguous", torch.bmm, [a, b])
        yield Case(op, dtype, "transposed", lambda a, b: a @ b.transpose(1, 2),
                   [a, random((3, 6, 7), dtype, g)])
        yield Case(op, dtype, "batch_broadcast", lambda a, b: torch.bmm(a, b.expand(3, 7, 6)),
                   [a, random((1, 7, 6), dtype, g)])
        yield Case(op, dtype, "batch_major_transposed",
                   lambda a, b: torch.bmm(a.permute(1, 0, 2), b),
                   [random((5, 3, 7), dtype, g), b])
        yield Case(op, dtype, "attention_scores", lambda q, k: q @ k.transpose(-2, -1),
                   [random((2, 3, 8, 4), dtype, g), random((2, 3, 8, 4), dtype, g)])


def addbmm_cases(claims):
    """addbmm: beta * self + alpha * the sum of the batch's products."""
    op = "aten.addbmm.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        a, m = random((3, 5, 7), dtype, g), random((3, 7, 6), dtype, g)
        yield Case(op, dtype, "plain", torch.addbmm, [random((5, 6), dtype, g), a, m])
        yield Case(op, dtype, "scaled_broadcast",
                   lambda bias, a, m: torch.addbmm(bias, a, m, beta=0.5, alpha=2),
                   [random((6,), dtype, g), a, m])
        yield Case(op, dtype, "transposed",
                   lambda bias, a, m: torch.addbmm(bias, a.transpose(1, 2), m.permute(1, 0, 2)),
                   [random((5, 6), dtype, g), random((3, 7, 5), dtype, g),
                    random((7, 3, 6), dtype, g)])
        # beta = 0 ignores self, NaN included.
        yield Case(op, dtype, "beta0", lambda bias, a, m: torch.addbmm(bias, a, m, beta=0),
                   [torch.full((5, 6), float("nan"), dtype=dtype), a, m])
