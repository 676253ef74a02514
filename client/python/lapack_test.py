"""kiln.compile of Householder QR, least squares, LDL^T and the general
eigendecomposition, which Kiln runs through LAPACK's geqrf, orgqr, ormqr,
the lstsq drivers, sytrf, sytrs and geev (codegen/ops/qr.cc, lstsq.cc,
ldl.cc, eig.cc; client/runtime/qr.h, lstsq.h, ldl.h, eig.h), against eager,
through a real kilnd (conftest.py starts it): linalg.qr's three modes,
geqrf, householder_product, ormqr, linalg.lstsq's four drivers (gels's
error as eager's), ldl_factor, ldl_solve, eig and eigvals, batched,
transposed and with a symbolic batch.

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

# Eager's LAPACK (MKL) and Kiln's (OpenBLAS) order their sums differently;
# integers (ranks, pivots) match exactly.
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10, torch.int32: 0, torch.int64: 0}


def assert_native(fn, *inputs, normwise=False):
    """fn compiles whole (strict: nothing through torch) and matches eager;
    `normwise`: each element within the tolerance times the largest
    magnitude of its matrix."""
    got = kiln.compile(fn, list(inputs), strict=True)(*inputs)
    want = fn(*inputs)
    got, want = torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        tolerance = TOLERANCE[w.dtype]
        scale = w.abs().amax((-2, -1), keepdim=True).clamp_min(1) if normwise else 1
        torch.testing.assert_close(g / scale, w / scale, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_qr_in_every_mode_matches_eager(dtype, shape):
    torch.manual_seed(0)
    assert_native(lambda a: (torch.linalg.qr(a), torch.linalg.qr(a, mode="complete"),
                             torch.linalg.qr(a, mode="r")),
                  torch.randn(*shape, dtype=dtype))


def test_qr_of_a_transposed_batch_reconstructs_it():
    torch.manual_seed(1)
    a = torch.randn(3, 6, 4)
    q, r = kiln.compile(lambda x: torch.linalg.qr(x.mT), [a], strict=True)(a)
    eager_q, eager_r = torch.linalg.qr(a.mT)
    torch.testing.assert_close(q, eager_q, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(r, eager_r, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(q @ r, a.mT, rtol=1e-4, atol=1e-4)


def test_geqrf_householder_product_and_ormqr_match_eager():
    torch.manual_seed(2)
    a, c, d = torch.randn(2, 5, 3), torch.randn(2, 5, 2), torch.randn(2, 4, 5)

    def fn(a, c, d):
        packed, tau = torch.geqrf(a)
        return (packed, tau, torch.linalg.householder_product(packed, tau),
                torch.linalg.householder_product(packed, tau[:, :2]),
                torch.ormqr(packed, tau, c), torch.ormqr(packed, tau, c, transpose=True),
                torch.ormqr(packed, tau, d, left=False),
                torch.ormqr(packed, tau, d, left=False, transpose=True))
    assert_native(fn, a, c, d)


def test_a_symbolic_batch_takes_every_size():
    torch.manual_seed(3)
    compiled = kiln.compile(torch.linalg.qr, [torch.randn(3, 5, 4)], dynamic={0: {0: "B"}},
                            strict=True)
    for batch in (1, 4):
        a = torch.randn(batch, 5, 4)
        q, r = compiled(a)
        eager_q, eager_r = torch.linalg.qr(a)
        torch.testing.assert_close(q, eager_q, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(r, eager_r, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("driver", [None, "gels", "gelsd", "gelss"])
def test_lstsq_of_a_wide_system_matches_eager(driver, dtype):
    torch.manual_seed(4)
    assert_native(lambda a, b: torch.linalg.lstsq(a, b, driver=driver),
                  torch.randn(2, 3, 5, dtype=dtype), torch.randn(2, 3, 2, dtype=dtype))


@pytest.mark.parametrize("driver", [None, "gels"])
def test_lstsq_of_a_tall_broadcast_system_matches_eager(driver):
    torch.manual_seed(5)
    assert_native(lambda a, b: torch.linalg.lstsq(a, b, rcond=1e-4, driver=driver),
                  torch.randn(3, 6, 4), torch.randn(1, 6, 2))


def test_lstsq_of_a_vector_with_a_symbolic_batch():
    torch.manual_seed(6)
    compiled = kiln.compile(torch.linalg.lstsq, [torch.randn(3, 5, 4), torch.randn(3, 5)],
                            dynamic={0: {0: "B"}, 1: {0: "B"}}, strict=True)
    for batch in (1, 4):
        a, b = torch.randn(batch, 5, 4), torch.randn(batch, 5)
        solution, residuals, rank, singular_values = compiled(a, b)
        want = torch.linalg.lstsq(a, b)
        torch.testing.assert_close(solution, want.solution, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(rank, want.rank, rtol=0, atol=0)
        assert residuals.shape == singular_values.shape == (0,)


def test_lstsq_gelsy_gives_the_rank_of_a_rank_deficient_matrix():
    torch.manual_seed(7)
    a = torch.randn(2, 6, 2, dtype=torch.float64) @ torch.randn(2, 2, 4, dtype=torch.float64)
    b = torch.randn(2, 6, 3, dtype=torch.float64)
    fn = lambda a, b: torch.linalg.lstsq(a, b, rcond=1e-8)  # noqa: E731
    assert_native(fn, a, b)
    assert kiln.compile(fn, [a, b], strict=True)(a, b)[2].tolist() == [2, 2]



def test_lstsq_gels_of_a_rank_deficient_matrix_raises_eagers_error():
    # The driver's info is checked in the artifact (strict: nothing through
    # torch): a zero column leaves R a zero on its diagonal.
    torch.manual_seed(8)
    fn = lambda a, b: torch.linalg.lstsq(a, b, driver="gels")  # noqa: E731
    a, b = torch.randn(2, 4, 3), torch.randn(2, 4, 2)
    compiled = kiln.compile(fn, [a, b], strict=True)
    torch.testing.assert_close(compiled(a, b)[0], fn(a, b)[0], rtol=1e-4, atol=1e-4)
    deficient = a.clone()
    deficient[1, :, 2] = 0
    message = ("torch.linalg.lstsq: (Batch element 1): The least squares solution could not be "
               "computed because the input matrix does not have full rank (error code: 3).")
    with pytest.raises(torch.linalg.LinAlgError) as want:
        fn(deficient, b)
    assert str(want.value) == message
    with pytest.raises(torch.linalg.LinAlgError) as got:
        compiled(deficient, b)
    assert str(got.value) == message



@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl_factor_and_solve_of_an_indefinite_batch_match_eager(dtype, hermitian):
    torch.manual_seed(9)
    a = torch.randn(2, 5, 5, dtype=dtype)
    a = a + a.mT  # symmetric, indefinite: sytrf takes 2 x 2 blocks too
    b = torch.randn(5, 3, dtype=dtype)

    def fn(a, b):
        factors = torch.linalg.ldl_factor_ex(a, hermitian=hermitian)
        return factors, torch.linalg.ldl_solve(factors[0], factors[1], b, hermitian=hermitian)
    assert_native(fn, a, b)
    assert_native(lambda a: torch.linalg.ldl_factor(a.mT), a)


def test_ldl_factor_of_a_singular_matrix_gives_eagers_info():
    a = torch.zeros(2, 3, 3)
    a[0] = torch.eye(3)
    assert_native(torch.linalg.ldl_factor_ex, a)


def aligned(vectors, reference):
    """Each column of `vectors` times the unit complex factor that makes it
    agree with `reference`'s: eigenvectors are unique only up to one."""
    inner = (reference.conj() * vectors).sum(-2, keepdim=True)
    return vectors * (inner.conj() / inner.abs())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_eig_of_a_transposed_batch_matches_eager(dtype):
    torch.manual_seed(10)
    a = torch.randn(3, 4, 4, dtype=dtype)
    fn = lambda a: torch.linalg.eig(a.mT)  # noqa: E731
    values, vectors = kiln.compile(fn, [a], strict=True)(a)
    want_values, want_vectors = fn(a)
    tolerance = 1e-4 if dtype == torch.float32 else 1e-10
    assert values.dtype == want_values.dtype and vectors.dtype == want_vectors.dtype
    torch.testing.assert_close(values, want_values, rtol=tolerance, atol=tolerance)
    torch.testing.assert_close(aligned(vectors, want_vectors), want_vectors, rtol=tolerance,
                               atol=tolerance)


def test_eigvals_of_a_rotation_are_a_conjugate_pair():
    a = torch.tensor([[0.0, -2.0], [2.0, 0.0]], dtype=torch.float64)
    got = kiln.compile(torch.linalg.eigvals, [a], strict=True)(a)
    torch.testing.assert_close(got, torch.linalg.eigvals(a), rtol=0, atol=1e-15)
    torch.testing.assert_close(got, torch.tensor([2j, -2j], dtype=torch.complex128), rtol=0,
                               atol=1e-15)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
