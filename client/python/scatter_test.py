"""kiln.compile of what the OpInfo suite (opinfo_test.py) found wrong or
refused: the tracer's scatter decompositions with negative dims, ops on empty
tensors, attention's logsumexp, writes into views (kiln/_decompositions.py,
kiln/_tracing.py), and the scatter family with every reduction
(codegen/ops/scatter_reduce.cc), through a real kilnd (conftest.py starts it).

Runs under pytest (the checkout's .venv); each test case is counted by
the test command through the JUnit XML written to $XML_OUTPUT_FILE.
"""
import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402


def assert_same(fn, *inputs):
    """fn through Kiln gives eager's result exactly (these ops only move values)."""
    got = kiln.compile(fn, list(inputs))(*inputs)
    torch.testing.assert_close(got, fn(*inputs), rtol=0, atol=0)


@pytest.mark.parametrize("dim,index", [(-1, -1), (-1, 2), (-2, 0), (1, -1)])
def test_select_scatter_counts_negative_dims_from_the_end(dim, index):
    x, src = torch.randn(5, 4, 3), torch.randn(5, 4, 3).select(dim, 0)
    assert_same(lambda a, b: torch.select_scatter(a, b, dim, index), x, src)


def test_slice_scatter_counts_negative_dims_from_the_end():
    x, src = torch.randn(2, 3, 6), torch.randn(2, 3, 2)
    assert_same(lambda a, b: torch.slice_scatter(a, b, -1, 1, 5, 2), x, src)


def test_pixel_shuffle_of_no_channels_is_empty():
    assert_same(lambda x: torch.pixel_shuffle(x, 2), torch.randn(1, 0, 4, 4))


def test_softmax_of_an_empty_tensor_is_empty():
    assert_same(lambda x: torch.softmax(x, 2), torch.randn(5, 0, 0))


def test_flash_attention_for_cpu_returns_the_logsumexp_of_the_scores():
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    q, k, v = torch.randn(2, 2, 3, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    for options in [{"is_causal": True}, {"attn_mask": torch.randn(3, 6)}]:
        fn = lambda q, k, v: flash(q, k, v, **options)  # noqa: E731
        got = kiln.compile(fn, [q, k, v])(q, k, v)
        torch.testing.assert_close(got, list(fn(q, k, v)), rtol=1e-4, atol=1e-4)


def test_a_write_into_a_view_that_functionalize_leaves_is_refused_by_strict_and_runs_else():
    x = torch.randn(1, 2, 3, 3)

    def circular(a):  # ATen's form (F.pad's circular mode takes Kiln's own)
        return torch.ops.aten._pad_circular(a, [1, 1, 1, 1])
    with pytest.raises(kiln.UnsupportedOpError, match=r"node 'copy_' \(aten.copy_.default\) "
                       r"writes into a view that functionalize leaves in place"):
        kiln.compile(circular, [x], strict=True)
    with pytest.warns(RuntimeWarning, match="writes into a view"):
        compiled = kiln.compile(circular, [x])
    torch.testing.assert_close(compiled(x), circular(x), rtol=0, atol=0)


def assert_native(fn, *inputs, tol=1e-5):
    """fn compiled whole by Kiln (strict: no op through torch) gives eager's
    result within `tol`, which holds for any order of a few terms."""
    got = kiln.compile(fn, list(inputs), strict=True)(*inputs)
    torch.testing.assert_close(got, fn(*inputs), rtol=tol, atol=tol, equal_nan=True)


# Rows 0 and 3 are named several times, rows 1 and 9 never.
DUPLICATES = torch.tensor([[0, 3, 3, 0, 8], [3, 0, 3, 2, 5], [0, 0, 4, 3, 7]])


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_folds_duplicate_indices_as_eager(reduce, include_self):
    x, src = torch.randn(10, 5), torch.randn(3, 5)
    assert_native(lambda a, i, s: a.scatter_reduce(0, i, s, reduce, include_self=include_self),
                  x, DUPLICATES, src)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_lets_a_nan_win(reduce):
    x, src = torch.randn(4, 3), torch.randn(4, 3)
    x[1, 2], src[2, 0] = float("nan"), float("nan")
    index = torch.tensor([[1, 0, 1], [3, 1, 1], [0, 0, 1], [0, 2, 3]])
    assert_native(lambda a, i, s: a.scatter_reduce(0, i, s, reduce), x, index, src)


def test_scatter_reduce_mean_of_integers_divides_by_the_floor():
    x, src = torch.randint(-50, 50, (6, 4)), torch.randint(-50, 50, (6, 4))
    index = torch.randint(0, 4, (6, 4))
    for include_self in (True, False):
        assert_native(lambda a, i, s: a.scatter_reduce(-1, i, s, "mean", include_self=include_self),
                      x, index, src, tol=0)


def test_scatter_with_reduce_adds_or_multiplies():
    x, src = torch.randn(3, 6), torch.randn(3, 4)
    index = torch.tensor([[5, 5, 0, 1], [2, 2, 2, 2], [0, 4, 4, 5]])
    assert_native(lambda a, i, s: a.scatter(1, i, s, reduce="add"), x, index, src)
    assert_native(lambda a, i, s: a.scatter(-1, i, s, reduce="multiply"), x, index, src)
    assert_native(lambda a, i: a.scatter(1, i, 1.5, reduce="multiply"), x, index)


def test_scatter_reduce_of_an_empty_index_is_self():
    x, src = torch.randn(4, 3), torch.randn(4, 3)
    index = torch.zeros(0, 3, dtype=torch.int64)
    assert_native(lambda a, i, s: a.scatter_reduce(0, i, s, "prod", include_self=False),
                  x, index, src)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce_folds_duplicate_indices_as_eager(reduce, include_self):
    x, source = torch.randn(3, 5, 2), torch.randn(3, 7, 2)
    index = torch.tensor([4, 0, 4, 4, 1, 0, 2])
    assert_native(lambda a, i, s: a.index_reduce(-2, i, s, reduce, include_self=include_self),
                  x, index, source)


def test_index_reduce_of_0_dim_tensors():
    x, index, source = torch.tensor(1.5), torch.tensor([0]), torch.tensor(-2.0)
    for reduce in ("prod", "mean", "amax", "amin"):
        assert_native(lambda a, i, s: a.index_reduce(0, i, s, reduce, include_self=False),
                      x, index, source)


@pytest.mark.parametrize("accumulate", [True, False])
def test_put_counts_negative_indices_from_the_end(accumulate):
    x, source = torch.randn(3, 4), torch.randn(2, 3)
    index = torch.tensor([[0, -1, 5], [-12, 7, 6]])
    assert_native(lambda a, i, s: a.put(i, s, accumulate=accumulate), x, index, source)


def test_put_with_duplicate_indices_adds_each():
    x, source = torch.randn(5), torch.randn(6)
    index = torch.tensor([1, 1, -4, 3, 3, 3])
    assert_native(lambda a, i, s: a.put(i, s, accumulate=True), x, index, source)


def test_put_into_a_0_dim_tensor_and_with_no_index():
    assert_native(lambda a, i, s: a.put(i, s), torch.tensor(1.0), torch.tensor(0),
                  torch.tensor([3.0]))
    assert_native(lambda a, i, s: a.put(i, s, accumulate=True), torch.randn(2, 2),
                  torch.zeros(0, dtype=torch.int64), torch.randn(0))


def test_masked_scatter_takes_the_source_in_order_with_a_broadcast_mask():
    mask = torch.tensor([[True, False, True], [False, False, True]])
    assert_native(lambda a, m, s: a.masked_scatter(m, s), torch.randn(2, 3), mask,
                  torch.randn(4, 2))
    assert_native(lambda a, m, s: a.masked_scatter(m, s), torch.randn(3), mask, torch.randn(6))
    assert_native(lambda a, m, s: a.masked_scatter(m, s), torch.randn(2, 3),
                  torch.tensor([True, False, True]), torch.randn(9))


@pytest.mark.parametrize("offset,dim1,dim2", [(0, 0, 1), (2, 0, 1), (-2, 1, 0), (1, -1, 0)])
def test_diagonal_scatter_writes_one_diagonal(offset, dim1, dim2):
    x = torch.randn(4, 3, 5)
    src = torch.randn_like(torch.diagonal(x, offset, dim1, dim2))
    assert_native(lambda a, s: torch.diagonal_scatter(a, s, offset, dim1, dim2), x, src, tol=0)


def test_as_strided_scatter_writes_the_strided_positions():
    assert_native(lambda a, s: torch.as_strided_scatter(a, s, (2, 2), (1, 2), 1),
                  torch.randn(3, 3), torch.randn(2, 2), tol=0)
    assert_native(lambda a, s: torch.as_strided_scatter(a, s, (2, 1, 1, 2), (1, 2, 4, 8)),
                  torch.randn(16), torch.randn(2, 1, 1, 2), tol=0)
    assert_native(lambda a, s: torch.as_strided_scatter(a, s, (), ()), torch.randn(1),
                  torch.randn(()), tol=0)



@pytest.mark.parametrize("initial", [None, 2.5])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "max", "min"])
def test_segment_reduce_by_lengths_and_offsets_with_empty_segments(reduce, initial):
    data = torch.randn(6, 3)
    lengths, offsets = torch.tensor([2, 0, 3, 1, 0]), torch.tensor([1, 1, 3, 5, 5])
    assert_native(lambda d, n: torch.segment_reduce(d, reduce, lengths=n, initial=initial),
                  data, lengths)
    assert_native(lambda d, o: torch.segment_reduce(d, reduce, offsets=o, initial=initial),
                  data, offsets)


def test_segment_reduce_of_batched_lengths_and_offsets_along_axis_1():
    data = torch.randn(2, 5, 3)
    lengths = torch.tensor([[2, 0, 3], [1, 1, 3]])
    offsets = torch.tensor([[0, 2, 2, 5], [1, 2, 2, 4]])
    assert_native(lambda d, n: torch.segment_reduce(d, "mean", lengths=n, axis=1, initial=1.0),
                  data, lengths)
    assert_native(lambda d, o: torch.segment_reduce(d, "max", offsets=o, axis=1), data, offsets)


@pytest.mark.parametrize("x,index", [(torch.tensor(2.0), torch.tensor(0)),
                                     (torch.randn(2, 3), torch.tensor(-2))])
def test_take_with_a_0_dim_index_reads_the_flat_position_it_names(x, index):
    assert_native(torch.take, x, index, tol=0)

if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
