"""Clamp-style activations (hardtanh and ReLU6, hardswish, hardsigmoid,
leaky_relu, elu and selu, hardshrink and softshrink) and the backward ops
autograd emits for them, over every claimed dtype: random values in each
layout, each op's boundaries with the edge values of the dtype, a few
argument values, and make_fx training graphs (forward and gradient, in-place
forward included).

Where eager's vectorized and scalar loops disagree (a NaN self of
hardtanh_backward, hardswish_backward and elu_backward; softshrink's zero
for a negative x inside), Kiln follows the vectorized loop, eager's for contiguous
tensors: edge values are traced contiguous, and a transposed case takes its
reference from contiguous copies."""
import torch
import torch.nn.functional as F

from cases_common import (CLOSE, EXACT, NAMES, Case, binary, claimed, edges, generator, random,
                          refused, unary, with_edges)
from cases_pointwise import SHAPE, binary_layouts, layouts

A = torch.ops.aten


def wide(shape, dtype, g):
    """Random values over [-8, 8] and past it: every piece of the clamps."""
    return random(shape, dtype, g, scale=4.0)


def boundaries(dtype):
    """The edge values of `dtype`, then where the activations change piece
    (and just beside, where 16-bit dtypes can tell)."""
    if dtype == torch.int64:
        return edges(dtype) + [-6, -3, 3, 6, -2, 5]
    return edges(dtype) + [-6.0, -3.0, 6.0, -1.0, 2.999, -2.999, 3.001, -3.001, 5.99, 6.01, 0.1,
                           0.3, -0.1, 1e-3, -1e-3, -20.0, -100.0]


SOFTSHRINK = {"default": 0.5, "lambd3": 3.0, "lambd0.1": 0.1}  # variant -> lambd
# op -> check, [(variant, fn)]: the forward ops with the argument values
# that matter (the first is what the layout cases use).
FORWARD = {
    "aten.hardtanh.default": (EXACT, [
        ("default", unary(F.hardtanh)), ("relu6", unary(F.relu6)),
        ("min-0.1_max0.3", unary(F.hardtanh, -0.1, 0.3))]),
    "aten.hardswish.default": (EXACT, [("default", unary(F.hardswish))]),
    "aten.hardsigmoid.default": (EXACT, [("default", unary(F.hardsigmoid))]),
    "aten.leaky_relu.default": (EXACT, [
        ("default", unary(F.leaky_relu)), ("slope0.2", unary(F.leaky_relu, 0.2)),
        ("slope-0.5", unary(F.leaky_relu, -0.5)), ("slope1", unary(F.leaky_relu, 1.0))]),
    "aten.hardshrink.default": (EXACT, [
        ("default", unary(F.hardshrink)), ("lambd3", unary(F.hardshrink, 3.0)),
        ("lambd0.1", unary(F.hardshrink, 0.1))]),
    "aten.softshrink.default": (EXACT, [
        (variant, unary(F.softshrink, lambd)) for variant, lambd in SOFTSHRINK.items()]),
    # exp(x) - 1: eager's SLEEF exp and Kiln's differ in the last bit, which
    # the subtraction amplifies near 0: assert_close's tolerances.
    "aten.elu.default": (CLOSE, [
        ("default", unary(F.elu)), ("alpha0.5", unary(F.elu, 0.5)), ("selu", unary(F.selu)),
        ("input_scale", unary(A.elu, 0.5, 2.0, 0.7))]),
}

# op -> check, fn(grad, self) for random and edge values, and whether eager's
# scalar loop (a transposed operand) disagrees with its vectorized one.
BACKWARD = {
    "aten.hardtanh_backward.default": (EXACT, binary(A.hardtanh_backward, -1.0, 1.0), True),
    "aten.hardswish_backward.default": (EXACT, binary(A.hardswish_backward), True),
    "aten.hardsigmoid_backward.default": (EXACT, binary(A.hardsigmoid_backward), False),
    "aten.leaky_relu_backward.default": (
        EXACT, binary(A.leaky_relu_backward, 0.01, False), False),
    "aten.elu_backward.default": (
        CLOSE, lambda g, x: A.elu_backward(g, 1.0, 1, 1, False, x), True),
}

# backward op -> [(variant, fn(grad, self))]: other arguments, over the
# boundaries.
ARGUMENTS = {
    "aten.hardtanh_backward.default": [("relu6", binary(A.hardtanh_backward, 0, 6)),
                                       ("min-0.1_max0.3", binary(A.hardtanh_backward, -0.1, 0.3))],
    "aten.leaky_relu_backward.default": [
        ("slope-0.5", binary(A.leaky_relu_backward, -0.5, False)),
        ("self_is_result", binary(A.leaky_relu_backward, 0.2, True))],
    "aten.elu_backward.default": [
        ("is_result", lambda g, y: A.elu_backward(g, 1.0, 1, 1, True, y)),
        ("coefficients", lambda g, x: A.elu_backward(g, 0.5, 2.0, 0.7, False, x)),
        ("coefficients_is_result", lambda g, y: A.elu_backward(g, 0.5, 2.0, 0.7, True, y))],
}

# backward op -> [(variant, forward)]: make_fx training graphs whose
# gradient is the backward op, with the arguments autograd gives it.
TRAINING = {
    "aten.hardtanh_backward.default": [
        ("hardtanh", unary(F.hardtanh)), ("relu6", unary(F.relu6)),
        ("min-0.1_max0.3", unary(F.hardtanh, -0.1, 0.3))],
    "aten.hardswish_backward.default": [("hardswish", unary(F.hardswish))],
    "aten.hardsigmoid_backward.default": [("hardsigmoid", unary(F.hardsigmoid))],
    "aten.leaky_relu_backward.default": [
        ("leaky_relu", unary(F.leaky_relu)), ("slope-0.5", unary(F.leaky_relu, -0.5)),
        # leaky_relu_ on an intermediate: self_is_result=True.
        ("inplace", lambda x: F.leaky_relu(x * 2, inplace=True))],
    "aten.elu_backward.default": [
        ("elu", unary(F.elu)), ("alpha0.5", unary(F.elu, 0.5)), ("selu", unary(F.selu)),
        # celu's gradient is elu_backward with input_scale = 1 / alpha (its
        # forward, aten.celu, is not in the table: the graph is the gradient).
        ("celu", unary(F.celu, 2.0)),
        ("inplace", lambda x: F.elu(x * 2, inplace=True))],  # is_result=True
}
# Cases whose gradient uses the 16-bit forward result where it cancels
# (elu_'s result + alpha near -alpha): Kiln, like eager's bfloat16 kernels,
# rounds that result when it stores it; a float16 case's reference (float32
# math, eager has no float16 kernels) does not.
NOT_FLOAT16 = {("aten.elu_backward.default", "inplace")}


def training(forward, with_forward=True):
    """A training step's graph: forward(x) and d(forward)/dx for `grad`."""
    def fn(grad, x):
        x = x.detach().requires_grad_(True)
        y = forward(x)
        gradient = torch.autograd.grad(y, x, grad)[0]
        return (y, gradient) if with_forward else gradient
    return fn


def contiguous_reference(case, fn):
    """A transposed case's reference from a contiguous copy: eager's
    vectorized loop."""
    case.reference_fn = lambda a, b: fn(a.t().contiguous(), b)
    return case


def softshrink_reference(case, fn):
    """A softshrink case's reference as eager's vectorized loop gives it: +0
    for every x inside (its scalar loop, which strided inputs and the last
    elements take, gives -0 for a negative x)."""
    case.reference_fn = lambda x: fn(x) + 0
    return case


def forward_cases(claims):
    for op, (check, variants) in FORWARD.items():
        shrink = op == "aten.softshrink.default"
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for case in layouts(op, dtype, variants[0][1], wide, check):
                yield softshrink_reference(case, case.fn) if shrink else case
            for variant, fn in variants:
                case = Case(op, dtype, f"{variant}_edges", fn,
                            [with_edges(SHAPE, dtype, g, boundaries(dtype))], check)
                if shrink:
                    # Eager converts lambd to x's dtype (0.1 is not a 16-bit
                    # value); a float16 case's reference runs in float32.
                    lambd = torch.tensor(SOFTSHRINK[variant], dtype=dtype).item()
                    case = softshrink_reference(case, unary(F.softshrink, lambd))
                yield case
    op = "aten.hardtanh.default"
    for dtype in claimed(claims, op, [torch.int64]):
        g = generator(op, NAMES[dtype], "bounds")
        # Float bounds of an integer tensor are truncated (eager: clamp).
        yield Case(op, dtype, "bounds_-1.5_2.5", unary(F.hardtanh, -1.5, 2.5),
                   [with_edges(SHAPE, dtype, g, boundaries(dtype))], EXACT)
    yield refused(op, torch.bool, lambda x: x, [random(SHAPE, torch.bool, generator(op))])
    for op in FORWARD:
        if op != "aten.hardtanh.default":
            yield refused(op, torch.int64, lambda x: x.float(),
                          [random(SHAPE, torch.int64, generator(op))])


def backward_cases(claims):
    for op, (check, fn, path_dependent) in BACKWARD.items():
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for case in binary_layouts(op, dtype, fn, check, make=wide):
                if path_dependent and case.variant == "transposed":
                    case = contiguous_reference(case, fn)
                yield case
            yield Case(op, dtype, "boundaries", fn,
                       [wide(SHAPE, dtype, g), with_edges(SHAPE, dtype, g, boundaries(dtype))],
                       check)
            for variant, with_arguments in ARGUMENTS.get(op, []):
                yield Case(op, dtype, variant, with_arguments,
                           [wide(SHAPE, dtype, g), with_edges(SHAPE, dtype, g, boundaries(dtype))],
                           check)
            for variant, forward in TRAINING[op]:
                if (op, variant) in NOT_FLOAT16 and dtype == torch.float16:
                    continue
                yield Case(op, dtype, f"training_{variant}", training(forward, variant != "celu"),
                           [wide(SHAPE, dtype, g),
                            with_edges(SHAPE, dtype, g, boundaries(dtype))],
                           CLOSE if op == "aten.elu_backward.default" else EXACT)
        g = generator(op, "refused")
        yield refused(op, torch.int64, lambda a, b: a.float(),
                      [random(SHAPE, torch.int64, g), random(SHAPE, torch.int64, g)],
                      manual_args(op))
    # Eager refuses the backward of an in-place leaky_relu_ (elu_) with a
    # negative slope (alpha): the result's sign no longer tells self's.
    g = generator("inplace negative")
    grad, x = random(SHAPE, torch.float32, g), random(SHAPE, torch.float32, g)
    yield refused("aten.leaky_relu_backward.default", torch.float32, lambda a, b: a, [grad, x],
                  [("negative_slope", -0.5), ("self_is_result", True)],
                  "cannot be differentiated (neither can eager PyTorch)")
    yield refused("aten.elu_backward.default", torch.float32, lambda a, b: a, [grad, x],
                  [("alpha", -0.5), ("scale", 1), ("input_scale", 1), ("is_result", True)],
                  "cannot be differentiated (neither can eager PyTorch)")


def manual_args(op):
    """A backward op's scalar arguments, for a one-node graph."""
    return {"aten.hardtanh_backward.default": [("min_val", -1.0), ("max_val", 1.0)],
            "aten.leaky_relu_backward.default": [("negative_slope", 0.01),
                                                 ("self_is_result", False)],
            "aten.elu_backward.default": [("alpha", 1.0), ("scale", 1), ("input_scale", 1),
                                          ("is_result", False)]}.get(op, [])


def _prelu_gradients(grad, x, weight):
    """prelu's input and weight gradients, as autograd computes them, 16-bit
    dtypes in float32 and rounded back (eager's 16-bit weight gradient sums
    in that dtype; Kiln sums in float32)."""
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    x_wide, weight_wide = (t.to(wide).requires_grad_() for t in (x, weight))
    gradients = torch.autograd.grad(F.prelu(x_wide, weight_wide), [x_wide, weight_wide],
                                    grad.to(wide))
    return [g.to(x.dtype) for g in gradients]


def prelu_cases(claims):
    """prelu with one weight, one per channel (4-d and 2-d inputs), and the
    module's own; edge values. make_fx emits neither op (torch takes prelu
    as _prelu_kernel, which the tracer decomposes): one node built by hand."""
    op = "aten.prelu.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        for variant, inputs in (
                ("per_channel", [with_edges((2, 3, 4, 5), dtype, g), random((3,), dtype, g)]),
                ("single", [wide(SHAPE, dtype, g), random((1,), dtype, g)]),
                ("rows", [wide(SHAPE, dtype, g), random((40,), dtype, g)]),
                ("transposed", [wide((2, 5, 3), dtype, g).transpose(1, 2),
                                random((3,), dtype, g)])):
            yield Case(op, dtype, variant, F.prelu, inputs, EXACT, manual=(op, []))
    op = "aten.prelu_backward.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        for variant, shape, weights in (("per_channel", (2, 3, 4, 5), 3), ("single", SHAPE, 1),
                                        ("rows", SHAPE, 40)):
            yield Case(op, dtype, variant, _prelu_gradients,
                       [random(shape, dtype, g), with_edges(shape, dtype, g),
                        random((weights,), dtype, g)], manual=(op, []))


def cases(claims):
    yield from prelu_cases(claims)
    yield from forward_cases(claims)
    yield from backward_cases(claims)
