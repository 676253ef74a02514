"""kiln.compile of sort, argsort, msort, topk, kthvalue, median, nanmedian
and mode (codegen/ops/sorting.cc, client/runtime/sort.h) at lengths far past
what comparing every pair allows, with ties and NaNs, against eager: values
and indices exactly, the positions of equal elements included. Through a
real kilnd (conftest.py starts it).

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

LONG = 20000  # elements along the sorted dim


def assert_same(fn, *inputs):
    """fn through Kiln gives eager's values and indices exactly (these ops
    only choose elements)."""
    got = kiln.compile(fn, list(inputs), strict=True)(*inputs)
    torch.testing.assert_close(got, fn(*inputs), rtol=0, atol=0, equal_nan=True)


def rows_with_ties(rows, n, dtype=torch.float32, nans=True):
    """Few distinct values (ties everywhere), NaNs at scattered positions,
    and a whole row of NaNs when there are NaNs."""
    x = torch.randint(-20, 20, (rows, n), generator=torch.Generator().manual_seed(36)).to(dtype)
    if nans:
        x[0, ::97] = float("nan")
        x[-1] = float("nan")
    return x


@pytest.mark.parametrize("descending", [False, True])
def test_sort_of_long_rows_is_stable_with_nan_largest(descending):
    x = rows_with_ties(3, LONG)
    assert_same(lambda a: list(torch.sort(a, descending=descending, stable=True)), x)
    assert_same(lambda a: torch.argsort(a, dim=-1, descending=descending, stable=True), x)
    assert_same(lambda a: list(torch.sort(a, dim=0, descending=descending, stable=True)), x.T)
    assert_same(torch.msort, x.T.contiguous())


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.bool])
def test_sort_of_other_dtypes(dtype):
    x = rows_with_ties(2, LONG, dtype, nans=False)
    if dtype == torch.bool:
        x = x > 0
    assert_same(lambda a: list(torch.sort(a, stable=True)), x)
    assert_same(lambda a: list(torch.sort(a, descending=True, stable=True)), x)


@pytest.mark.parametrize("k,largest", [(5, True), (5, False), (300, True), (4000, False),
                                       (LONG, True)])
def test_topk_of_long_rows_picks_eagers_positions_among_ties(k, largest):
    # k * 64 <= n: eager partially sorts; else it selects, then sorts.
    x = rows_with_ties(3, LONG)
    assert_same(lambda a: list(torch.topk(a, k, largest=largest)), x)
    assert_same(lambda a: list(torch.topk(a, k, dim=0, largest=largest)), x.T)


def test_kthvalue_of_long_rows_picks_eagers_position_among_ties():
    x = rows_with_ties(3, LONG)
    for k in (1, 777, LONG // 2, LONG):
        assert_same(lambda a: list(torch.kthvalue(a, k)), x)
    assert_same(lambda a: list(torch.kthvalue(a, 3, 0, keepdim=True)), x.T)


def test_median_nanmedian_and_mode_of_long_rows():
    x = rows_with_ties(4, LONG + 1)
    assert_same(lambda a: list(torch.median(a, -1)), x)
    assert_same(lambda a: list(torch.nanmedian(a, 1, keepdim=True)), x)
    assert_same(lambda a: list(torch.median(a, 0)), x.T)
    assert_same(lambda a: [torch.median(a), torch.nanmedian(a)], x)
    assert_same(lambda a: [torch.median(a), torch.nanmedian(a)], x[1:3])
    finite = rows_with_ties(4, LONG, nans=False)
    assert_same(lambda a: list(torch.mode(a, -1)), finite)
    assert_same(lambda a: list(torch.mode(a, 0, keepdim=True)), finite.T.long())


def test_16_bit_floats_sort_as_eager():
    x = torch.randn(2, 3000).to(torch.bfloat16)  # bfloat16 has ties at this length
    assert_same(lambda a: list(torch.sort(a, stable=True)), x)
    assert_same(lambda a: list(torch.topk(a.half(), 10)), x)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
