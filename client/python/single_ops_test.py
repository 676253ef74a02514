"""kiln.compile, strict (no op through torch), of single ops the OpInfo suite
(opinfo_test.py) found refused: the IEEE bit operations, gcd and lcm, full
max and min, addbmm and empty_strided in the op table (codegen/ops/), and
the tracer's forms of training batch norm, embedding_renorm,
nonzero_static, 3-d grid sampling, antialiased bilinear resizing and
histogramdd (kiln/_op_forms.py, kiln/_decompositions.py), lookups and
unfold of 0-dim tensors, int32 operands, fractional max pooling, and cov,
corrcoef and gaussian_nll_loss with their value checks as graph ops
(kiln/_checks.py), each against
eager through a real kilnd (conftest.py starts it).

Runs under pytest (the checkout's .venv); each test case is counted by
the test command through the JUnit XML written to $XML_OUTPUT_FILE.
"""
import functools
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


# --- cov and corrcoef (kiln/_decompositions_stats.py), int32 operands and
# fractional max pooling (codegen/ops/fractional_max_pool.cc) ---------------

@pytest.mark.parametrize("correction", [0, 1, 2])
def test_cov_without_weights_is_eagers(correction):
    x = torch.randn(3, 7, dtype=torch.float64)
    assert_native(lambda t: torch.cov(t, correction=correction), x)
    assert_native(lambda t: t.cov(correction=correction), x[0])
    assert_native(torch.cov, torch.randint(-5, 6, (2, 5)))  # int64 rows: a float32 result


def test_cov_with_no_degrees_of_freedom_is_eagers_inf_and_nan():
    # Two observations, correction 2: eager warns and divides by 0 (a
    # constant row's covariances are 0 / 0).
    x = torch.tensor([[1.5, -1.0], [0.0, 0.0], [2.0, 3.0]])
    cov = functools.partial(torch.cov, correction=2)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        got = kiln.compile(cov, [x], strict=True)(x)
    want = cov(x)
    assert torch.isinf(want).any() and torch.isnan(want).any()
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def test_corrcoef_is_eagers():
    rows = torch.randn(4, 9)
    rows[2] = 3.0  # no variance: a row and a column of NaN, as eager
    assert_native(torch.corrcoef, rows)
    assert_native(torch.corrcoef, torch.randn(6))      # one variable: c / c
    assert_native(torch.corrcoef, torch.zeros(1, 5))   # 0 / 0


def test_clamp_of_float32_with_int32_bounds_is_eagers():
    x = torch.randn(5, 10, 5) * 4
    low = torch.randint(-3, 1, (5, 10, 5), dtype=torch.int32)
    high = torch.randint(1, 4, (10, 5), dtype=torch.int32)
    assert_native(torch.clamp, x, low, None, tol=0)
    assert_native(torch.clamp, x, low, high, tol=0)
    assert_native(torch.maximum, low, high, tol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fractional_max_pool_is_eagers(dtype):
    x = torch.randn(2, 3, 13, 11, dtype=dtype)
    u = torch.rand(2, 3, 2, dtype=dtype)
    assert_native(lambda t, s: torch.ops.aten.fractional_max_pool2d(t, [3, 2], [6, 7], s),
                  x, u, tol=0)
    assert_native(lambda t, s: torch.ops.aten.fractional_max_pool2d(t, [2, 2], [5, 4], s),
                  x[0], u[:1], tol=0)
    volume = torch.randn(2, 2, 6, 7, 5, dtype=dtype)
    samples = torch.rand(2, 2, 3, dtype=dtype)
    assert_native(lambda t, s: torch.ops.aten.fractional_max_pool3d(t, [2, 3, 2], [3, 4, 3], s),
                  volume, samples, tol=0)


def test_nn_fractional_max_pool_draws_and_pools_as_eager():
    """F.fractional_max_pool2d draws its samples with torch.rand (Kiln
    draws what eager draws) and pools them natively: the same values and
    indices as eager from the same seed."""
    import torch.nn.functional as F
    x = torch.randn(2, 3, 10, 9)

    def pool(t):
        return F.fractional_max_pool2d(t, 2, output_ratio=(0.5, 0.5), return_indices=True)

    compiled = kiln.compile(pool, [x], strict=True)
    torch.manual_seed(7)
    got = compiled(x)
    torch.manual_seed(7)
    want = pool(x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


# --- value checks as graph ops (kiln/_checks.py, codegen/ops/check.cc) -------

@pytest.mark.parametrize("correction", [0, 1, 3])
def test_cov_with_weights_is_eagers(correction):
    x = torch.randn(3, 6, dtype=torch.float64)
    fweights = torch.randint(0, 4, (6,), dtype=torch.int32)
    fweights[0] = 2
    aweights = torch.rand(6, dtype=torch.float64)
    assert_native(lambda t, f: torch.cov(t, correction=correction, fweights=f), x, fweights)
    assert_native(lambda t, a: torch.cov(t, correction=correction, aweights=a), x, aweights)
    assert_native(lambda t, f, a: torch.cov(t, correction=correction, fweights=f, aweights=a),
                  x, fweights, aweights)
    # One observation with one kind of weights: eager's zero deviations.
    assert_native(lambda t, a: torch.cov(t, aweights=a), x[:, :1], aweights[:1])


def test_cov_with_negative_or_zero_weights_raises_eagers_error():
    x = torch.randn(2, 4)

    def cov(t, f):
        return torch.cov(t, fweights=f)

    compiled = kiln.compile(cov, [x, torch.ones(4, dtype=torch.int64)], strict=True)
    with pytest.raises(RuntimeError, match=r"^cov\(\): fweights cannot be negative$"):
        compiled(x, torch.tensor([1, -1, 2, 0]))
    with pytest.raises(RuntimeError, match=r"^cov\(\): weights sum to zero, can't be normalized$"):
        compiled(x, torch.zeros(4, dtype=torch.int64))
    torch.testing.assert_close(compiled(x, torch.tensor([1, 3, 0, 2])),
                               cov(x, torch.tensor([1, 3, 0, 2])), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_gaussian_nll_loss_is_eagers_and_raises_on_a_negative_variance(reduction):
    import torch.nn.functional as F
    x, target = torch.randn(4, 5), torch.randn(4, 5)
    for var in (torch.rand(4, 5), torch.rand(4), torch.rand(4, 1), torch.zeros(4, 5)):
        def loss(a, b, v):
            return F.gaussian_nll_loss(a, b, v, full=True, eps=1e-3, reduction=reduction)
        assert_native(loss, x, target, var)
    compiled = kiln.compile(loss, [x, target, torch.rand(4, 5)], strict=True)
    negative = torch.rand(4, 5)
    negative[2, 3] = -0.5
    with pytest.raises(ValueError, match=r"^var has negative entry/entries$"):
        compiled(x, target, negative)
