"""fmax and fmin (codegen/ops/ieee.cc): every claimed dtype, with every pair
of edge values (NaN beside numbers, -0.0 beside 0.0), broadcast and strided
inputs, and mixed dtypes."""
import torch

from cases_common import EXACT, NAMES, Case, claimed, generator, random
from cases_pointwise import PROMOTIONS, SHAPE, binary_layouts


def cases(claims):
    for name in ("fmax", "fmin"):
        op = f"aten.{name}.default"
        fn = getattr(torch, name)
        for dtype in claimed(claims, op):
            yield from binary_layouts(op, dtype, fn, EXACT)
        for a, b in PROMOTIONS:
            g = generator(op, NAMES[a], NAMES[b])
            yield Case(op, a, f"promote_{NAMES[b]}", fn,
                       [random(SHAPE, a, g), random((40,), b, g)], EXACT)
