"""kiln.compile of linear algebra, which Kiln runs through LAPACK
(codegen/ops/linalg.cc, client/runtime/linalg.h), against eager, through a
real kilnd (conftest.py starts it): batched and broadcast solves,
determinants, factorizations, and singular matrices as eager treats them.

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

# Eager's LAPACK (MKL) and Kiln's (OpenBLAS) order their sums differently.
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10}


def square(*shape, dtype=torch.float32):
    """Well-conditioned random matrices: a dominant diagonal."""
    n = shape[-1]
    return torch.randn(*shape, dtype=dtype) + 2 * n * torch.eye(n, dtype=dtype)


def assert_native(fn, *inputs):
    """fn compiles whole (strict: nothing through torch) and matches eager."""
    got = kiln.compile(fn, list(inputs), strict=True)(*inputs)
    want = fn(*inputs)
    for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        tolerance = TOLERANCE.get(w.dtype, 0)
        torch.testing.assert_close(g, w, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_batched_solve_broadcasts_and_matches_eager(dtype):
    torch.manual_seed(0)
    assert_native(torch.linalg.solve_ex, square(2, 3, 5, 5, dtype=dtype),
                  torch.randn(3, 5, 2, dtype=dtype))


def test_det_slogdet_and_inverse_of_a_transposed_batch_match_eager():
    torch.manual_seed(1)
    a = square(4, 6, 6)
    assert_native(lambda x: (torch.linalg.det(x.mT), torch.linalg.slogdet(x.mT),
                             torch.linalg.inv_ex(x.mT)), a)


def test_lu_and_its_solves_match_eager():
    torch.manual_seed(2)
    a, b = square(3, 4, 4), torch.randn(3, 4, 2)

    def fn(a, b):
        lu, pivots, _ = torch.linalg.lu_factor_ex(a)
        return (lu, pivots, torch.linalg.lu(a), torch.linalg.lu_solve(lu, pivots, b),
                torch.linalg.lu_solve(lu, pivots, b.mT, left=False, adjoint=True))
    assert_native(fn, a, b)


def test_cholesky_and_triangular_solves_match_eager():
    torch.manual_seed(3)
    x = torch.randn(2, 5, 5, dtype=torch.float64)
    spd, b = x @ x.mT + 5 * torch.eye(5, dtype=torch.float64), torch.randn(2, 5, 3,
                                                                          dtype=torch.float64)

    def fn(spd, b):
        upper = torch.linalg.cholesky_ex(spd, upper=True).L
        return (upper, torch.cholesky_solve(b, upper, upper=True),
                torch.cholesky_inverse(upper, upper=True),
                torch.linalg.solve_triangular(upper, b, upper=True),
                torch.triangular_solve(b, upper, upper=True, transpose=True).solution)
    assert_native(fn, spd, b)


def test_a_symbolic_batch_takes_every_size():
    torch.manual_seed(4)
    compiled = kiln.compile(torch.linalg.solve_ex, [square(3, 4, 4), torch.randn(3, 4, 1)],
                            dynamic={0: {0: "B"}, 1: {0: "B"}}, strict=True)
    for batch in (1, 5):
        a, b = square(batch, 4, 4), torch.randn(batch, 4, 1)
        torch.testing.assert_close(compiled(a, b), torch.linalg.solve_ex(a, b), rtol=1e-4,
                                   atol=1e-4)


def test_a_singular_matrix_gives_eagers_info_and_determinant():
    # A zero column: exactly singular in any summation order (LU's second
    # pivot is zero), and indefinite from its second leading minor.
    a = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 4.0], [5.0, 0.0, 6.0]])
    fn = lambda x: (torch.linalg.inv_ex(x).info, torch.linalg.det(x),  # noqa: E731
                    torch.linalg.cholesky_ex(x).info)
    got = kiln.compile(fn, [a], strict=True)(a)
    assert [t.item() for t in got] == [t.item() for t in fn(a)] == [2, 0.0, 2]


def test_inv_of_a_singular_matrix_raises_eagers_error():
    a = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    # The inverse is native; only the check runs through torch.
    with pytest.warns(RuntimeWarning, match=r"runs aten\._linalg_check_errors\.default through "
                      r"torch \(kiln\.explain says why\)"):
        compiled = kiln.compile(torch.linalg.inv, [square(2, 2)])
    torch.testing.assert_close(compiled(square(2, 2) * 0 + torch.eye(2) * 2), torch.eye(2) / 2)
    with pytest.raises(torch.linalg.LinAlgError, match=r"linalg.inv: The diagonal element 2 is "
                       r"zero, the inversion could not be completed because the input matrix "
                       r"is singular"):
        compiled(a)


def test_a_check_that_raises_is_refused_when_strict():
    with pytest.raises(kiln.UnsupportedOpError, match=r"\(aten._linalg_check_errors.default\) "
                       r"raises eager's error when a matrix is singular or not positive "
                       r"definite, and a Kiln artifact cannot raise: call the _ex form"):
        kiln.compile(torch.linalg.cholesky, [square(3, 3)], strict=True)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
