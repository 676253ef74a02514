"""Convolutions (oneDNN through the runtime table) in every claimed dtype:
1-d and 2-d, stride, padding, dilation, groups (depthwise too), with and
without a bias, strided inputs, a symbolic-free batch of several images,
and what follows a convolution in a network (batch norm in eval, ReLU, a
residual add), which fuses into one pass over its output."""
import torch
import torch.nn.functional as F

from cases_common import bfloat16_from_float32, NAMES, Case, claimed, generator, random


def cases(claims):
    return bfloat16_from_float32(all_cases(claims))


# A float32 element sums up to a few hundred products in whatever order
# oneDNN's blocking (or eager's, a different algorithm) takes.
SUMS = (1e-4, 1e-4)


def all_cases(claims):
    op = "aten.convolution.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        tolerance = SUMS if dtype == torch.float32 else None

        def conv2d(shape, weight, bias=True, **kwargs):
            inputs = [random(shape, dtype, g), random(weight, dtype, g, scale=0.3)]
            if not bias:
                return (lambda x, w: F.conv2d(x, w, **kwargs)), inputs
            inputs.append(random((weight[0],), dtype, g))
            return (lambda x, w, b: F.conv2d(x, w, b, **kwargs)), inputs

        for name, (fn, inputs) in {
            "3x3": conv2d((1, 4, 9, 9), (8, 4, 3, 3), padding=1),
            "no_bias": conv2d((2, 4, 7, 8), (6, 4, 3, 3), bias=False),
            "stride_2_padding_3": conv2d((1, 3, 16, 16), (8, 3, 7, 7), stride=2, padding=3),
            "dilation_uneven": conv2d((2, 4, 13, 11), (4, 4, 3, 2), stride=(2, 1),
                                      padding=(2, 0), dilation=(2, 3)),
            "1x1_stride_2": conv2d((2, 16, 8, 8), (32, 16, 1, 1), stride=2),
            "grouped": conv2d((1, 8, 6, 6), (12, 2, 3, 3), padding=1, groups=4),
            "depthwise": conv2d((2, 16, 10, 10), (16, 1, 3, 3), padding=1, groups=16),
            "batch_of_8": conv2d((8, 8, 12, 12), (16, 8, 3, 3), padding=1),
            "wide_channels": conv2d((1, 32, 8, 8), (64, 32, 3, 3), padding=1),
        }.items():
            yield Case(op, dtype, name, fn, inputs, tolerance=tolerance)
        x = random((2, 6, 20), dtype, g)
        w = random((4, 3, 5), dtype, g, scale=0.3)
        yield Case(op, dtype, "conv1d_grouped", lambda x, w: F.conv1d(x, w, stride=2, padding=2,
                                                                      groups=2), [x, w], tolerance=tolerance)
        yield Case(op, dtype, "channels_last_input",
                   lambda x, w: F.conv2d(x.permute(0, 3, 1, 2), w, padding=1),
                   [random((2, 7, 7, 4), dtype, g), random((5, 4, 3, 3), dtype, g, scale=0.3)],
                   tolerance=tolerance)
        yield Case(op, dtype, "sliced_input", lambda x, w: F.conv2d(x[:, :, ::2, 1:], w),
                   [random((1, 3, 14, 9), dtype, g), random((4, 3, 3, 3), dtype, g, scale=0.3)],
                   tolerance=tolerance)
    if torch.float32 in claimed(claims, op):
        # A residual block's tail: conv, batch norm (eval), add, ReLU.
        g = generator(op, "block")
        c = 8
        x = random((2, c, 10, 10), torch.float32, g)
        w = random((c, c, 3, 3), torch.float32, g, scale=0.2)
        mean, var = random((c,), torch.float32, g), random((c,), torch.float32, g).abs() + 0.5
        gamma, beta = random((c,), torch.float32, g), random((c,), torch.float32, g)

        def block(x, w, mean, var, gamma, beta):
            y = F.conv2d(x, w, padding=1)
            y = (y - mean[:, None, None]) * torch.rsqrt(var[:, None, None] + 1e-5)
            return torch.relu(y * gamma[:, None, None] + beta[:, None, None] + x)
        yield Case(op, torch.float32, "residual_block", block, [x, w, mean, var, gamma, beta],
                   tolerance=SUMS)
