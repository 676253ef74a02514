"""Householder QR, least squares and the matrix exponential
(codegen/ops/qr.cc, lstsq.cc, matrix_exp.cc) in float32 and float64: geqrf,
the product of its reflectors, ormqr, linalg.qr's three modes,
linalg.lstsq's four drivers and matrix_exp, on random square, tall, wide,
batched and transposed matrices. Eager's LAPACK (MKL in the pip wheels) and
Kiln's (OpenBLAS) choose the same reflectors (R's diagonal of the opposite
sign to each column's leading element): results agree within a few hundred
float32 roundings. lstsq's results that a driver does not compute are empty
tensors, as eager's. matrix_exp computes in float64 whatever the dtype: its
float32 result is the exact one rounded, within eager's own error for these
small matrices of exponentials under a few hundred. LDL^T (sytrf, sytrs) and
eig (geev) are LAPACK's on both sides; eig's vectors compare through their
elements' magnitudes, as each is unique only up to a unit complex factor."""
import torch

from cases_common import NAMES, Case, claimed, generator, random

TOLERANCES = {torch.float32: (1e-4, 1e-4), torch.float64: (1e-10, 1e-10)}


def cases(claims):
    for op, variants in OPS.items():
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for variant, fn, shapes in variants:
                inputs = [random(shape, dtype, g, scale=1.0) for shape in shapes]
                yield Case(op, dtype, variant, fn, inputs, tolerance=TOLERANCES[dtype])


def product(a, tau_length=None):
    packed, tau = torch.geqrf(a)
    return torch.linalg.householder_product(packed, tau[..., :tau_length])


def ormqr(a, c, **flags):
    return torch.ormqr(*torch.geqrf(a), c, **flags)


OPS = {
    "aten.linalg_qr.default": [
        ("reduced_square", torch.linalg.qr, [(4, 4)]),
        ("reduced_wide", torch.linalg.qr, [(3, 5)]),
        ("complete_tall", lambda a: torch.linalg.qr(a, mode="complete"), [(5, 3)]),
        ("complete_batched_transposed", lambda a: torch.linalg.qr(a.mT, mode="complete"),
         [(2, 3, 5)]),
        ("r_tall", lambda a: torch.linalg.qr(a, mode="r").R, [(5, 3)]),
    ],
    "aten.geqrf.default": [
        ("tall", torch.geqrf, [(5, 3)]),
        ("wide_batched", torch.geqrf, [(2, 3, 4)]),
    ],
    "aten.linalg_householder_product.default": [
        ("tall", product, [(5, 3)]),
        ("fewer_reflectors_batched", lambda a: product(a, 2), [(2, 5, 4)]),
    ],
    "aten.ormqr.default": [
        ("left", ormqr, [(5, 3), (5, 2)]),
        ("left_transpose_batched", lambda a, c: ormqr(a, c, transpose=True),
         [(2, 4, 4), (2, 4, 3)]),
        ("right", lambda a, c: ormqr(a, c, left=False), [(4, 3), (2, 4)]),
        ("right_transpose", lambda a, c: ormqr(a, c, left=False, transpose=True),
         [(4, 4), (3, 4)]),
    ],
    "aten.linalg_lstsq.default": [
        ("gelsy_tall", torch.linalg.lstsq, [(5, 3), (5, 2)]),
        ("gelsy_wide_vector", torch.linalg.lstsq, [(3, 5), (3,)]),
        ("gelsy_transposed_rcond", lambda a, b: torch.linalg.lstsq(a.mT, b, rcond=1e-3),
         [(3, 5), (5, 2)]),
        ("gels_tall_broadcast", lambda a, b: torch.linalg.lstsq(a, b, driver="gels"),
         [(2, 5, 3), (1, 5, 2)]),
        ("gels_wide", lambda a, b: torch.linalg.lstsq(a, b, driver="gels"), [(3, 5), (3, 2)]),
        ("gelsd_wide", lambda a, b: torch.linalg.lstsq(a, b, driver="gelsd"), [(3, 5), (3, 2)]),
        ("gelss_square_batched", lambda a, b: torch.linalg.lstsq(a, b, driver="gelss"),
         [(2, 4, 4), (2, 4, 1)]),
    ],
    "aten.linalg_matrix_exp.default": [
        ("square", torch.linalg.matrix_exp, [(4, 4)]),
        ("batched_transposed", lambda a: torch.linalg.matrix_exp(a.mT), [(2, 3, 3)]),
        # A 1-norm past theta_13: scaled down, then squared.
        ("squared", lambda a: torch.linalg.matrix_exp(3 * a), [(3, 3)]),
    ],
    "aten.linalg_ldl_factor_ex.default": [
        ("symmetric", lambda a: torch.linalg.ldl_factor_ex(a + a.mT), [(4, 4)]),
        ("batched_lower_hermitian",
         lambda a: torch.linalg.ldl_factor_ex(a.tril(), hermitian=True), [(2, 3, 3)]),
    ],
    "aten.linalg_ldl_solve.default": [
        ("broadcast", lambda a, b: torch.linalg.ldl_solve(*torch.linalg.ldl_factor(a + a.mT), b),
         [(2, 4, 4), (1, 4, 2)]),
    ],
    "aten.linalg_eig.default": [
        ("eigenvalues", torch.linalg.eigvals, [(4, 4)]),
        # Eigenvectors are unique up to a unit complex factor each: their
        # elements' magnitudes are not.
        ("magnitudes_batched", lambda a: magnitudes(*torch.linalg.eig(a)), [(2, 3, 3)]),
    ],
}


def magnitudes(values, vectors):
    return values, vectors.abs()
