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
                    torch.linalg.cholesky_ex(x).info, torch.linalg.lu_factor_ex(x).info,
                    torch.linalg.solve_ex(x, torch.ones(3)).info)
    got = kiln.compile(fn, [a], strict=True)(a)
    assert [t.item() for t in got] == [t.item() for t in fn(a)] == [2, 0.0, 2, 2, 2]


def raised(fn, *inputs):
    """(type, message) of what fn(*inputs) raises."""
    with pytest.raises(RuntimeError) as error:
        fn(*inputs)
    return type(error.value), str(error.value)


@pytest.mark.parametrize("fn", [
    torch.linalg.inv, torch.linalg.cholesky, torch.linalg.lu_factor,
    lambda a: torch.linalg.solve(a, torch.ones(a.shape[:-1])),
    lambda a: torch.linalg.inv(torch.stack([torch.eye(3), a, a])),  # a batch names its element
    lambda a: torch.linalg.inv_ex(a, check_errors=True),
    lambda a: torch.linalg.cholesky_ex(a[None], check_errors=True),
    lambda a: torch.linalg.lu_factor_ex(a, check_errors=True),
    lambda a: torch.linalg.solve_ex(a, torch.ones(3, 1), check_errors=True),
], ids=["inv", "cholesky", "lu_factor", "solve", "batched_inv", "inv_ex", "batched_cholesky_ex",
        "lu_factor_ex", "solve_ex"])
def test_a_singular_matrix_raises_eagers_error_natively(fn):
    # The check of the LAPACK info runs in the artifact (strict: nothing
    # through torch); a regular matrix passes it.
    torch.manual_seed(9)
    compiled = kiln.compile(fn, [square(3, 3)], strict=True)
    regular = square(3, 3, dtype=torch.float32)
    torch.testing.assert_close(compiled(regular), fn(regular), rtol=1e-4, atol=1e-4)
    singular = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 4.0], [5.0, 0.0, 6.0]])
    want = raised(fn, singular)
    assert want[0] in (torch.linalg.LinAlgError, RuntimeError)
    assert raised(compiled, singular) == want


def aligned(vectors, reference):
    """`vectors` with each column's sign flipped to agree with `reference`'s:
    singular and eigen vectors are unique only up to sign, and eager's
    LAPACK (MKL) and Kiln's (OpenBLAS) choose differently."""
    signs = torch.sign((vectors * reference).sum(-2, keepdim=True))
    return vectors * signs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_reconstructs_its_input_and_matches_eagers_values_and_vectors(dtype, full_matrices):
    torch.manual_seed(5)
    a = torch.randn(2, 3, 5, 4, dtype=dtype)
    fn = lambda x: torch.linalg.svd(x, full_matrices=full_matrices)  # noqa: E731
    u, s, vh = kiln.compile(fn, [a], strict=True)(a)
    want_u, want_s, want_vh = fn(a)
    tolerance = TOLERANCE[dtype]
    assert (u.shape, s.shape, vh.shape) == (want_u.shape, want_s.shape, want_vh.shape)
    torch.testing.assert_close(s, want_s, rtol=tolerance, atol=tolerance)
    torch.testing.assert_close((u[..., :4] * s.unsqueeze(-2)) @ vh[..., :4, :], a,
                               rtol=tolerance, atol=tolerance)
    # The first four columns of U, and Vh's rows, are unique up to sign (the
    # singular values are distinct); U's last column of a full 5 x 4 is any
    # unit vector orthogonal to them.
    torch.testing.assert_close(aligned(u[..., :4], want_u[..., :4]), want_u[..., :4],
                               rtol=tolerance, atol=tolerance)
    torch.testing.assert_close(aligned(vh.mT, want_vh.mT), want_vh.mT, rtol=tolerance,
                               atol=tolerance)
    torch.testing.assert_close(u.mT @ u, torch.eye(u.shape[-1], dtype=dtype).expand_as(u.mT @ u),
                               rtol=tolerance, atol=tolerance)


def test_what_decomposes_to_the_svd_matches_eager():
    torch.manual_seed(6)
    a = torch.randn(3, 4, 6)
    a[1, 3] = 0  # rank 3: its smallest singular value is far below pinv's cutoff
    assert_native(lambda x: (torch.linalg.svdvals(x), torch.linalg.pinv(x),
                             torch.linalg.matrix_rank(x), torch.linalg.cond(x[::2, :, :4]),
                             torch.linalg.matrix_norm(x, "nuc"), torch.linalg.matrix_norm(x, 2),
                             torch.linalg.matrix_norm(x, -2),
                             torch.linalg.pinv(x, atol=torch.tensor(0.5))), a)


def test_a_symbolic_batch_of_svdvals_takes_every_size():
    torch.manual_seed(7)
    compiled = kiln.compile(torch.linalg.svdvals, [torch.randn(3, 4, 4, dtype=torch.float64)],
                            dynamic={0: {0: "B"}}, strict=True)
    for batch in (1, 5):
        a = torch.randn(batch, 4, 4, dtype=torch.float64)
        torch.testing.assert_close(compiled(a), torch.linalg.svdvals(a), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_its_triangle_and_matches_eager_up_to_sign(dtype, uplo):
    torch.manual_seed(8)
    x = torch.randn(2, 5, 5, dtype=dtype)
    a = x + x.mT
    # Only the triangle UPLO names is read: the other holds noise.
    noisy = a.tril() + torch.randn(2, 5, 5, dtype=dtype).triu(1) if uplo == "L" else \
        a.triu() + torch.randn(2, 5, 5, dtype=dtype).tril(-1)
    fn = lambda x: torch.linalg.eigh(x, UPLO=uplo)  # noqa: E731
    values, vectors = kiln.compile(fn, [noisy], strict=True)(noisy)
    want_values, want_vectors = fn(noisy)
    tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(values, want_values, rtol=tolerance, atol=tolerance)
    torch.testing.assert_close(aligned(vectors, want_vectors), want_vectors, rtol=tolerance,
                               atol=tolerance)
    torch.testing.assert_close((vectors * values.unsqueeze(-2)) @ vectors.mT, a, rtol=tolerance,
                               atol=tolerance)
    assert_native(lambda x: (torch.linalg.eigvalsh(x, UPLO=uplo),
                             torch.linalg.matrix_rank(x, hermitian=True),
                             torch.linalg.pinv(x, hermitian=True)), noisy)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
