"""repeat (what an affine instance norm does to its weight), and cumsum
with its backward (flip, cumsum, flip), over every claimed dtype: ranks 0
to 3, each dim, transposed and fused inputs, the dtype argument, and a
bool result Kiln refuses as eager does. cumsum accumulates as eager does,
so its float32, float64, bfloat16 and integer results are compared bit
for bit."""
import torch

from cases_common import CLOSE, EXACT, NAMES, Case, claimed, generator, random, refused

A = torch.ops.aten
HALF = (torch.float16, torch.bfloat16)

def training_graph(forward, wrt):
    """fn(grad, *inputs): the gradients of forward(*inputs) with respect
    to its first `wrt` inputs, as a training step's graph has them."""
    def fn(grad, *inputs):
        leaves = [t.detach().requires_grad_(True) if i < wrt else t
                  for i, t in enumerate(inputs)]
        return list(torch.autograd.grad(forward(*leaves), leaves[:wrt], grad))
    return fn


# --- repeat (an affine instance norm's weight), cumsum and flip ----------

# make_fx traces every parameter, defaults too: these close over their
# arguments instead.
def repeat_of(repeats):
    return lambda x: x.repeat(repeats)


def cumsum_of(dim, dtype=None):
    return lambda x: torch.cumsum(x, dim, dtype=dtype)


def flip_of(dims):
    return lambda x: torch.flip(x, dims)


def repeat_cases(claims):
    op = "aten.repeat.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        for variant, shape, repeats in (("1d", (4,), [3]), ("2d", (2, 3), [2, 1]),
                                        ("new_dims", (2, 3), [2, 1, 3]),
                                        ("zero", (2, 3), [0, 2])):
            yield Case(op, dtype, variant, repeat_of(repeats), [random(shape, dtype, g)], EXACT)
        yield Case(op, dtype, "transposed", lambda x: x.t().repeat(2, 2),
                   [random((3, 2), dtype, g)], EXACT)


def cumsum_check(dtype):
    """Bit for bit where Kiln accumulates in eager's type and order; float16
    references are float32 math (torch 1.13 has no float16 kernel)."""
    return CLOSE if dtype == torch.float16 else EXACT


def cumsum_cases(claims):
    op = "aten.cumsum.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        check = cumsum_check(dtype)
        x = random((5, 7), dtype, g)
        for dim in (0, 1, -1):
            yield Case(op, dtype, f"dim{dim}", cumsum_of(dim), [x], check)
        yield Case(op, dtype, "3d", lambda x: torch.cumsum(x, 1), [random((3, 4, 5), dtype, g)],
                   check)
        yield Case(op, dtype, "transposed", lambda x: torch.cumsum(x.t(), 1),
                   [random((7, 5), dtype, g)], check)
        yield Case(op, dtype, "long", lambda x: torch.cumsum(x, -1), [random((3, 1000), dtype, g)],
                   check)
        yield Case(op, dtype, "0d", lambda x: torch.cumsum(x, 0), [random((), dtype, g)], check)
        yield Case(op, dtype, "empty", lambda x: torch.cumsum(x, 1), [random((3, 0), dtype, g)],
                   check)
        # Fused: a pointwise producer inlined into the scan's body (a
        # 16-bit one unrounded, where eager rounds x * 2 + 1 first).
        if dtype != torch.bool:
            yield Case(op, dtype, "fused", lambda x: torch.cumsum(x * 2 + 1, 0), [x],
                       CLOSE if dtype in HALF else check, float32_reference=dtype in HALF)
        if dtype.is_floating_point:
            # The backward: flip, cumsum, flip.
            yield Case(op, dtype, "training",
                       training_graph(lambda x: torch.cumsum(x, 1), 1),
                       [random((3, 4, 5), dtype, g), random((3, 4, 5), dtype, g)], check)
    for dtype, result in ((torch.float32, torch.float64), (torch.int64, torch.float32),
                          (torch.bool, torch.int64)):
        if dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype], "dtype")
            yield Case(op, dtype, f"dtype_{NAMES[result]}", cumsum_of(1, result),
                       [random((4, 9), dtype, g)], EXACT)
    x = random((3, 4), torch.float32, generator(op, "refused"))
    yield refused(op, torch.float32, lambda x: x > 0, [x], [("dim", 0), ("dtype", torch.bool)])


def flip_cases(claims):
    op = "aten.flip.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = random((3, 4, 5), dtype, g)
        for dims in ([0], [1], [-1], [0, 2], [0, 1, 2]):
            yield Case(op, dtype, "dims" + "_".join(map(str, dims)), flip_of(dims), [x], EXACT)
        yield Case(op, dtype, "transposed", lambda x: torch.flip(x.t(), [1]),
                   [random((5, 4), dtype, g)], EXACT)
        yield Case(op, dtype, "fused", lambda x: torch.flip(x, [1]) + x,
                   [random((4, 4), dtype, g)], CLOSE if dtype in HALF else EXACT)
        if dtype.is_floating_point:
            yield Case(op, dtype, "cumsum_backward",
                       training_graph(lambda x: torch.cumsum(x, 0), 1),
                       [random((6, 3), dtype, g), random((6, 3), dtype, g)],
                       cumsum_check(dtype))


def cases(claims):
    yield from repeat_cases(claims)
    yield from cumsum_cases(claims)
    yield from flip_cases(claims)
