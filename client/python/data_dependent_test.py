"""kiln.compile, strict (no op through torch), of ops whose result's size
depends on their input's values (kiln/_data_dependent.py): nonzero,
argwhere, masked_select, unique and unique_consecutive as a graph's
results, against eager through a real kilnd (conftest.py starts it); one
artifact serves every count, and a fresh process hits it.

Runs under pytest (the checkout's .venv); each test case is counted by
the test command through the JUnit XML written to $XML_OUTPUT_FILE.
"""
import os
import sys
import warnings

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402
from conftest import compiles, fresh_process_result  # noqa: E402


def assert_exact(got, want):
    """Same shapes, dtypes and values, bit for bit (indices and copies)."""
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def test_nonzero_serves_every_count_with_one_artifact():
    compiled = kiln.compile(torch.nonzero, [torch.tensor([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0]])],
                            strict=True)
    before = compiles()
    masks = [torch.zeros(2, 3), torch.ones(2, 3), torch.tensor([[0.0, 0.0, 0.0], [0.0, -2.0, 0.0]]),
             torch.tensor([[float("nan"), 0.0, -0.0], [1e-40, 0.0, 5.0]])]
    for mask in masks:
        assert_exact(compiled(mask), torch.nonzero(mask))
    assert compiles() == before, "a count the trace did not see compiled again"


@pytest.mark.parametrize("x", [torch.tensor(0.0), torch.tensor(3.0), torch.zeros(0, 3),
                               torch.zeros(4, 0, 2)], ids=["0-d zero", "0-d", "empty", "empty 3-d"])
def test_nonzero_of_0_dim_and_empty_inputs(x):
    assert_exact(kiln.compile(torch.nonzero, [x], strict=True)(x), torch.nonzero(x))


def test_argwhere_of_a_bool_mask_and_int_tensor():
    mask = torch.rand(3, 4, 5, generator=torch.Generator().manual_seed(0)) > 0.6
    assert_exact(kiln.compile(torch.argwhere, [mask], strict=True)(mask), torch.argwhere(mask))
    ints = torch.tensor([0, 7, 0, -1, 0])
    assert_exact(kiln.compile(torch.argwhere, [ints], strict=True)(ints), torch.argwhere(ints))


def test_masked_select_broadcasts_the_mask_and_keeps_every_value():
    x = torch.tensor([[-0.0, 1.5, float("inf")], [float("nan"), -3.0, 2.0]])
    mask = torch.tensor([True, False, True])

    def select(x, mask):
        return torch.masked_select(x, mask)
    compiled = kiln.compile(select, [x, mask], strict=True)
    for m in (mask, torch.zeros(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool)):
        got = compiled(x, m)
        assert_exact(got, select(x, m))
        assert torch.equal(got.signbit(), select(x, m).signbit())


@pytest.mark.parametrize("return_inverse", [False, True])
@pytest.mark.parametrize("return_counts", [False, True])
def test_unique_is_sorted_with_inverse_and_counts(return_inverse, return_counts):
    def unique(x):
        return torch.unique(x, return_inverse=return_inverse, return_counts=return_counts)
    generator = torch.Generator().manual_seed(1)
    x = torch.randint(-3, 4, (4, 5), generator=generator).float()
    compiled = kiln.compile(unique, [x], strict=True)
    for y in (x, torch.full((4, 5), 2.0), torch.arange(20.0).reshape(4, 5).flip(0)):
        assert_exact(compiled(y), unique(y))


def test_unique_of_ints_and_of_an_empty_tensor():
    ints = torch.tensor([5, -1, 5, 3, -1, 0])
    assert_exact(kiln.compile(torch.unique, [ints], strict=True)(ints), torch.unique(ints))
    empty = torch.zeros(0)

    def unique(x):
        return torch.unique(x, return_counts=True)
    assert_exact(kiln.compile(unique, [empty], strict=True)(empty), unique(empty))


@pytest.mark.parametrize("return_inverse", [False, True])
@pytest.mark.parametrize("return_counts", [False, True])
def test_unique_consecutive_keeps_runs_in_order(return_inverse, return_counts):
    def runs(x):
        return torch.unique_consecutive(x, return_inverse=return_inverse,
                                        return_counts=return_counts)
    x = torch.tensor([[1.0, 1.0, 2.0], [2.0, 2.0, 1.0]])
    compiled = kiln.compile(runs, [x], strict=True)
    for y in (x, torch.zeros(2, 3), torch.tensor([[3.0, 1.0, 3.0], [1.0, 1.0, 1.0]])):
        assert_exact(compiled(y), runs(y))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("op", ["unique", "unique_consecutive"])
def test_unique_along_a_dim_keeps_whole_slices(op, dim):
    def slices(x):
        return getattr(torch, op)(x, dim=dim, return_inverse=True, return_counts=True)
    x = torch.tensor([[[1.0, 2.0], [1.0, 2.0], [0.0, 3.0]], [[1.0, 2.0], [1.0, 2.0], [5.0, 3.0]]])
    compiled = kiln.compile(slices, [x], strict=True)
    for y in (x, torch.ones(2, 3, 2), x.flip(1), torch.arange(12.0).reshape(2, 3, 2) % 2):
        assert_exact(compiled(y), slices(y))


def test_results_with_other_outputs_and_in_place_writes():
    """The counts sit between the results and the inputs written back."""
    def f(x, total):
        total.add_(x.sum())
        return x * 2, x.nonzero(), torch.unique(x)
    x = torch.tensor([[0.0, 2.0], [2.0, 0.0]])
    total, want_total = torch.zeros(()), torch.zeros(())
    compiled = kiln.compile(f, [x, total.clone()], strict=True)
    for y in (x, torch.tensor([[1.0, 0.0], [0.0, 0.0]])):
        assert_exact(compiled(y, total), f(y, want_total))
        assert_exact(total, want_total)


def test_a_saved_package_loads_with_its_results_cut(tmp_path):
    def positions_and_values(x):
        return x.nonzero(), torch.unique(x, return_counts=True)
    x = torch.tensor([[0.0, 2.0, 2.0], [5.0, 0.0, 0.0]])
    kiln.save(positions_and_values, [x], str(tmp_path / "package"))
    loaded = kiln.load(str(tmp_path / "package"))
    for y in (x, torch.zeros(2, 3), torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 3.0]])):
        assert_exact(loaded(y), positions_and_values(y))


def positive_sum_and_values(x):
    return torch.masked_select(x, x > 0).sum() * 2.0, torch.unique(x).exp()


def rows_with_a_positive_first(x):
    keep = torch.nonzero(x[:, 0] > 0).squeeze(1)
    return x[keep] * 2.0 + keep.unsqueeze(1)


@pytest.mark.parametrize("fn, x, others", [
    (positive_sum_and_values, torch.tensor([1.0, -2.0, 3.0, 3.0, 0.5, -1.0]),
     [-torch.ones(6), torch.tensor([2.0, -1.0, -1.0, -1.0, -1.0, -1.0]), torch.arange(6.0),
      torch.tensor([4.0, 4.0, 3.0, 2.0, 1.0, 9.0])]),
    (rows_with_a_positive_first, torch.tensor([[1.0, 2.0], [-1.0, 0.5], [3.0, -4.0]]),
     [-torch.ones(3, 2), torch.tensor([[-1.0, 2.0], [5.0, 0.5], [-3.0, -4.0]]),
      torch.ones(3, 2)]),
], ids=["masked_select and unique", "nonzero"])
def test_ops_after_a_count_run_in_a_segment_of_their_own_with_the_count_a_symbol(fn, x, others):
    """Not strict: the op is a segment of its own and the ops that read its
    result another, whose symbol is the count (kiln/_partition.py); the
    last input gives a count of 2 or more the trace did not see."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # nothing runs through torch
        compiled = kiln.compile(fn, [x])
    assert "0 ops through torch" in kiln.explain(compiled), kiln.explain(compiled)
    for y in [x] + others[:-1]:
        torch.testing.assert_close(compiled(y), fn(y), rtol=1e-6, atol=1e-6)
    before = compiles()
    torch.testing.assert_close(compiled(others[-1]), fn(others[-1]), rtol=1e-6, atol=1e-6)
    assert compiles() == before, "another count compiled again"


def test_an_op_on_a_count_sized_tensor_runs_through_torch_and_the_warning_names_it():
    """unique of masked_select's result: its input's size is the count, a
    symbol, which Kiln's forms do not take; masked_select is still Kiln's."""
    def kept_unique_and_positions(x):
        kept = torch.masked_select(x, x > 0)
        return torch.unique(kept * 2).sum(), kept.nonzero()
    x = torch.tensor([1.0, -1.0, 2.0, 2.0, 3.0, -4.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = kiln.compile(kept_unique_and_positions, [x])
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "aten._unique2.default, aten.nonzero.default through torch" \
        in messages[0], messages
    explained = kiln.explain(compiled)
    assert "2 ops through torch" in explained and "masked_select" not in explained, explained
    for y in (x, torch.tensor([5.0, 5.0, 5.0, 1.0, -1.0, 0.0]), -torch.ones(6)):
        torch.testing.assert_close(compiled(y), kept_unique_and_positions(y), rtol=0, atol=0)


FRESH = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch, kiln
compiled = kiln.compile(torch.nonzero, [torch.tensor([0.0, 4.0, 0.0, 1.0])], strict=True)
x = torch.tensor([1.0, 0.0, 0.0, 1.0])
torch.testing.assert_close(compiled(x), torch.nonzero(x), rtol=0, atol=0)
print(json.dumps(compiled.artifact()["key"]))
"""


def test_a_fresh_process_hits_the_artifact():
    key = fresh_process_result(FRESH, HERE)
    before = compiles()
    assert fresh_process_result(FRESH, HERE) == key
    assert compiles() == before, "the fresh process compiled again"


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
