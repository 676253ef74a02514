"""Random numbers (codegen/ops/random.cc): one-node graphs over torch's
generator state, against a torch.Generator's draws from the same state: the
values (float32 normals within a few units in the last place of eager's
vectorized log, sin and cos) and the state after them, byte for byte."""
import torch

from cases_common import Case, claimed

TOLERANCE = (1e-6, 1e-6)


def _state():
    """A state mid-block, with a cached normal sample (after a few normals)."""
    generator = torch.Generator().manual_seed(2024)
    torch.randn(3, dtype=torch.float64, generator=generator)
    return generator.get_state()


def _draw(method, size, dtype, a, b):
    def draw(state):
        generator = torch.Generator()
        generator.set_state(state)
        values = getattr(torch.empty(size, dtype=dtype), method)(a, b, generator=generator)
        return values, generator.get_state()
    return draw


def cases(claims):
    state = _state()
    for op, method in (("kiln_rng.uniform.default", "uniform_"),
                       ("kiln_rng.normal.default", "normal_")):
        for dtype in claimed(claims, op):
            for variant, size in (("few", [2, 3]), ("chunks_of_16_and_a_tail", [37])):
                args = [("size", size), ("dtype", dtype), ("a", -1.0), ("b", 2.0)]
                yield Case(op, dtype, variant, _draw(method, size, dtype, -1.0, 2.0), [state],
                           tolerance=TOLERANCE, manual=(op, args))
    op = "kiln_rng.serial_normal.default"
    for dtype in claimed(claims, op):
        # normal_ of a strided tensor draws value by value at any count.
        def serial(state, dtype=dtype):
            generator = torch.Generator()
            generator.set_state(state)
            values = torch.empty(40, 2, dtype=dtype)[:, 0].normal_(0.5, 2.0, generator=generator)
            return values.contiguous(), generator.get_state()
        args = [("size", [40]), ("dtype", dtype), ("a", 0.5), ("b", 2.0)]
        yield Case(op, dtype, "value_by_value", serial, [state], tolerance=TOLERANCE,
                   manual=(op, args))
    op = "kiln_rng.integers.default"
    for dtype in claimed(claims, op):
        for variant, low, high in (("narrow", -3, 1000), ("wide", 0, 1 << 40)):
            def integers(state, low=low, high=high, dtype=dtype):
                generator = torch.Generator()
                generator.set_state(state)
                values = torch.empty(2, 9, dtype=dtype).random_(low, high, generator=generator)
                return values - low, generator.get_state()
            yield Case(op, dtype, variant, integers, [state], tolerance=TOLERANCE,
                       manual=(op, [("size", [2, 9]), ("range", high - low)]))
    op = "kiln_rng.seed.default"
    for dtype in claimed(claims, op):
        yield Case(op, dtype, "seed", lambda state: torch.Generator().manual_seed(7).get_state(),
                   [state], tolerance=TOLERANCE, manual=(op, [("seed", 7)]))
