"""kiln.compile of what the OpInfo suite (opinfo_test.py) found wrong or
refused: the tracer's scatter decompositions with negative dims, ops on empty
tensors, attention's logsumexp, writes into views (kiln/_decompositions.py,
kiln/_tracing.py), through a real kilnd (conftest.py starts it).

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


def test_a_write_into_a_view_that_functionalize_leaves_is_refused():
    x = torch.randn(1, 2, 3, 3)
    with pytest.raises(kiln.UnsupportedOpError, match=r"node 'copy_' \(aten.copy_.default\) "
                       r"writes into a view that functionalize leaves in place"):
        kiln.compile(lambda a: torch.nn.functional.pad(a, (1, 1, 1, 1), mode="circular"), [x])


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
