"""kiln.compile, strict (no op through torch), of single ops the OpInfo suite
(opinfo_test.py) found refused: the IEEE bit operations, gcd and lcm, full
max and min, addbmm and empty_strided in the op table (codegen/ops/), and
the tracer's forms of training batch norm, embedding_renorm,
nonzero_static, 3-d grid sampling, antialiased bilinear resizing and
histogramdd (kiln/_op_forms.py, kiln/_decompositions.py), and lookups and
unfold of 0-dim tensors, each against
eager through a real kilnd (conftest.py starts it).

Runs under pytest (the checkout's .venv); each test case is counted by
the test command through the JUnit XML written to $XML_OUTPUT_FILE.
"""
import math
import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402

EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.75, 1e-40, -1e-45, 3.4e38, 6.0]


def assert_native(fn, *inputs, tol=1e-5):
    """fn compiled whole by Kiln gives eager's result within `tol` (0: bit for
    bit), which holds for any order of a few terms."""
    got = kiln.compile(fn, list(inputs), strict=True)(*inputs)
    torch.testing.assert_close(got, fn(*inputs), rtol=tol, atol=tol, equal_nan=True)


def edge_pairs(dtype):
    values = torch.tensor(EDGES, dtype=dtype)
    n = values.numel()
    return values.repeat_interleave(n), values.repeat(n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nextafter_is_eagers_bit_for_bit(dtype):
    a, b = edge_pairs(dtype)
    got = kiln.compile(torch.nextafter, [a, b], strict=True)(a, b)
    want = torch.nextafter(a, b)
    assert torch.equal(got.isnan(), want.isnan())
    bits = torch.int32 if dtype == torch.float32 else torch.int64
    assert torch.equal(got[~want.isnan()].view(bits), want[~want.isnan()].view(bits))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_frexp_returns_eagers_mantissa_and_int32_exponent(dtype):
    x = torch.cat([torch.tensor(EDGES, dtype=dtype), torch.randn(50, dtype=dtype) * 1e3])
    assert_native(torch.frexp, x, tol=0)


def test_copysign_of_a_scalar_takes_its_sign_bit():
    x = torch.tensor(EDGES)
    for scalar in (-2.0, -0.0, 0.0, 5):
        assert_native(lambda t: torch.copysign(t, scalar), x, tol=0)
    assert_native(lambda t: torch.copysign(t, -1), torch.arange(-3, 4), tol=0)


@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_and_lcm_of_int64_with_zeros_and_signs(name):
    a, b = torch.arange(-12, 13).repeat_interleave(25), torch.arange(-12, 13).repeat(25)
    assert_native(getattr(torch, name), a, b * (1 << 30), tol=0)


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_without_a_dim_reduce_every_element(name):
    x = torch.randn(3, 4, 5)
    assert_native(lambda t: getattr(t, name)(), x, tol=0)
    assert_native(lambda t: getattr(t.transpose(0, 2), name)(), x, tol=0)
    x[1, 2, 3] = math.nan
    assert_native(lambda t: getattr(t, name)(), x, tol=0)


def test_addbmm_sums_the_batch_products():
    bias, a, b = torch.randn(5, 6), torch.randn(4, 5, 7), torch.randn(4, 7, 6)
    assert_native(lambda c, x, y: torch.addbmm(c, x, y, beta=0.5, alpha=2), bias, a, b, tol=1e-4)
    assert_native(lambda c, x, y: torch.addbmm(c, x, y, beta=0), bias.fill_(math.nan), a, b,
                  tol=1e-4)


def test_empty_strided_has_eagers_shape_and_dtype():
    fn = lambda x: x + torch.empty_strided((3, 5), (1, 3)).fill_(2.0)  # noqa: E731
    assert_native(fn, torch.randn(3, 5), tol=0)
    fn = lambda x: x + torch.empty_permuted((3, 5), (1, 0)).fill_(2.0)  # noqa: E731
    assert_native(fn, torch.randn(3, 5), tol=0)


def test_batch_norm_in_training_updates_the_running_statistics():
    def step(x, mean, var, weight, bias):
        return torch.ops.aten._batch_norm_with_update(x, weight, bias, mean, var, 0.1, 1e-5)[0]
    x, weight, bias = torch.randn(4, 3, 5), torch.randn(3), torch.randn(3)
    mean, var = torch.randn(3), torch.rand(3) + 0.5
    compiled = kiln.compile(step, [x, mean, var, weight, bias], strict=True)
    got_mean, got_var = mean.clone(), var.clone()
    got = compiled(x, got_mean, got_var, weight, bias)
    want = step(x, mean, var, weight, bias)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_mean, mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_var, var, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.5])
def test_embedding_with_max_norm_renormalizes_the_rows_it_reads(norm_type):
    def lookup(weight, indices):
        return torch.nn.functional.embedding(indices, weight, max_norm=1.5, norm_type=norm_type)
    weight, indices = torch.randn(10, 4) * 3, torch.tensor([[1, 3], [3, 9]])
    got_weight = weight.clone()
    got = kiln.compile(lookup, [got_weight, indices], strict=True)(got_weight, indices)
    want = lookup(weight, indices)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_weight, weight, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4), ()])
@pytest.mark.parametrize("size", [0, 2, 30])
def test_nonzero_static_pads_past_the_count_with_fill_value(shape, size):
    x = torch.randn(shape) * (torch.rand(shape) > 0.5)
    assert_native(lambda t: torch.nonzero_static(t, size=size, fill_value=-7), x, tol=0)


def test_combinations_of_a_vector():
    assert_native(lambda t: torch.combinations(t, 2), torch.randn(5), tol=0)



@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_of_a_volume(mode, padding_mode, align_corners):
    def sample(volume, grid):
        return torch.nn.functional.grid_sample(volume, grid, mode=mode, padding_mode=padding_mode,
                                               align_corners=align_corners)
    volume, grid = torch.randn(2, 3, 4, 5, 6), torch.rand(2, 3, 4, 2, 3) * 2.6 - 1.3
    assert_native(sample, volume, grid)


@pytest.mark.parametrize("size,scale_factor", [((3, 3), None), ((17, 40), None), (None, (1.7, 0.9)),
                                               (None, (0.3, 0.45))])
@pytest.mark.parametrize("align_corners", [False, True])
def test_antialiased_bilinear_resize(size, scale_factor, align_corners):
    def resize(x):
        return torch.nn.functional.interpolate(x, size=size, scale_factor=scale_factor,
                                               mode="bilinear", align_corners=align_corners,
                                               antialias=True)
    assert_native(resize, torch.randn(2, 3, 10, 20))


@pytest.mark.parametrize("density", [False, True])
def test_histogramdd_by_bin_counts_and_by_edges(density):
    x, weight = torch.randn(40, 3), torch.rand(40)
    assert_native(lambda t, w: torch.histogramdd(t, [4, 5, 2], weight=w, density=density),
                  x, weight)
    assert_native(lambda t: torch.histogramdd(t, [3, 2, 2], range=[-1.0, 1.0, -2.0, 0.5, 0.0, 0.0],
                                              density=density), x)
    edges = [torch.tensor([-1.0, 0.0, 0.5, 2.0]), torch.tensor([-3.0, 3.0]),
             torch.tensor([-0.5, 0.0, 0.5])]
    assert_native(lambda t: torch.histogramdd(t, edges, density=density).hist, x)


def test_embedding_bag_with_max_norm_renormalizes_the_rows_it_reads():
    def bags(weight, indices):
        return torch.nn.functional.embedding_bag(indices, weight, max_norm=1.0, mode="sum")
    weight, indices = torch.randn(10, 4) * 3, torch.tensor([[1, 3, 3], [9, 0, 1]])
    got_weight = weight.clone()
    got = kiln.compile(bags, [got_weight, indices], strict=True)(got_weight, indices)
    torch.testing.assert_close(got, bags(weight, indices), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_weight, weight, rtol=1e-5, atol=1e-5)



def test_lookups_and_unfold_of_a_0_dim_tensor():
    x = torch.tensor(2.5)
    assert_native(lambda t: torch.index_select(t, 0, torch.tensor([0])), x, tol=0)
    assert_native(lambda t: torch.gather(t, 0, torch.tensor(0)), x, tol=0)
    assert_native(lambda t: torch.gather(t, -1, torch.tensor([0])), x, tol=0)
    assert_native(lambda t: t.unfold(0, 1, 1), x, tol=0)
    assert_native(lambda t: t.unfold(0, 0, 1), x, tol=0)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
