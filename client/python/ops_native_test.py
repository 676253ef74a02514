"""kiln.compile, strict (no op through torch), of single ops the OpInfo suite
(opinfo_test.py) found refused: gather of an empty index, clamp with a
tensor bound, integer division of no elements, unravel_index, circular
padding, histogram, index_add into a 0-dim tensor, x[mask] = v with a
tensor v, x[i, j] = v with several index tensors, embedding_bag with
offsets, max_pool3d whose ceil_mode drops a last window,
linear_cross_entropy's chunked forms and resize_, each against eager
through a real kilnd (conftest.py starts it).

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


def assert_native(fn, *inputs, tol=1e-5):
    """fn compiled whole by Kiln gives eager's result within `tol` (0: bit for
    bit), which holds for any order of a few terms."""
    got = kiln.compile(fn, list(inputs), strict=True)(*inputs)
    torch.testing.assert_close(got, fn(*inputs), rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("index_shape", [(2, 0), (0,), (0, 9), (3, 0, 2)])
def test_gather_of_an_empty_index_is_empty_in_its_shape(index_shape):
    x, index = torch.randn(5, 4), torch.zeros(index_shape, dtype=torch.int64)
    assert_native(lambda t, i: torch.gather(t[0], 0, i), x, index, tol=0)
    assert_native(lambda t, i: torch.gather(t, -1, i), x, index, tol=0)


@pytest.mark.parametrize("name", ["clamp_min", "clamp_max"])
def test_clamp_min_and_max_with_a_tensor_bound(name):
    x = torch.tensor([[1.0, math.nan, -2.0, 0.5], [3.0, -0.0, math.inf, -math.inf]])
    bound = torch.tensor([0.0, 1.0, math.nan, -1.0])
    assert_native(getattr(torch, name), x, bound, tol=0)
    assert_native(lambda t, b: getattr(t.clone(), name + "_")(b), x, bound, tol=0)
    assert_native(getattr(torch, name), torch.arange(-3, 5).reshape(2, 4), bound, tol=0)


def test_cosine_similarity_of_vectors_near_zero():
    a, b = torch.randn(6, 5), torch.randn(6, 5)
    a[0], b[1] = 0.0, 1e-6
    assert_native(torch.nn.functional.cosine_similarity, a, b)
    assert_native(lambda x, y: torch.nn.functional.cosine_similarity(x, y, dim=0, eps=0.1), a, b)


@pytest.mark.parametrize("rows,cols,offset", [(0, 0, 0), (4, 0, 0), (0, 0, 3)])
def test_tril_and_triu_indices_of_no_columns(rows, cols, offset):
    ones = torch.ones(1, dtype=torch.int64)
    assert_native(lambda t: torch.tril_indices(rows, cols, offset) * t, ones, tol=0)
    assert_native(lambda t: torch.triu_indices(rows, cols, offset) * t, ones, tol=0)


def test_integer_division_of_no_elements_by_zero_is_empty():
    x = torch.zeros(0, 3, dtype=torch.int64)
    assert_native(lambda t: torch.floor_divide(t, 0), x, tol=0)
    assert_native(lambda t: torch.remainder(t, 0), x, tol=0)
    assert_native(lambda t, d: torch.floor_divide(t, d), x, torch.zeros(3, dtype=torch.int64),
                  tol=0)


@pytest.mark.parametrize("shape", [(4, 5), (1, 1 << 62), (6, 7, 8, 9), (10, 3, 5), 7])
def test_unravel_index_by_constant_strides(shape):
    count = math.prod([shape] if isinstance(shape, int) else shape)
    generator = torch.Generator().manual_seed(0)
    indices = torch.randint(0, min(count, 1 << 62), (3, 4), generator=generator)
    assert_native(lambda t: torch.unravel_index(t, shape), indices, tol=0)
    assert_native(lambda t: torch.unravel_index(t, shape), indices[0, 0], tol=0)
    assert_native(lambda t: torch.unravel_index(t, shape), indices[:0], tol=0)


@pytest.mark.parametrize("shape,pad", [((2, 3, 4), (1, 2)), ((0, 3, 4), (2, 0)),
                                       ((3, 4), (3, 3)),
                                       ((1, 3, 5, 6), (0, 2, 3, 1)),
                                       ((1, 3, 4, 4), (-1, 1, -2, 1)),
                                       ((2, 2, 3, 3, 3), (1, 1, 2, 0, -1, 2))])
def test_circular_padding_wraps_and_crops(shape, pad):
    x = torch.randn(shape)
    assert_native(lambda t: torch.nn.functional.pad(t, pad, mode="circular"), x, tol=0)
    assert_native(lambda t: torch.nn.functional.pad(t.transpose(-1, -2), pad, mode="circular"),
                  x, tol=0)


@pytest.mark.parametrize("density", [False, True])
def test_histogram_by_a_bin_count_and_by_edges(density):
    x, weight = torch.randn(4, 10), torch.rand(4, 10)
    assert_native(lambda t: torch.histogram(t, 5, density=density), x)
    assert_native(lambda t, w: torch.histogram(t, 3, range=(-1.0, 0.5), weight=w,
                                               density=density), x, weight)
    assert_native(lambda t: torch.histogram(t[0, 0], 4, density=density), x)
    edges = torch.tensor([-2.0, -0.5, 0.0, 0.1, 3.0])
    assert_native(lambda t, e: torch.histogram(t, e, density=density), x, edges)
    assert_native(lambda t, e, w: torch.histogram(t, e, weight=w, density=density), x, edges,
                  weight)
    assert_native(lambda t: torch.histogram(t[:, :0], 4, density=density), x)


@pytest.mark.parametrize("alpha", [1, -1, 2.5])
def test_index_add_into_a_0_dim_tensor(alpha):
    x, source = torch.tensor(1.5), torch.tensor(-4.0)
    for index in (torch.tensor([0]), torch.tensor(0)):
        assert_native(lambda t, i, s: torch.index_add(t, 0, i, s, alpha=alpha), x, index, source,
                      tol=0)
    assert_native(lambda t, i, s: t.clone().index_add_(-1, i, s, alpha=alpha), x,
                  torch.tensor([0]), source, tol=0)


@pytest.mark.parametrize("accumulate", [False, True])
def test_masked_put_of_a_tensor_broadcast_to_the_selection(accumulate):
    x = torch.randn(4, 3, 5)
    x[0, 0, 0] = -0.0
    cases = [(torch.tensor([True, False, True, True]), torch.randn(5)),
             (torch.tensor([True, False, True, True]), torch.randn(3, 5)),
             (torch.tensor([True, False, True, True]), torch.randn(1, 3, 1)),
             (torch.rand(4, 3) > 0.5, torch.randn(5)),
             (torch.rand(4, 3, 5) > 0.5, torch.tensor([2.0]))]
    for mask, values in cases:
        assert_native(lambda t, m, v: torch.index_put(t, (m,), v, accumulate=accumulate),
                      x, mask, values, tol=0)
    mask = torch.tensor([True, False, True])
    assert_native(lambda t, m, v: torch.ops.aten.index_put(t, [None, m], v, accumulate), x, mask,
                  torch.randn(4, 1, 5), tol=0)


def test_masked_put_of_a_value_per_selected_element_is_refused_with_what_to_do():
    x, mask = torch.randn(4, 3), torch.tensor([True, False, True, True])
    with pytest.raises(kiln.UnsupportedOpError,
                       match=r"x\[mask\] = v with a v that does not broadcast to every count of "
                       r"elements the mask selects \(a size that depends on the values\); use "
                       r"torch.where\(mask, v, x\)"):
        kiln.compile(lambda t, m, v: torch.index_put(t, (m,), v), [x, mask, torch.randn(3, 3)],
                     strict=True)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_with_several_index_tensors(accumulate):
    x = torch.randn(4, 5, 6)
    rows, cols = torch.tensor([[0, 3], [-1, 2]]), torch.tensor([4, -5])
    put = lambda t, v, *i: torch.ops.aten.index_put(t, list(i), v, accumulate)  # noqa: E731
    assert_native(put, x, torch.randn(2, 2, 6), rows, cols)  # adjacent dims 0 and 1
    assert_native(lambda t, v, i, j: put(t, v, None, i, j), x, torch.randn(4, 2, 2), rows,
                  torch.tensor([5, -6]))  # adjacent dims 1 and 2, values in x's order
    assert_native(lambda t, v, i, j: put(t, v, i, None, j), x, torch.randn(2, 2, 5), rows,
                  torch.tensor([5, -6]))  # dims 0 and 2: the indexed dims first
    assert_native(lambda t, v, i, j, k: put(t, v, i, j, k), x, torch.tensor(3.0), rows, cols,
                  torch.tensor([[1], [0]]))
    if accumulate:  # repeated positions add up
        same = torch.tensor([1, 1, 1])
        assert_native(put, x, torch.randn(3, 6), same, same)


def test_index_put_with_several_index_tensors_stops_on_a_position_outside_its_dim():
    x = torch.randn(4, 5)
    compiled = kiln.compile(lambda t, i, j: torch.index_put(t, (i, j), torch.tensor(1.0)),
                            [x, torch.tensor([0]), torch.tensor([1])], strict=True)
    with pytest.raises(IndexError, match="index_copy: index 20 is out of bounds for dim 0 with "
                       "size 20"):
        compiled(x, torch.tensor([0]), torch.tensor([5]))


@pytest.mark.parametrize("shape", [(5, 5), (5, 5, 5)])
def test_unsafe_masked_index_put_accumulate(shape):
    x = torch.randn(shape)
    grid = [torch.arange(7).reshape([-1] + [1] * (len(shape) - 1 - d)) % shape[d] - 2
            for d in range(len(shape))]
    broadcast = torch.broadcast_shapes(*(g.shape for g in grid))
    mask, values = torch.rand(broadcast) > 0.4, torch.randn(broadcast)
    assert_native(lambda t, m, v, *i: torch.ops.aten._unsafe_masked_index_put_accumulate(
        t, m, list(i), v), x, mask, values, *grid)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_of_bags_of_varying_size(mode, include_last_offset, padding_idx):
    weight = torch.randn(6, 3)
    indices = torch.tensor([1, 2, 4, 4, 3, 2, 2, 0, 5])
    # Empty bags, a bag of padding alone; include_last_offset's last is the
    # count of indices, as its contract says.
    offsets = torch.tensor([0, 0, 3, 4, 4, 9 if include_last_offset else 8])
    weights = torch.rand(9) if mode == "sum" else None

    def bags(w, i, o, p):
        return torch.nn.functional.embedding_bag(i, w, o, mode=mode, per_sample_weights=p,
                                                 include_last_offset=include_last_offset,
                                                 padding_idx=padding_idx)
    assert_native(bags, weight, indices, offsets, weights)
    assert_native(bags, weight, indices[:0], offsets[:1] * 0, weights[:0] if mode == "sum"
                  else None)


@pytest.mark.parametrize("kernel,stride,padding", [(3, None, 1), (2, 2, 1),
                                                    ((3, 2, 3), (2, 3, 2), (1, 1, 0))])
def test_max_pool3d_in_ceil_mode_drops_a_window_starting_in_the_right_padding(kernel, stride,
                                                                               padding):
    def pool(t):
        return torch.nn.functional.max_pool3d(t, kernel, stride, padding, ceil_mode=True,
                                              return_indices=True)
    assert_native(pool, torch.randn(2, 6, 6, 5), tol=0)
    assert_native(pool, torch.randn(1, 2, 5, 7, 4), tol=0)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_linear_cross_entropy_chunked_is_the_loss_taken_whole(reduction):
    from torch.nn import LinearCrossEntropyOptions
    x, w, bias, target = torch.randn(8, 5), torch.randn(6, 5), torch.randn(6), torch.arange(8) % 6
    options = LinearCrossEntropyOptions(batch_chunk_size=3)
    for weight, ignore_index in ((None, -100), (torch.rand(6), 2)):
        assert_native(lambda t, lw, y, b, cw: torch.nn.functional.linear_cross_entropy(
            t, lw, y, linear_bias=b, weight=cw, ignore_index=ignore_index, reduction=reduction,
            options=options), x, w, target, bias, weight)


def test_resize_to_as_many_elements_or_fewer():
    def resized(x):
        y = x * 2.0
        y.resize_(3, 4)
        z = y[1:].clone()
        z.resize_as_(torch.empty(5))
        w = x.clone().resize_(())
        return y + 1.0, y.sum(0), z, w
    assert_native(resized, torch.randn(2, 6), tol=0)
    assert_native(lambda t: torch.resize_as_(t.clone(), torch.empty(1, 1, 1)), torch.tensor(2.0),
                  tol=0)


@pytest.mark.parametrize("fn,why", [
    (lambda t: t.clone().resize_(5, 5), r"x.resize_\(\[5, 5\]\) of a tensor of 12 elements: the "
     r"elements it adds are uninitialized memory"),
    (lambda t: t.t().resize_(12), r"resize_ of a non-contiguous tensor \(strides \[1, 6\]\) reads "
     r"its storage in memory order; call .contiguous\(\) first")])
def test_resize_that_no_graph_can_match_is_refused_with_what_to_do(fn, why):
    with pytest.raises(kiln.UnsupportedOpError, match=why):
        kiln.compile(fn, [torch.randn(2, 6)], strict=True)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
