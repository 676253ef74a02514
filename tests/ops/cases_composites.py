"""Composites: softmax and log_softmax, layer_norm, addmm, baddbmm, linear,
the losses (mse, smooth_l1, huber), var_mean, count_nonzero, and the
backward ops (_softmax_backward_data, native_layer_norm_backward, the losses'),
in every claimed dtype, on contiguous, transposed and broadcast inputs with
random and edge values."""
import math

import torch
import torch.nn.functional as F

from cases_common import (EXACT, NAMES, Case, bfloat16_from_float32, binary, claimed, generator,
                          random, with_edges)

A = torch.ops.aten


def softmax_of(name, dim):
    op = getattr(A, name)
    return lambda x: op(x, dim, False)


def softmax_cases(claims):
    for name in ("_softmax", "_log_softmax"):
        op = f"aten.{name}.default"
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for dim in (0, 1, -1):
                yield Case(op, dtype, f"dim{dim}", softmax_of(name, dim),
                           [random((6, 40), dtype, g)])
            yield Case(op, dtype, "transposed", transposed_softmax(name),
                       [random((40, 6), dtype, g)])
            # Masked rows: -inf entries (softmax 0, log_softmax -inf), and a
            # row of large values that overflow exp without the shift.
            masked = random((4, 40), dtype, g) * 10
            masked[0, ::3] = float("-inf")
            masked[1] = masked[1] + 80
            yield Case(op, dtype, "masked", softmax_of(name, -1), [masked])
            yield Case(op, dtype, "3d", softmax_of(name, 1), [random((2, 5, 12), dtype, g)])
            # NaN anywhere in a row makes the whole row NaN (Kiln's row max
            # skips NaN tests: the NaN must get through the sum), in rows
            # with 16 and 64 reduction lanes and a scalar tail; +inf rows
            # and an all -inf row are NaN too, as in eager. Row 7: a NaN
            # resets the lane holding the row's largest value, so Kiln's max
            # comes out low and x - max reaches ~100, past where its exp
            # for x - max <= 0 holds.
            for width in (130, 1024):
                lanes = 64 if width == 1024 else 16
                special = random((8, width), dtype, g)
                special[0, 0] = special[1, width - 1] = special[2, width // 2] = math.nan
                special[3, 5] = math.inf
                special[4] = -math.inf
                special[5, 3], special[5, 7] = math.nan, math.inf
                special[6, 17] = -math.inf
                special[7, 1], special[7, 1 + lanes] = 100.0, math.nan
                yield Case(op, dtype, f"nan_inf_{width}", softmax_of(name, -1), [special])
    op = "aten._softmax_backward_data.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        out = torch.softmax(random((6, 40), torch.float32, g), -1).to(dtype)
        yield Case(op, dtype, "dim1", backward_of(dtype, 1), [random((6, 40), dtype, g), out])
        yield Case(op, dtype, "dim0", backward_of(dtype, 0),
                   [random((6, 40), dtype, g), torch.softmax(out.float(), 0).to(dtype)])


def transposed_softmax(name):
    op = getattr(A, name)
    return lambda x: op(x.t(), -1, False)


def backward_of(dtype, dim):
    return lambda grad, out: A._softmax_backward_data(grad, out, dim, grad.dtype)


def layer_norm_cases(claims):
    op = "aten.native_layer_norm.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = random((4, 6, 10), dtype, g)
        w, b = random((10,), dtype, g), random((10,), dtype, g)
        yield Case(op, dtype, "affine", lambda x, w, b: F.layer_norm(x, [10], w, b, 1e-5),
                   [x, w, b])
        yield Case(op, dtype, "plain", lambda x: F.layer_norm(x, [10], None, None, 1e-5), [x])
        yield Case(op, dtype, "weight_only", lambda x, w: F.layer_norm(x, [10], w, None, 1e-3),
                   [x, w])
        yield Case(op, dtype, "two_dims", lambda x, w: F.layer_norm(x, [6, 10], w, None, 1e-5),
                   [x, random((6, 10), dtype, g)])
        yield Case(op, dtype, "transposed", lambda x: F.layer_norm(x.transpose(1, 2), [6]),
                   [x])
        # All three results: output, mean and rstd.
        yield Case(op, dtype, "all_results",
                   lambda x, w, b: A.native_layer_norm(x, [10], w, b, 1e-5), [x, w, b])
        if dtype != torch.float16:
            # x ~ 1000 +- 2: eager and Kiln each lose ~9 bits to the
            # cancellation in x - mean (condition number ~500), so their
            # difference is that much larger than assert_close's rtol. In
            # bfloat16, x is quantized to steps of 8 and outputs near 0 differ
            # by up to a bfloat16 ulp at the outputs' scale of 1.
            offset = random((4, 6, 10), dtype, g) + 1000
            tolerance = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (1.6e-2, 1e-2)}
            yield Case(op, dtype, "offset", lambda x: F.layer_norm(x, [10]), [offset],
                       tolerance=tolerance.get(dtype))
    op = "aten.native_layer_norm_backward.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = random((4, 10), dtype, g)
        w, b = random((10,), dtype, g), random((10,), dtype, g)
        grad = random((4, 10), dtype, g)
        # The tracer cannot express the None results of a partial
        # output_mask: all three are computed, and some left unused.
        yield Case(op, dtype, "affine", layer_norm_backward(3), [grad, x, w, b])
        yield Case(op, dtype, "input_grad", layer_norm_backward(1), [grad, x, w, b])
        x3 = random((2, 3, 10), dtype, g)
        yield Case(op, dtype, "3d", layer_norm_backward(3),
                   [random((2, 3, 10), dtype, g), x3, w, b])




def layer_norm_backward(results):
    def fn(grad, x, w, b):
        _, mean, rstd = A.native_layer_norm(x, [x.shape[-1]], w, b, 1e-5)
        grads = A.native_layer_norm_backward(grad, x, [x.shape[-1]], mean, rstd, w, b,
                                             [True, True, True])
        return list(grads[:results])
    return fn


def matmul_composite_cases(claims):
    op = "aten.addmm.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        a, m = random((5, 7), dtype, g), random((7, 6), dtype, g)
        yield Case(op, dtype, "bias_row", lambda bias, a, m: torch.addmm(bias, a, m),
                   [random((6,), dtype, g), a, m])
        yield Case(op, dtype, "scaled",
                   lambda bias, a, m: torch.addmm(bias, a, m, beta=0.5, alpha=2),
                   [random((5, 6), dtype, g), a, m])
        yield Case(op, dtype, "transposed", lambda bias, a, m: torch.addmm(bias, a.t(), m.t()),
                   [random((5, 6), dtype, g), random((7, 5), dtype, g), random((6, 7), dtype, g)])
        # beta = 0 ignores the bias, NaN included.
        nan_bias = torch.full((5, 6), float("nan"), dtype=dtype)
        yield Case(op, dtype, "beta0", lambda bias, a, m: torch.addmm(bias, a, m, beta=0),
                   [nan_bias, a, m])
    op = "aten.baddbmm.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        a, m = random((3, 5, 7), dtype, g), random((3, 7, 6), dtype, g)
        yield Case(op, dtype, "plain", lambda bias, a, m: torch.baddbmm(bias, a, m),
                   [random((3, 5, 6), dtype, g), a, m])
        yield Case(op, dtype, "scaled_broadcast",
                   lambda bias, a, m: torch.baddbmm(bias, a, m, beta=2, alpha=0.5),
                   [random((5, 6), dtype, g), a, m])
        yield Case(op, dtype, "transposed",
                   lambda bias, a, m: torch.baddbmm(bias, a.transpose(1, 2), m),
                   [random((3, 5, 6), dtype, g), random((3, 7, 5), dtype, g), m])
    op = "aten.linear.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x, w, b = random((4, 3, 8), dtype, g), random((5, 8), dtype, g), random((5,), dtype, g)
        yield Case(op, dtype, "bias", F.linear, [x, w, b], manual=(op, []))
        yield Case(op, dtype, "no_bias", lambda x, w: F.linear(x, w), [x, w],
                   manual=(op, [("bias", None)]))



def mse_loss(reduction):
    return lambda x, target: F.mse_loss(x, target, reduction=reduction)


def mse_loss_backward(reduction):
    return lambda grad, x, target: A.mse_loss_backward(grad, x, target, reduction)


def mse_loss_cases(claims):
    op = "aten.mse_loss.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x, target = random((6, 5), dtype, g), random((6, 5), dtype, g)
        for reduction in ("mean", "sum", "none"):
            yield Case(op, dtype, reduction, mse_loss(reduction), [x, target])
        yield Case(op, dtype, "broadcast_target", lambda x, t: F.mse_loss(x, t.expand(6, 5)),
                   [x, random((1, 5), dtype, g)])
    op = "aten.mse_loss_backward.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x, target = random((6, 5), dtype, g), random((6, 5), dtype, g)
        for reduction, code in (("mean", 1), ("sum", 2), ("none", 0)):
            grad = random((6, 5) if code == 0 else (), dtype, g)
            yield Case(op, dtype, reduction, mse_loss_backward(code), [grad, x, target])


def gradient_of(backward, reduction, width):
    return lambda grad, x, target: backward(grad, x, target, reduction, width)


def smooth_loss_cases(claims):
    """smooth_l1_loss (beta 1, 0.5 and 0) and huber_loss (delta 1 and 2),
    each reduction, and their gradients; differences on both sides of the
    bend and exactly at it."""
    for name, width, widths in (("smooth_l1_loss", "beta", (1.0, 0.5, 0.0)),
                                ("huber_loss", "delta", (1.0, 2.0))):
        op = f"aten.{name}.default"
        loss = getattr(F, name)
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            x, target = random((6, 5), dtype, g) * 2, random((6, 5), dtype, g)
            x[0, :3] = target[0, :3] + torch.tensor([widths[0], -widths[0], 0.0], dtype=dtype)
            for w in widths:
                for reduction, code in (("mean", 1), ("sum", 2), ("none", 0)):
                    # F.smooth_l1_loss takes beta 0 as l1_loss: the op itself.
                    fn = (binary(loss, reduction=reduction, **{width: w}) if w else
                          binary(A.smooth_l1_loss, code, 0.0))
                    yield Case(op, dtype, f"{width}{w}_{reduction}", fn, [x, target])
        op = f"aten.{name}_backward.default"
        backward = getattr(A, f"{name}_backward")
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            x, target = random((6, 5), dtype, g) * 2, random((6, 5), dtype, g)
            for w in widths:
                if w == 0:
                    continue
                for reduction, code in (("mean", 1), ("sum", 2), ("none", 0)):
                    grad = random((6, 5) if code == 0 else (), dtype, g)
                    yield Case(op, dtype, f"{width}{w}_{reduction}",
                               gradient_of(backward, code, w), [grad, x, target])


def var_mean_count_cases(claims):
    op = "aten.var_mean.correction"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = random((4, 6, 5), dtype, g)
        yield Case(op, dtype, "dim1", lambda x: torch.var_mean(x, 1), [x])
        yield Case(op, dtype, "dims_keepdim_unbiased0",
                   lambda x: torch.var_mean(x, [0, 2], unbiased=False, keepdim=True), [x])
        yield Case(op, dtype, "all", torch.var_mean, [x])
    for op, fn in (("aten.count_nonzero.default", lambda x: torch.count_nonzero(x, 1)),
                   ("aten.count_nonzero.dim_IntList", lambda x: torch.count_nonzero(x, [0, 2]))):
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            x = random((4, 6, 5), dtype, g)
            x[torch.rand(x.shape, generator=g) < 0.4] = 0
            yield Case(op, dtype, "with_zeros", fn, [x], EXACT)
    op = "aten.count_nonzero.default"
    for dtype in claimed(claims, op):
        yield Case(op, dtype, "all", torch.count_nonzero,
                   [with_edges((6, 7), dtype, generator(op, NAMES[dtype], "all"))], EXACT)


def cases(claims):
    return bfloat16_from_float32(all_cases(claims))


def all_cases(claims):
    yield from softmax_cases(claims)
    yield from layer_norm_cases(claims)
    yield from matmul_composite_cases(claims)
    yield from mse_loss_cases(claims)
    yield from smooth_loss_cases(claims)
    yield from var_mean_count_cases(claims)
