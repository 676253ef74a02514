"""Linear algebra through LAPACK (codegen/ops/linalg.cc) in float32 and
float64: factorizations, determinants and solves of well-conditioned random
matrices, batched (batch dims broadcast between the operands), transposed
(no unit stride along rows) and right-hand. Eager's LAPACK (MKL in the pip
wheels) and Kiln's (OpenBLAS) factor in other orders: results agree within
a few hundred float32 roundings."""
import torch

from cases_common import NAMES, Case, claimed, generator, random, refused

TOLERANCES = {torch.float32: (1e-4, 1e-4), torch.float64: (1e-10, 1e-10)}


def cases(claims):
    for op, variants in OPS.items():
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for variant, fn, shapes in variants:
                inputs = [make(shape, kind, dtype, g) for kind, shape in shapes]
                yield Case(op, dtype, variant, fn, inputs, tolerance=TOLERANCES[dtype])
    # The check of a LAPACK info (an int32 tensor), traced from the ops that
    # raise: a regular matrix passes it.
    op = "aten._linalg_check_errors.default"
    for dtype in claimed(claims, op):
        a = make((2, 4, 4), "square", torch.float32, generator(op, "inv"))
        yield Case(op, dtype, "inv", torch.linalg.inv, [a], tolerance=TOLERANCES[torch.float32])
        spd = make((4, 4), "spd", torch.float32, generator(op, "cholesky"))
        yield Case(op, dtype, "cholesky", torch.linalg.cholesky, [spd],
                   tolerance=TOLERANCES[torch.float32])
    op = "aten.linalg_lu_factor_ex.default"
    a = make((3, 3), "square", torch.float32, generator(op, "no pivoting"))
    yield refused(op, torch.float32,
                  lambda a: (a, torch.zeros(3, dtype=torch.int32), torch.zeros((), dtype=torch.int32)),
                  [a], [("pivot", False)], "LU without pivoting is not implemented on the CPU")


def make(shape, kind, dtype, g):
    """A random matrix (batch) of `kind`: "general", "square" (diagonally
    dominant, so well conditioned), "spd" (symmetric positive definite),
    "triangular" (square with a dominant diagonal; a solve reads one
    triangle) or "cholesky" (a lower Cholesky factor)."""
    x = random(shape, dtype, g, scale=1.0)
    if kind == "general":
        return x
    n = shape[-1]
    dominant = x + 2 * n * torch.eye(n, dtype=dtype)
    if kind in ("square", "triangular"):
        return dominant
    spd = x @ x.mT + n * torch.eye(n, dtype=dtype)
    return spd if kind == "spd" else torch.linalg.cholesky(spd)


def svd_unique(full_matrices=False):
    """What of the SVD is unique (each singular vector is up to its sign,
    which the LAPACK picks: OpenBLAS's and eager's MKL's differ): the
    singular values, the product U diag(S) Vh, and |U|, |Vh| (the values
    are distinct) of the first min(m, n) vectors."""
    def fn(a):
        u, s, vh = torch.linalg.svd(a, full_matrices=full_matrices)
        k = s.shape[-1]
        u, vh = u[..., :k], vh[..., :k, :]
        return s, (u * s.unsqueeze(-2)) @ vh, u.abs(), vh.abs()
    return fn


def eigh_unique(uplo):
    """The eigenvalues, and the eigenvectors' magnitudes (unique up to sign)
    and the reconstruction of the triangle read."""
    def fn(a):
        values, vectors = torch.linalg.eigh(a, UPLO=uplo)
        return values, vectors.abs(), (vectors * values.unsqueeze(-2)) @ vectors.mT
    return fn


A, B = ("square", (4, 4)), ("general", (4, 3))
BATCH_A, BATCH_B = ("square", (2, 3, 4, 4)), ("general", (3, 4, 2))
OPS = {
    "aten._linalg_svd.default": [
        ("tall", svd_unique(), [("general", (5, 3))]),
        ("wide_full_batched", svd_unique(full_matrices=True), [("general", (2, 3, 5))]),
        ("values_transposed", lambda a: torch.linalg.svdvals(a.mT), [("general", (2, 4, 6))]),
    ],
    "aten._linalg_eigh.default": [
        ("lower", eigh_unique("L"), [("spd", (4, 4))]),
        ("upper_batched", eigh_unique("U"), [("spd", (2, 4, 4))]),
        ("values", torch.linalg.eigvalsh, [("spd", (3, 5, 5))]),
    ],
    "aten.linalg_lu_factor_ex.default": [
        ("square", torch.linalg.lu_factor_ex, [A]),
        ("batched", torch.linalg.lu_factor_ex, [BATCH_A]),
        ("wide", torch.linalg.lu_factor_ex, [("general", (3, 5))]),
        ("tall_transposed", lambda a: torch.linalg.lu_factor_ex(a.mT), [("general", (3, 5))]),
    ],
    "aten.linalg_lu.default": [
        ("square", torch.linalg.lu, [A]),
        ("batched_tall", torch.linalg.lu, [("general", (2, 5, 3))]),
    ],
    "aten._linalg_det.default": [
        ("square", torch.linalg.det, [A]),
        ("batched_transposed", lambda a: torch.linalg.det(a.mT), [BATCH_A]),
        ("singular_row", lambda a: torch.linalg.det(torch.cat([a[:3], a[3:] * 0])), [A]),
    ],
    "aten._linalg_slogdet.default": [
        ("square", torch.linalg.slogdet, [A]),
        ("batched", torch.linalg.slogdet, [BATCH_A]),
    ],
    "aten.linalg_lu_solve.default": [
        ("left", lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor_ex(a)[:2], b), [A, B]),
        ("adjoint_broadcast",
         lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor_ex(a)[:2], b, adjoint=True),
         [BATCH_A, BATCH_B]),
        ("right", lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor_ex(a)[:2], b.mT,
                                                     left=False), [A, B]),
    ],
    "aten._linalg_solve_ex.default": [
        ("matrix", torch.linalg.solve_ex, [A, B]),
        ("vector", torch.linalg.solve_ex, [A, ("general", (4,))]),
        ("batched_broadcast", torch.linalg.solve_ex, [BATCH_A, BATCH_B]),
        ("right_transposed", lambda a, b: torch.linalg.solve_ex(a.mT, b.mT, left=False), [A, B]),
    ],
    "aten.linalg_inv_ex.default": [
        ("square", torch.linalg.inv_ex, [A]),
        ("batched_transposed", lambda a: torch.linalg.inv_ex(a.mT), [BATCH_A]),
    ],
    "aten.linalg_cholesky_ex.default": [
        ("lower", torch.linalg.cholesky_ex, [("spd", (4, 4))]),
        ("upper_batched", lambda a: torch.linalg.cholesky_ex(a, upper=True), [("spd", (2, 4, 4))]),
        # Only info: where the factorization stops, each LAPACK leaves its own partial factor.
        ("not_positive_definite", lambda a: torch.linalg.cholesky_ex(a).info,
         [("general", (2, 4, 4))]),
    ],
    "aten.cholesky_solve.default": [
        ("lower", torch.cholesky_solve, [B, ("cholesky", (4, 4))]),
        ("upper_broadcast", lambda b, l: torch.cholesky_solve(b, l.mT, upper=True),
         [BATCH_B, ("cholesky", (2, 1, 4, 4))]),
    ],
    "aten.cholesky_inverse.default": [
        ("lower", torch.cholesky_inverse, [("cholesky", (4, 4))]),
        ("upper_batched", lambda l: torch.cholesky_inverse(l.mT, upper=True),
         [("cholesky", (2, 4, 4))]),
    ],
    "aten.linalg_solve_triangular.default": [
        ("upper", lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
         [("triangular", (4, 4)), B]),
        ("lower_unit_broadcast",
         lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True),
         [("triangular", (4, 4)), BATCH_B]),
        ("right", lambda a, b: torch.linalg.solve_triangular(a, b.mT, upper=True, left=False),
         [("triangular", (2, 4, 4)), ("general", (2, 4, 3))]),
    ],
    "aten.triangular_solve.default": [
        ("upper", torch.triangular_solve, [B, ("triangular", (4, 4))]),
        ("lower_transposed",
         lambda b, a: torch.triangular_solve(b, a, upper=False, transpose=True),
         [BATCH_B, ("triangular", (3, 4, 4))]),
    ],
}
