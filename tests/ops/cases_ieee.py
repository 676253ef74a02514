"""fmax, fmin, copysign, nextafter and frexp (codegen/ops/ieee.cc): every
claimed dtype, with every pair of edge values (NaN beside numbers, -0.0
beside 0.0), broadcast and strided inputs, and mixed dtypes."""
import math

import torch

from cases_common import (EXACT, NAMES, Case, claimed, denormal, generator, random, refused,
                          unary, with_edges)
from cases_pointwise import PROMOTIONS, SHAPE, binary_layouts, layouts


def fmax_cases(claims):
    for name in ("fmax", "fmin"):
        op = f"aten.{name}.default"
        fn = getattr(torch, name)
        for dtype in claimed(claims, op):
            yield from binary_layouts(op, dtype, fn, EXACT)
        for a, b in PROMOTIONS:
            g = generator(op, NAMES[a], NAMES[b])
            yield Case(op, a, f"promote_{NAMES[b]}", fn,
                       [random(SHAPE, a, g), random((40,), b, g)], EXACT)


def bit_cases(claims):
    """copysign, nextafter and frexp: bit-exact on every pair of edge values
    (signed zeros, NaN, infinities, denormals, the largest finite values)."""
    op = "aten.copysign.Tensor"
    for dtype in claimed(claims, op):
        yield from binary_layouts(op, dtype, torch.copysign, EXACT)
    op = "aten.copysign.Scalar"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        for scalar in (-2.0, -0.0, 0.0, 3):
            yield Case(op, dtype, f"scalar_{scalar}", unary(torch.copysign, scalar),
                       [with_edges(SHAPE, dtype, g)], EXACT)
    op = "aten.nextafter.default"
    for dtype in claimed(claims, op):
        yield from binary_layouts(op, dtype, torch.nextafter, EXACT)
        g = generator(op, NAMES[dtype], "denormals")
        tiny = torch.finfo(dtype).tiny
        x = torch.tensor([tiny, -tiny, denormal(dtype), -denormal(dtype), 2 * denormal(dtype),
                          tiny * (1 - torch.finfo(dtype).eps), 1.0, -1.0], dtype=dtype)
        for toward in (0.0, math.inf, -math.inf):
            yield Case(op, dtype, f"denormals_toward_{toward}", torch.nextafter,
                       [x, torch.full_like(x, toward)], EXACT)
    yield refused(op, torch.int64, lambda a, b: a, [torch.ones(3, dtype=torch.int64)] * 2)
    op = "aten.frexp.Tensor"
    for dtype in claimed(claims, op):
        yield from layouts(op, dtype, torch.frexp, random, EXACT)
        g = generator(op, NAMES[dtype], "edges")
        yield Case(op, dtype, "edges", torch.frexp, [with_edges(SHAPE, dtype, g)], EXACT)
        # Powers of two and their neighbours, where the exponent steps.
        powers = torch.tensor([2.0 ** e for e in range(-30, 31, 3)], dtype=dtype)
        yield Case(op, dtype, "powers_of_two", torch.frexp,
                   [torch.cat([powers, torch.nextafter(powers, torch.zeros_like(powers)),
                               -powers])], EXACT)
    yield refused(op, torch.int64,
                  lambda x: (x.float(), x.int()), [torch.ones(3, dtype=torch.int64)],
                  substring="neither does eager PyTorch")


def cases(claims):
    yield from fmax_cases(claims)
    yield from bit_cases(claims)
