"""Convolutions (oneDNN through the runtime table) in every claimed dtype:
1-d and 2-d, stride, padding, dilation, groups (depthwise too), with and
without a bias, strided inputs, a symbolic-free batch of several images,
and what follows a convolution in a network (batch norm in eval, ReLU, a
residual add), which fuses into one pass over its output. Transposed
convolutions (conv_transpose1d to 3d, oneDNN's deconvolution) likewise,
with output_padding, also where it reaches past the padding (positions
that hold the bias alone)."""
import torch
import torch.nn.functional as F

from cases_common import (bfloat16_from_float32, ERROR, NAMES, Case, claimed, generator,
                          random)


def cases(claims):
    yield from bfloat16_from_float32(all_cases(claims))
    yield from bfloat16_from_float32(transposed_cases(claims))


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


def transposed_cases(claims):
    op = "aten.convolution.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype], "transposed")
        tolerance = SUMS if dtype == torch.float32 else None

        def transposed(fn, shape, weight, bias=True, **kwargs):
            """fn (conv_transpose1d/2d/3d) over an input of `shape` and a
            weight [in, out / groups, kernel...]."""
            inputs = [random(shape, dtype, g), random(weight, dtype, g, scale=0.3)]
            if not bias:
                return (lambda x, w: fn(x, w, **kwargs)), inputs
            inputs.append(random((weight[1] * kwargs.get("groups", 1),), dtype, g))
            return (lambda x, w, b: fn(x, w, b, **kwargs)), inputs

        d1, d2, d3 = F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d
        for name, (fn, inputs) in {
            "transposed_stride_2": transposed(d2, (1, 4, 5, 5), (4, 6, 3, 3), stride=2,
                                              padding=1, output_padding=1),
            "transposed_no_bias": transposed(d2, (2, 4, 6, 7), (4, 3, 2, 2), bias=False,
                                             stride=2),
            # Along the width, output_padding 1 is past padding 0 at stride 1:
            # the last column holds the bias alone.
            "transposed_dilation_output_padding": transposed(
                d2, (2, 4, 6, 5), (4, 3, 3, 2), stride=(2, 1), padding=(1, 0),
                output_padding=(1, 1), dilation=(1, 2)),
            "transposed_grouped": transposed(d2, (1, 8, 6, 6), (8, 3, 3, 3), stride=2, padding=1,
                                             groups=4),
            "transposed_depthwise": transposed(d2, (2, 16, 5, 5), (16, 1, 4, 4), stride=2,
                                               padding=1, groups=16),
            "transposed_wide_channels": transposed(d2, (2, 32, 6, 6), (32, 48, 3, 3), stride=2,
                                                   padding=1, output_padding=1),
            "transposed_1d_grouped": transposed(d1, (2, 6, 9), (6, 2, 4), stride=3, padding=1,
                                                output_padding=2, groups=2),
            "transposed_3d": transposed(d3, (1, 2, 3, 4, 3), (2, 3, 2, 3, 2), stride=(2, 1, 2),
                                        padding=(0, 1, 0), output_padding=(1, 0, 1)),
        }.items():
            yield Case(op, dtype, name, fn, inputs, tolerance=tolerance)
        yield Case(op, dtype, "transposed_sliced_input",
                   lambda x, w: F.conv_transpose2d(x[:, :, ::2, 1:], w, stride=2),
                   [random((1, 3, 10, 7), dtype, g), random((3, 4, 3, 3), dtype, g, scale=0.3)],
                   tolerance=tolerance)
    if torch.float32 in claimed(claims, op):
        # A decoder's upsampling step: transposed convolution, batch norm
        # (eval), ReLU.
        g = generator(op, "upsample")
        x = random((2, 8, 6, 6), torch.float32, g)
        w = random((8, 4, 4, 4), torch.float32, g, scale=0.2)
        mean, var = random((4,), torch.float32, g), random((4,), torch.float32, g).abs() + 0.5

        def upsample(x, w, mean, var):
            y = F.conv_transpose2d(x, w, stride=2, padding=1)
            return torch.relu((y - mean[:, None, None]) * torch.rsqrt(var[:, None, None] + 1e-5))
        yield Case(op, torch.float32, "transposed_upsample_block", upsample, [x, w, mean, var],
                   tolerance=SUMS)
        # Eager refuses an output_padding of at least both stride and
        # dilation as well.
        x = random((1, 2, 5), torch.float32, g)
        w = random((2, 3, 3), torch.float32, g)
        yield Case(op, torch.float32, "transposed_output_padding_too_large",
                   lambda x, w: torch.zeros(1, 3, 13), [x, w], ERROR,
                   error=("INVALID_ARGUMENT", "output_padding 2 of spatial dim 0 must be smaller "
                          "than its stride 2 or its dilation 1"),
                   manual=(op, [("bias", None), ("stride", [2]), ("padding", [0]),
                                ("dilation", [1]), ("transposed", True), ("output_padding", [2]),
                                ("groups", 1)]))
