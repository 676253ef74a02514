"""Bitwise ops, shifts, gcd and lcm (codegen/ops/integers.cc): every claimed
integer dtype and bool, with random values and each dtype's extremes; shift
counts past the width and negative ones; zeros and negative operands of gcd
and lcm; and eager's refusals (floats, shifts, gcd and lcm of bools)."""
import torch

from cases_common import (EXACT, NAMES, Case, claimed, generator, random, refused, unary,
                          with_edges)
from cases_pointwise import binary_layouts, layouts

SHAPE = (6, 40)
BITWISE = {"and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor}
SHIFTS = {"left": (torch.bitwise_left_shift, lambda a, b: a << b),
          "right": (torch.bitwise_right_shift, lambda a, b: a >> b)}


def counts(shape, dtype, g):
    """Shift counts from -3 (0 for uint8) to 3 past the width of `dtype`."""
    width = torch.iinfo(dtype).bits
    return random(shape, dtype, g, low=-3, high=width + 4)


def bitwise_cases(claims):
    for name, fn in BITWISE.items():
        op = f"aten.bitwise_{name}.Tensor"
        for dtype in claimed(claims, op):
            yield from binary_layouts(op, dtype, fn, EXACT)
        g = generator(op, "promote")
        yield Case(op, torch.uint8, "promote_int8", fn,
                   [random(SHAPE, torch.uint8, g), random(SHAPE, torch.int8, g)], EXACT)
        yield Case(op, torch.bool, "promote_int16", fn,
                   [random(SHAPE, torch.bool, g), random(SHAPE, torch.int16, g)], EXACT)
        yield refused(op, torch.float32, lambda a, b: a, [torch.ones(3), torch.ones(3)])
        op = f"aten.bitwise_{name}.Scalar"
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for scalar in ((True, False) if dtype == torch.bool else (5, -3, 200)):
                yield Case(op, dtype, f"scalar_{scalar}", unary(fn, scalar),
                           [with_edges(SHAPE, dtype, g)], EXACT)
    op = "aten.bitwise_not.default"
    for dtype in claimed(claims, op):
        yield from layouts(op, dtype, torch.bitwise_not, random, EXACT)
        yield Case(op, dtype, "edges", torch.bitwise_not,
                   [with_edges(SHAPE, dtype, generator(op, NAMES[dtype]))], EXACT)
    yield refused(op, torch.float32, lambda a: a, [torch.ones(3)])


def shift_cases(claims):
    for direction, (function, operator) in SHIFTS.items():
        op = f"aten.bitwise_{direction}_shift.Tensor"
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            yield Case(op, dtype, "edges", function,
                       [with_edges(SHAPE, dtype, g), counts(SHAPE, dtype, g)], EXACT)
            yield Case(op, dtype, "broadcast", function,
                       [with_edges(SHAPE, dtype, g), counts((40,), dtype, g)], EXACT)
            yield Case(op, dtype, "operator", operator,
                       [with_edges(SHAPE, dtype, g), counts(SHAPE, dtype, g)], EXACT)
        yield refused(op, torch.bool, lambda a, b: a,
                      [torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool)])
        op = f"aten.bitwise_{direction}_shift.Tensor_Scalar"
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for count in (0, 3, 7, 15, 70, -1):
                yield Case(op, dtype, f"count_{count}", unary(function, count),
                           [with_edges(SHAPE, dtype, g)], EXACT)
            # x << n and x >> n: the tracer takes the operators as these ops.
            yield Case(op, dtype, "operator_scalar", unary(operator, 5),
                       [with_edges(SHAPE, dtype, g)], EXACT)


def divisor_cases(claims):
    for name in ("gcd", "lcm"):
        op = f"aten.{name}.default"
        fn = getattr(torch, name)
        for dtype in claimed(claims, op):
            yield from binary_layouts(op, dtype, fn, EXACT,
                                      make=lambda shape, dtype, g: random(shape, dtype, g,
                                                                          low=-60, high=61))
        yield refused(op, torch.float32, lambda a, b: a, [torch.ones(3), torch.ones(3)])
        yield refused(op, torch.bool, lambda a, b: a, [torch.ones(3, dtype=torch.bool)] * 2)


def cases(claims):
    yield from bitwise_cases(claims)
    yield from shift_cases(claims)
    yield from divisor_cases(claims)
