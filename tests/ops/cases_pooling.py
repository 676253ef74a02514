"""Pooling: max_pool2d_with_indices, fractional_max_pool2d and 3d,
avg_pool2d and _adaptive_avg_pool2d and their backward ops on 3-D and 4-D
inputs, with padding, strides, dilation and ceil_mode; windows of negative
values only, ties, NaN, -inf and signed zeros (the padding is -inf for a max
and must neither win nor be an index); contiguous and transposed inputs."""
import math

import torch
import torch.nn.functional as F

from cases_common import ERROR, EXACT, NAMES, Case, claimed, generator, random

A = torch.ops.aten
SHAPE = (2, 3, 11, 10)


def max_pool(kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    return lambda x: A.max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode)


def avg_pool(kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None):
    return lambda x: A.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad,
                                  divisor_override)


def adaptive(size):
    return lambda x: A._adaptive_avg_pool2d(x, size)


def exact_when_wide(dtype):
    """Sums are folded in eager's order: bit for bit in float32 and float64
    (16-bit references are float32 math rounded: assert_close)."""
    return EXACT if dtype in (torch.float32, torch.float64) else "ASSERT_CLOSE"


def special_values(dtype, g):
    """Windows of ties, NaN (two in one window: eager's index is the last),
    -inf, all -inf at the padded corner, and -0.0 before 0.0."""
    x = torch.randint(0, 3, SHAPE, generator=g).to(dtype)
    x[0, 0, 0, :4] = torch.tensor([math.nan, 1, math.nan, 2], dtype=dtype)
    x[0, 0, 1, :4] = torch.tensor([math.nan, 2, 2, math.nan], dtype=dtype)
    x[0, 1, :3, :3] = -math.inf
    x[0, 2, 4, 4], x[0, 2, 4, 5] = -0.0, 0.0
    x[0, 2, 5, 4], x[0, 2, 5, 5] = 0.0, -0.0
    x[1, 0] = -0.0
    x[1, 1, 3:6, 3:6] = math.inf
    return x


def max_pool_cases(claims):
    op = "aten.max_pool2d_with_indices.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = random(SHAPE, dtype, g)
        # resnet18's stem: 3x3 windows, stride 2, padding 1.
        yield Case(op, dtype, "k3_s2_p1", max_pool([3, 3], [2, 2], [1, 1]), [x], EXACT)
        # Every value negative: the -inf padding must not win.
        yield Case(op, dtype, "negative", max_pool([3, 3], [2, 2], [1, 1]),
                   [random(SHAPE, dtype, g).abs().neg() - 1], EXACT)
        yield Case(op, dtype, "special", max_pool([3, 3], [1, 1], [1, 1]),
                   [special_values(dtype, g)], EXACT)
        yield Case(op, dtype, "special_k2", max_pool([2, 2]), [special_values(dtype, g)], EXACT)
        yield Case(op, dtype, "all_neg_inf", max_pool([3, 3], [2, 2], [1, 1]),
                   [torch.full((1, 2, 5, 6), -math.inf, dtype=dtype)], EXACT)
        yield Case(op, dtype, "default_stride", max_pool([2, 3]), [x], EXACT)
        yield Case(op, dtype, "dilation", max_pool([3, 2], [1, 2], [1, 0], [2, 3]), [x], EXACT)
        # A dilated window that starts in the padding: where nothing beats
        # -inf (batch 0) the index is the first position inside.
        dilated = random(SHAPE, dtype, g)
        dilated[0] = -math.inf
        yield Case(op, dtype, "dilation_padded", max_pool([3, 3], [2, 1], [1, 1], [3, 2]),
                   [dilated], EXACT)
        yield Case(op, dtype, "ceil_mode", max_pool([3, 3], [2, 2], [1, 0], 1, True), [x], EXACT)
        yield Case(op, dtype, "ceil_mode_negative", max_pool([2, 2], [3, 3], 0, 1, True),
                   [random(SHAPE, dtype, g).abs().neg()], EXACT)
        yield Case(op, dtype, "3d", max_pool([3, 2], [2, 1], [1, 1]),
                   [random((3, 9, 7), dtype, g)], EXACT)
        yield Case(op, dtype, "transposed", lambda x: max_pool([3, 3], [2, 2], [1, 1])(
            x.transpose(2, 3)), [random((2, 3, 10, 11), dtype, g)], EXACT)
        # An inference graph: the indices are dropped.
        yield Case(op, dtype, "values_only", lambda x: F.max_pool2d(x, 3, 2, 1), [x], EXACT)


def avg_pool_cases(claims):
    op = "aten.avg_pool2d.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        x = random(SHAPE, dtype, g)
        check = exact_when_wide(dtype)
        yield Case(op, dtype, "k3_s2_p1", avg_pool([3, 3], [2, 2], [1, 1]), [x], check)
        yield Case(op, dtype, "exclude_pad", avg_pool([3, 3], [2, 2], [1, 1], False, False), [x],
                   check)
        yield Case(op, dtype, "ceil_mode", avg_pool([3, 2], [2, 2], [1, 1], True), [x], check)
        yield Case(op, dtype, "ceil_mode_exclude_pad",
                   avg_pool([3, 3], [2, 3], [1, 0], True, False), [x], check)
        yield Case(op, dtype, "divisor_override", avg_pool([2, 3], [1, 2], [1, 1], False, True, 5),
                   [x], check)
        yield Case(op, dtype, "default_stride", avg_pool([2, 2]), [x], check)
        yield Case(op, dtype, "3d", avg_pool([3, 3], [1, 2], [1, 1], False, False),
                   [random((3, 9, 7), dtype, g)], check)
        yield Case(op, dtype, "transposed", lambda x: avg_pool([3, 3], [2, 2], [1, 1])(
            x.transpose(2, 3)), [random((2, 3, 10, 11), dtype, g)], check)
        edges = random(SHAPE, dtype, g)
        edges[0, 0, 0, 0], edges[0, 1, 5, 5], edges[1, 2, 9, 9] = math.nan, math.inf, -math.inf
        yield Case(op, dtype, "edges", avg_pool([3, 3], [2, 2], [1, 1]), [edges], check)


def adaptive_cases(claims):
    op = "aten._adaptive_avg_pool2d.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        check = exact_when_wide(dtype)
        # resnet18's head (F.adaptive_avg_pool2d traces 1x1 as a mean).
        yield Case(op, dtype, "global", adaptive([1, 1]), [random((2, 8, 7, 7), dtype, g)], check)
        yield Case(op, dtype, "even", adaptive([4, 3]), [random((2, 3, 8, 12), dtype, g)], check)
        # Windows of several sizes: 7 -> 3 is [0, 3), [2, 5), [4, 7); 10 -> 4
        # is [0, 3), [2, 5), [5, 8), [7, 10).
        yield Case(op, dtype, "uneven", adaptive([3, 4]), [random((2, 3, 7, 10), dtype, g)],
                   check)
        yield Case(op, dtype, "grow", adaptive([6, 7]), [random((2, 4, 5), dtype, g)], check)
        yield Case(op, dtype, "3d", adaptive([2, 5]), [random((3, 6, 10), dtype, g)], check)
    # 13 -> 11 and 17 -> 13 windows come in 11 * 13 sizes and places.
    g = generator(op, "refused")
    yield Case(op, torch.float32, "too_many_window_shapes", adaptive([11, 13]),
               [random((1, 2, 13, 17), torch.float32, g)], ERROR,
               error=("UNIMPLEMENTED", "over the limit of 64"),
               manual=(op, [("output_size", [11, 13])]))


def max_pool_backward(kernel, stride, padding, dilation=1, ceil_mode=False):
    def fn(grad, x):
        _, indices = A.max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode)
        return A.max_pool2d_with_indices_backward(grad, x, kernel, stride, padding, dilation,
                                                  ceil_mode, indices)
    return fn


def avg_pool_backward(kernel, stride, padding, ceil_mode=False, count_include_pad=True,
                      divisor_override=None):
    return lambda grad, x: A.avg_pool2d_backward(grad, x, kernel, stride, padding, ceil_mode,
                                                 count_include_pad, divisor_override)


def backward_case(op, dtype, variant, fn, grad_shape, x, check):
    """grad_output random, of the pooled shape; eager's bfloat16 kernels add
    in bfloat16, Kiln in float32: that reference is float32 math rounded."""
    g = generator(op, NAMES[dtype], variant)
    return Case(op, dtype, variant, fn, [random(grad_shape, dtype, g), x], check,
                float32_reference=dtype == torch.bfloat16)


def backward_cases(claims):
    """Gradients sum in eager's order (output position by position): bit for
    bit in float32 and float64, also where windows overlap (stride 1) and
    where the input does not divide by the stride."""
    op = "aten.max_pool2d_with_indices_backward.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        check = exact_when_wide(dtype)
        x = random(SHAPE, dtype, g)
        yield backward_case(op, dtype, "k3_s2_p1", max_pool_backward([3, 3], [2, 2], [1, 1]),
                            (2, 3, 6, 5), x, check)
        # Ties: one input position is the max of several windows.
        ties = torch.randint(0, 3, SHAPE, generator=g).to(dtype)
        yield backward_case(op, dtype, "overlapping_ties",
                            max_pool_backward([3, 3], [1, 1], [1, 1]), SHAPE, ties, check)
        yield backward_case(op, dtype, "special", max_pool_backward([2, 2], [2, 2], [0, 0]),
                            (2, 3, 5, 5), special_values(dtype, g), check)
        yield backward_case(op, dtype, "dilation_ceil_mode",
                            max_pool_backward([3, 2], [2, 3], [1, 1], [2, 1], True), (2, 3, 5, 4),
                            x, check)
        yield backward_case(op, dtype, "3d", max_pool_backward([3, 2], [2, 1], [1, 1]), (3, 5, 8),
                            random((3, 9, 7), dtype, g), check)
    op = "aten.avg_pool2d_backward.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        check = exact_when_wide(dtype)
        x = random(SHAPE, dtype, g)
        yield backward_case(op, dtype, "k3_s2_p1", avg_pool_backward([3, 3], [2, 2], [1, 1]),
                            (2, 3, 6, 5), x, check)
        yield backward_case(op, dtype, "ceil_mode_exclude_pad",
                            avg_pool_backward([3, 3], [2, 3], [1, 0], True, False), (2, 3, 6, 4),
                            x, check)
        yield backward_case(op, dtype, "overlapping", avg_pool_backward([3, 2], [1, 1], [1, 1]),
                            (2, 3, 11, 11), x, check)
        yield backward_case(op, dtype, "divisor_override",
                            avg_pool_backward([2, 3], [1, 2], [1, 1], False, True, 5),
                            (2, 3, 12, 5), x, check)
        yield backward_case(op, dtype, "3d", avg_pool_backward([2, 2], [2, 2], [0, 0]), (3, 4, 3),
                            random((3, 9, 7), dtype, g), check)
    op = "aten._adaptive_avg_pool2d_backward.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        check = exact_when_wide(dtype)
        for variant, grad_shape, x_shape in [("even", (2, 3, 4, 3), (2, 3, 8, 12)),
                                             ("global", (2, 8, 1, 1), (2, 8, 7, 7)),
                                             ("3d", (3, 2, 5), (3, 6, 10))]:
            case = backward_case(op, dtype, variant, A._adaptive_avg_pool2d_backward, grad_shape,
                                 random(x_shape, dtype, g), check)
            if dtype == torch.float16:  # not even fake tensors have a float16 kernel
                case.manual = (op, [])
            yield case
    g = generator(op, "refused")
    yield Case(op, torch.float32, "uneven_windows", A._adaptive_avg_pool2d_backward,
               [random((2, 3, 3, 4), torch.float32, g), random((2, 3, 7, 10), torch.float32, g)],
               ERROR, error=("UNIMPLEMENTED", "windows of one size only"), manual=(op, []))


def samples(shape, dtype, g):
    """random_samples as F.fractional_max_pool2d draws them: one u in [0, 1)
    per plane and pooled dim, with u = 0 and the largest float below 1."""
    u = torch.rand(shape, generator=g, dtype=torch.float64).to(dtype)
    u.view(-1)[0] = 0.0
    u.view(-1)[1] = torch.tensor(1.0, dtype=dtype).nextafter(torch.tensor(0.0, dtype=dtype))
    return u


def fractional_cases(claims):
    """Windows placed from random_samples (2-D: sample 0 for the width, 1 for
    the height; 3-D: 0, 1, 2 for time, height, width), of ties, NaN, -inf and
    signed zeros; a window of the whole input; unbatched and transposed
    inputs; a pool larger than the input allows (eager's error)."""
    op = "aten.fractional_max_pool2d.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        pool = lambda kernel, output: lambda x, u: A.fractional_max_pool2d(x, kernel, output, u)
        yield Case(op, dtype, "k2_11x10_to_5x4", pool([2, 2], [5, 4]),
                   [random(SHAPE, dtype, g), samples((2, 3, 2), dtype, g)], EXACT)
        yield Case(op, dtype, "k3x2_special", pool([3, 2], [6, 7]),
                   [special_values(dtype, g), samples((2, 3, 2), dtype, g)], EXACT)
        yield Case(op, dtype, "one_window", pool([11, 10], [1, 1]),
                   [random(SHAPE, dtype, g), samples((2, 3, 2), dtype, g)], EXACT)
        yield Case(op, dtype, "unbatched", pool([2, 3], [9, 8]),
                   [random(SHAPE[1:], dtype, g), samples((1, 3, 2), dtype, g)], EXACT)
        yield Case(op, dtype, "transposed", lambda x, u: pool([2, 2], [4, 5])(x.transpose(2, 3), u),
                   [random(SHAPE, dtype, g), samples((2, 3, 2), dtype, g)], EXACT)
    yield Case(op, torch.float32, "pool_too_large",
               lambda x, u: (torch.zeros(2, 3, 5, 9), torch.zeros(2, 3, 5, 9, dtype=torch.int64)),
               [random(SHAPE, torch.float32, generator(op, "refused")), torch.zeros(2, 3, 2)],
               ERROR, error=("INVALID_ARGUMENT", "pool width 3 too large relative to input width 10"),
               manual=(op, [("kernel_size", [2, 3]), ("output_size", [5, 9])]))
    op = "aten.fractional_max_pool3d.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        pool = lambda kernel, output: lambda x, u: A.fractional_max_pool3d(x, kernel, output, u)
        yield Case(op, dtype, "k2_to_3x4x3", pool([2, 2, 2], [3, 4, 3]),
                   [random((2, 3, 6, 7, 5), dtype, g), samples((2, 3, 3), dtype, g)], EXACT)
        yield Case(op, dtype, "k2x1x3_special", pool([2, 1, 3], [2, 10, 7]),
                   [special_values(dtype, g).unsqueeze(2).expand(2, 3, 4, 11, 10).contiguous(),
                    samples((2, 3, 3), dtype, g)], EXACT)
        yield Case(op, dtype, "unbatched", pool([1, 2, 2], [4, 3, 3]),
                   [random((3, 5, 5, 6), dtype, g), samples((1, 3, 3), dtype, g)], EXACT)
    # The 3-D kernel wants one input position more than the 2-D one.
    yield Case(op, torch.float32, "pool_too_large",
               lambda x, u: (torch.zeros(3, 4, 3, 3), torch.zeros(3, 4, 3, 3, dtype=torch.int64)),
               [random((3, 4, 5, 6), torch.float32, generator(op, "refused")),
                torch.zeros(1, 3, 3)],
               ERROR, error=("INVALID_ARGUMENT", "pool time 1 too large relative to input time 4"),
               manual=(op, [("kernel_size", [1, 2, 2]), ("output_size", [4, 3, 3])]))


def cases(claims):
    yield from max_pool_cases(claims)
    yield from fractional_cases(claims)
    yield from avg_pool_cases(claims)
    yield from adaptive_cases(claims)
    yield from backward_cases(claims)
