"""The ops around convolutions (issue 16): batch norm in eval and training
mode, group norm, instance norm (a training-mode batch norm, as make_fx
traces it, after a repeat of an affine one's weight), their backward ops
from make_fx training graphs, weight norm, and cumsum with its backward
(flip, cumsum, flip), over every claimed dtype: ranks 2 to 4, weight and bias present
and absent, all results, and the inputs Kiln refuses as eager does.

bfloat16 norms take their reference from float32 math rounded to bfloat16
(eager's kernels keep bfloat16 statistics; Kiln keeps float32 ones).
cumsum accumulates as eager does, so its float32, float64, bfloat16 and
integer results are compared bit for bit."""
import torch
import torch.nn.functional as F

from cases_common import CLOSE, EXACT, NAMES, Case, claimed, generator, random, refused

A = torch.ops.aten
HALF = (torch.float16, torch.bfloat16)

# Input shapes [N, C, ...] of rank 4, 3 and 2, four channels each.
SHAPES = {"4d": (2, 4, 3, 5), "3d": (3, 4, 7), "2d": (6, 4)}


def variance(shape, dtype, g):
    """Positive values of the order of 1: a running variance."""
    return (torch.rand(shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)


def half_reference(case):
    """bfloat16: float32 math rounded (Kiln computes 16-bit norms in
    float32; eager's bfloat16 kernels round their statistics)."""
    case.float32_reference = case.float32_reference or case.dtype == torch.bfloat16
    return case


def training_graph(forward, wrt):
    """fn(grad, *inputs): the gradients of forward(*inputs) with respect
    to its first `wrt` inputs, as a training step's graph has them."""
    def fn(grad, *inputs):
        leaves = [t.detach().requires_grad_(True) if i < wrt else t
                  for i, t in enumerate(inputs)]
        return list(torch.autograd.grad(forward(*leaves), leaves[:wrt], grad))
    return fn


# --- batch norm ----------------------------------------------------------

def batch_norm(training, eps=1e-5):
    return lambda x, w, b, mean, var: F.batch_norm(x, mean, var, w, b, training, 0.1, eps)


def batch_norm_plain(training):
    return lambda x, mean, var: F.batch_norm(x, mean, var, None, None, training)


def batch_norm_weight_only(training):
    return lambda x, w, mean, var: F.batch_norm(x, mean, var, w, None, training, 0.1, 1e-3)


def batch_norm_relu(training):
    """A convolution's output scaled and shifted, then an activation: one
    pass in eval mode."""
    return lambda x, w, b, mean, var: torch.relu(F.batch_norm(x * 2, mean, var, w, b, training))


def batch_norm_all_results(training):
    return lambda x, w, b, mean, var: list(
        A.native_batch_norm(x, w, b, mean, var, training, 0.1, 1e-5))


def float16_eval_reference(dtype, training):
    """float16 graphs (meta kernels) declare eval's save_mean and save_invstd
    [C] float32, where eager's CPU kernel makes them empty: Kiln gives the
    running mean and 1 / sqrt(running_var + eps)."""
    if dtype != torch.float16 or training:
        return None

    def reference(x, w, b, mean, var):
        out = A.native_batch_norm(x, w, b, mean, var, False, 0.1, 1e-5)[0]
        return [out, mean, 1 / torch.sqrt(var + 1e-5)]
    return reference


def batch_norm_parameters(channels, dtype, g, parameters=None):
    """weight, bias, running_mean, running_var (parameters in `parameters`'
    dtype, the input's by default)."""
    dtype = parameters or dtype
    return [random((channels,), dtype, g), random((channels,), dtype, g),
            random((channels,), dtype, g, scale=0.5), variance((channels,), dtype, g)]


def batch_norm_cases(claims):
    op = "aten.native_batch_norm.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        for mode, training in (("eval", False), ("train", True)):
            for name, shape in SHAPES.items():
                yield Case(op, dtype, f"{mode}_{name}", batch_norm(training),
                           [random(shape, dtype, g)] + batch_norm_parameters(4, dtype, g))
            x = random(SHAPES["4d"], dtype, g)
            _, _, mean, var = batch_norm_parameters(4, dtype, g)
            yield Case(op, dtype, f"{mode}_plain", batch_norm_plain(training), [x, mean, var])
            w = random((4,), dtype, g)
            yield Case(op, dtype, f"{mode}_weight_only", batch_norm_weight_only(training),
                       [x, w, mean, var])
            yield Case(op, dtype, f"{mode}_relu", batch_norm_relu(training),
                       [x] + batch_norm_parameters(4, dtype, g))
        # Training without running statistics (nn.BatchNorm2d with
        # track_running_stats=False), all three results.
        yield Case(op, dtype, "train_all_results",
                   lambda x, w, b: list(A.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)),
                   [random(SHAPES["4d"], dtype, g), random((4,), dtype, g),
                    random((4,), dtype, g)])
        yield Case(op, dtype, "train_no_statistics",
                   lambda x: F.batch_norm(x, None, None, training=True),
                   [random(SHAPES["3d"], dtype, g)])
        # Eval: save_mean and save_invstd are empty as eager's; float16
        # graphs (meta kernels) declare them [C] float32.
        yield Case(op, dtype, "eval_all_results", batch_norm_all_results(False),
                   [random(SHAPES["4d"], dtype, g)] + batch_norm_parameters(4, dtype, g),
                   reference_fn=float16_eval_reference(dtype, False))
        if dtype in HALF:
            # Eager's mixed precision: float32 parameters and statistics.
            for mode, training in (("eval", False), ("train", True)):
                yield Case(op, dtype, f"{mode}_float32_parameters",
                           batch_norm_all_results(training),
                           [random(SHAPES["4d"], dtype, g)]
                           + batch_norm_parameters(4, dtype, g, torch.float32),
                           reference_fn=float16_eval_reference(dtype, training))
        else:
            # x ~ 1000 +- 2: the batch's variance cancels (see the layer norm
            # case); eager accumulates in double.
            offset = random(SHAPES["4d"], dtype, g) + 1000
            yield Case(op, dtype, "train_offset", lambda x: F.batch_norm(x, None, None,
                                                                         training=True),
                       [offset], tolerance=(1e-4, 1e-4) if dtype == torch.float32 else None)
        # Instance norm: a training-mode batch norm over [1, N * C, ...].
        yield Case(op, dtype, "instance_norm", lambda x: F.instance_norm(x),
                   [random(SHAPES["4d"], dtype, g)])
        yield Case(op, dtype, "instance_norm_affine",
                   lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
                   [random(SHAPES["3d"], dtype, g), random((4,), dtype, g),
                    random((4,), dtype, g)])
    g = generator(op, "refused")
    x, w, b = random((2, 4, 3), torch.float32, g), random((4,), torch.float32, g), \
        random((4,), torch.float32, g)
    yield refused(op, torch.float32,
                  lambda x, w, b: [x, torch.empty(0), torch.empty(0)], [x, w, b],
                  [("running_mean", None), ("running_var", None), ("training", False),
                   ("momentum", 0.1), ("eps", 1e-5)],
                  "needs running_mean and running_var")
    yield refused(op, torch.float64,
                  lambda x, w, b: [x, torch.empty(4, dtype=torch.float64),
                                   torch.empty(4, dtype=torch.float64)],
                  [x.double(), w, b],
                  [("running_mean", None), ("running_var", None), ("training", True),
                   ("momentum", 0.1), ("eps", 1e-5)],
                  "a mix eager PyTorch refuses too")


def batch_norm_backward_cases(claims):
    op = "aten.native_batch_norm_backward.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        for mode, training in (("eval", False), ("train", True)):
            for name, shape in SHAPES.items():
                yield Case(
                    op, dtype, f"{mode}_{name}", training_graph(batch_norm(training), 3),
                    [random(shape, dtype, g), random(shape, dtype, g)]
                    + batch_norm_parameters(4, dtype, g))
            # No weight: output_mask [True, False, False], the input's
            # gradient only.
            yield Case(
                op, dtype, f"{mode}_plain",
                training_graph(batch_norm_plain(training), 1),
                [random(SHAPES["4d"], dtype, g), random(SHAPES["4d"], dtype, g)]
                + batch_norm_parameters(4, dtype, g)[2:])
        yield Case(
            op, dtype, "train_no_statistics",
            training_graph(lambda x, w, b: F.batch_norm(x, None, None, w, b, True), 3),
            [random(SHAPES["3d"], dtype, g), random(SHAPES["3d"], dtype, g),
             random((4,), dtype, g), random((4,), dtype, g)])
        yield Case(
            op, dtype, "instance_norm", training_graph(lambda x: F.instance_norm(x), 1),
            [random(SHAPES["4d"], dtype, g), random(SHAPES["4d"], dtype, g)])

        def direct(grad, x, w, mean, var):
            _, save_mean, save_invstd = A.native_batch_norm(x, w, None, None, None, True, 0.1,
                                                            1e-5)
            return list(A.native_batch_norm_backward(grad, x, w, mean, var, save_mean,
                                                     save_invstd, True, 1e-5, [True] * 3))
        _, _, mean, var = batch_norm_parameters(4, dtype, g)
        yield Case(
            op, dtype, "all_results", direct,
            [random(SHAPES["3d"], dtype, g), random(SHAPES["3d"], dtype, g),
             random((4,), dtype, g), mean, var])


# --- group norm ----------------------------------------------------------

# variant -> (input shape, groups, with weight, with bias)
GROUP_NORMS = {
    "4d": ((2, 6, 3, 4), 3, True, True),
    "3d": ((3, 4, 5), 2, True, True),
    "2d": ((4, 6), 3, True, True),
    "plain": ((2, 6, 3, 4), 2, False, False),
    "weight_only": ((2, 6, 5), 3, True, False),
    "bias_only": ((2, 6, 5), 3, False, True),
    "one_group": ((2, 4, 3, 3), 1, True, True),
    "group_per_channel": ((2, 4, 3, 3), 4, True, True),
}


def group_norm_inputs(variant, dtype, g):
    shape, groups, weight, bias = GROUP_NORMS[variant]
    inputs = [random(shape, dtype, g)]
    if weight:
        inputs.append(random((shape[1],), dtype, g))
    if bias:
        inputs.append(random((shape[1],), dtype, g))
    return inputs


def group_norm(variant, eps=1e-5):
    _, groups, weight, bias = GROUP_NORMS[variant]

    def fn(x, *parameters):
        parameters = list(parameters)
        w = parameters.pop(0) if weight else None
        b = parameters.pop(0) if bias else None
        return F.group_norm(x, groups, w, b, eps)
    return fn


def group_norm_cases(claims):
    op = "aten.native_group_norm.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        for variant in GROUP_NORMS:
            yield Case(op, dtype, variant, group_norm(variant),
                                      group_norm_inputs(variant, dtype, g))
        yield Case(
            op, dtype, "all_results",
            lambda x, w, b: list(A.native_group_norm(x, w, b, 2, 6, 12, 3, 1e-5)),
            group_norm_inputs("4d", dtype, g))
        if dtype not in HALF:
            offset = random((2, 6, 3, 4), dtype, g) + 1000
            yield Case(op, dtype, "offset", lambda x: F.group_norm(x, 3), [offset],
                       tolerance=(1e-4, 1e-4) if dtype == torch.float32 else None)
    g = generator(op, "refused")
    x = random((2, 6, 3), torch.float32, g)
    yield refused(op, torch.float32,
                  lambda x: [x, torch.empty(2, 4), torch.empty(2, 4)], [x],
                  [("weight", None), ("bias", None), ("N", 2), ("C", 6), ("HxW", 3),
                   ("group", 4), ("eps", 1e-5)],
                  "do not divide into 4 groups")


def group_norm_backward_cases(claims):
    op = "aten.native_group_norm_backward.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        for variant in ("4d", "3d", "2d", "plain", "weight_only", "group_per_channel"):
            inputs = group_norm_inputs(variant, dtype, g)
            yield Case(
                op, dtype, variant, training_graph(group_norm(variant), len(inputs)),
                [random(inputs[0].shape, dtype, g)] + inputs)

        def direct(grad, x, w):
            _, mean, rstd = A.native_group_norm(x, w, None, 2, 6, 5, 3, 1e-5)
            return list(A.native_group_norm_backward(grad, x, mean, rstd, w, 2, 6, 5, 3,
                                                     [True] * 3))
        yield Case(
            op, dtype, "all_results", direct,
            [random((2, 6, 5), dtype, g), random((2, 6, 5), dtype, g),
             random((6,), dtype, g)])


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
    references are float32 math, as Kiln computes float16 (op_cases.py)."""
    return CLOSE if dtype == torch.float16 else EXACT


def scan_layouts(op, dtype, scan_of, g):
    """A scan along each dim of a matrix, and of a transposed one."""
    check = cumsum_check(dtype)
    x = random((5, 7), dtype, g)
    for dim in (0, 1, -1):
        yield Case(op, dtype, f"dim{dim}", scan_of(dim), [x], check)
    yield Case(op, dtype, "transposed", lambda x: scan_of(1)(x.t()), [random((7, 5), dtype, g)],
               check)


def cumsum_cases(claims):
    op = "aten.cumsum.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        check = cumsum_check(dtype)
        x = random((5, 7), dtype, g)
        yield from scan_layouts(op, dtype, cumsum_of, g)
        yield Case(op, dtype, "3d", lambda x: torch.cumsum(x, 1), [random((3, 4, 5), dtype, g)],
                   check)
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


def cumprod_of(dim):
    return lambda x: torch.cumprod(x, dim)


def cumprod_cases(claims):
    """cumprod along each dim, transposed, and along 1000 elements of
    magnitude near 1 and random signs (neither overflows nor vanishes)."""
    op = "aten.cumprod.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield from scan_layouts(op, dtype, cumprod_of, g)
        signs = torch.randint(0, 2, (3, 1000), generator=g) * 2 - 1
        if dtype.is_floating_point:
            signs = signs * (0.9 + 0.2 * torch.rand((3, 1000), generator=g, dtype=torch.float64))
        yield Case(op, dtype, "long", cumprod_of(-1), [signs.to(dtype)], cumsum_check(dtype))


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


# --- weight norm ---------------------------------------------------------

def weight_norm_of(dim):
    return lambda v, g: torch._weight_norm(v, g, dim)


def weight_norm_cases(claims):
    """torch.nn.utils.weight_norm's weight: a convolution's over its output
    channels (dim 0), wav2vec2's positional convolution's over its kernel
    taps (the last dim), a linear layer's, and both results."""
    op = "aten._weight_norm_interface.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        yield Case(op, dtype, "conv_dim0", weight_norm_of(0),
                   [random((8, 3, 3, 3), dtype, g), random((8, 1, 1, 1), dtype, g)])
        yield Case(op, dtype, "last_dim", weight_norm_of(2),
                   [random((16, 4, 32), dtype, g), random((1, 1, 32), dtype, g)])
        yield Case(op, dtype, "linear", weight_norm_of(0),
                   [random((6, 40), dtype, g), random((6, 1), dtype, g)])
        yield Case(op, dtype, "both_results",
                   lambda v, w: list(A._weight_norm_interface(v, w, 0)),
                   [random((5, 7), dtype, g), random((5, 1), dtype, g)])
        yield Case(op, dtype, "one_dim", weight_norm_of(0),
                   [random((9,), dtype, g), random((9,), dtype, g)])
    g = generator(op, "refused")
    yield refused(op, torch.float32, lambda v, w: [torch.empty(4, 3, 5), torch.empty(1, 3, 1)],
                  [random((4, 3, 5), torch.float32, g), random((1, 3, 1), torch.float32, g)],
                  [("dim", 1)], "takes dim 0 or the last")


def cases(claims):
    for norms in (batch_norm_cases, batch_norm_backward_cases, group_norm_cases,
                  group_norm_backward_cases, weight_norm_cases):
        for case in norms(claims):
            yield half_reference(case)
    yield from repeat_cases(claims)
    yield from cumsum_cases(claims)
    yield from cumprod_cases(claims)
    yield from flip_cases(claims)
