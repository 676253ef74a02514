"""kiln.compile of the tracer's scatter decompositions (kiln/_decompositions.py)
with negative dims, and of ops on empty tensors, through a real kilnd
(conftest.py starts it).

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


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
