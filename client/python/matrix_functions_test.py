"""kiln.compile of matrix functions and LU unpacking against eager,
through a real kilnd (conftest.py starts it): matrix_exp through the
runtime (codegen/ops/matrix_exp.cc), and polar, matrix_sqrth and lu_unpack,
which decompose over the SVD, eigh and lu_solve
(client/python/kiln/_linalg.py).

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
from lapack_test import assert_native  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matrix_exp_of_a_transposed_batch_matches_eager(dtype):
    torch.manual_seed(0)
    a = torch.randn(2, 3, 4, 4, dtype=dtype) / 2
    assert_native(lambda x: torch.linalg.matrix_exp(x.mT), a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matrix_exp_of_a_large_norm_is_scaled_squared_and_matches_eager(dtype):
    # 1-norm about 25: scaled by 2^-3 into the approximant's range.
    torch.manual_seed(1)
    a = 4 * torch.randn(2, 5, 5, dtype=dtype)
    assert_native(torch.linalg.matrix_exp, a, normwise=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 4)])
def test_polar_matches_eager(dtype, shape):
    torch.manual_seed(2)
    assert_native(torch.linalg.polar, torch.randn(*shape, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matrix_sqrth_of_definite_and_indefinite_matrices_matches_eager(dtype):
    torch.manual_seed(3)
    b = torch.randn(2, 4, 4, dtype=dtype)
    definite = b @ b.mT + torch.eye(4, dtype=dtype)
    # The upper triangle is ignored; a negative eigenvalue counts as 0.
    indefinite = torch.tensor([[1.0, 7.0], [2.0, 1.0]], dtype=dtype)
    assert_native(lambda x, y: (torch.linalg.matrix_sqrth(x), torch.linalg.matrix_sqrth(y)),
                  definite, indefinite)


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 5, 5)])
@pytest.mark.parametrize("unpack_data", [True, False])
@pytest.mark.parametrize("unpack_pivots", [True, False])
def test_lu_unpack_of_eagers_factors_is_exact(shape, unpack_data, unpack_pivots):
    torch.manual_seed(4)
    lu, pivots = torch.linalg.lu_factor(torch.randn(*shape))
    fn = lambda lu, pivots: torch.lu_unpack(lu, pivots, unpack_data, unpack_pivots)  # noqa: E731
    got = kiln.compile(fn, [lu, pivots], strict=True)(lu, pivots)
    for g, w in zip(got, fn(lu, pivots)):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_lu_factor_then_unpack_reconstructs_and_matches_eager():
    torch.manual_seed(5)
    a = torch.randn(3, 4, 4, dtype=torch.float64)
    assert_native(lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a)), a)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
