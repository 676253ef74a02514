"""Decompositions of linear algebra over the ones Kiln runs through LAPACK
(codegen/ops/linalg.cc, svd.cc): each follows eager's ATen code
(aten/src/ATen/native/LinearAlgebra.cpp), so its tolerances and dtypes are
eager's."""
import torch


def _atol_rtol(x, atol, rtol):
    """Eager's get_atol_rtol: float64 tolerances; without rtol, eps * the
    larger matrix dim, or 0 where a positive atol is given."""
    atol = torch.zeros((), dtype=torch.float64) if atol is None else atol
    if rtol is None:
        rtol = torch.full((), torch.finfo(x.dtype).eps * max(x.shape[-1], x.shape[-2]),
                          dtype=torch.float64)
        rtol = torch.where(atol > 0, torch.zeros((), dtype=torch.float64), rtol)
    return atol, rtol


def pinv(x, *, atol=None, rtol=None, hermitian=False):
    """linalg_pinv.atol_rtol_tensor: V diag(1/S) U^T over the singular
    values above max(atol, rtol * the largest) (the eigenvalues' magnitudes
    when `hermitian`)."""
    if x.dim() < 2 or x.dtype not in (torch.float32, torch.float64):
        raise RuntimeError(f"linalg.pinv({x.dtype}{list(x.shape)}): expected a tensor with 2 or "
                           f"more dimensions of float, double, cfloat or cdouble types")
    atol, rtol = _atol_rtol(x, atol, rtol)
    if x.numel() == 0:
        return x.mT.new_zeros(x.mT.shape)
    if hermitian:
        values, vectors = torch.linalg.eigh(x)
        magnitudes = values.abs()
        tolerance = torch.maximum(atol.unsqueeze(-1),
                                  rtol.unsqueeze(-1) * magnitudes.amax(-1, keepdim=True))
        inverse = torch.where(magnitudes > tolerance, values.reciprocal(), 0).to(x.dtype)
        return (vectors * inverse.unsqueeze(-2)) @ vectors.mT
    u, s, vh = torch.linalg.svd(x, full_matrices=False)
    tolerance = torch.maximum(atol.unsqueeze(-1), rtol.unsqueeze(-1) * s[..., :1])
    inverse = torch.where(s > tolerance, s.reciprocal(), 0).to(x.dtype)
    return (vh.mT * inverse.unsqueeze(-2)) @ u.mT


def _require_matrices(what, x):
    if x.dim() < 2:
        raise RuntimeError(f"{what}: The input tensor A must have at least 2 dimensions.")


def polar(a):
    """linalg_polar: from the thin SVD A = W S Vh, U = W Vh and
    H = Vh^T S Vh; the signs the SVD picks cancel in both."""
    _require_matrices("linalg.polar", a)
    m, n = a.shape[-2:]
    if m < n:
        raise RuntimeError(f"linalg.polar: input must have at least as many rows as columns, "
                           f"but got {m} by {n} matrices")
    w, s, vh = torch.linalg.svd(a, full_matrices=False)
    return w @ vh, (vh.mT * s.unsqueeze(-2)) @ vh


def matrix_sqrth(a):
    """linalg_matrix_sqrth: V diag(sqrt(max(L, 0))) V^T from eigh's L and V,
    which read A's lower triangle; negative eigenvalues (A not
    positive-definite) count as 0, as eager's."""
    _require_matrices("linalg.matrix_sqrth", a)
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"linalg.matrix_sqrth: A must be batches of square matrices, but "
                           f"they are {a.shape[-2]} by {a.shape[-1]} matrices")
    values, vectors = torch.linalg.eigh(a)
    return (vectors * values.clamp_min(0).sqrt().unsqueeze(-2)) @ vectors.mT


def lu_unpack(lu, pivots, unpack_data=True, unpack_pivots=True):
    """lu_unpack: L and U are LU's triangles; P is the permutation of the
    rows the pivots swap in turn, which lu_solve applies exactly to the
    identity: with LU = I (L = U = I), lu_solve solves P X = I, so X = P^T."""
    if lu.dim() < 2:
        raise RuntimeError(f"torch.lu_unpack: Expected tensor with 2 or more dimensions. Got "
                           f"size: {list(lu.shape)} instead")
    if pivots.dtype != torch.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of "
                           "torch.int32 dtype.\nNote: this function is intended to be used with "
                           "the output produced by torch.linalg.lu_factor")
    m, n = lu.shape[-2:]
    k = min(m, n)
    if list(pivots.shape) != list(lu.shape[:-2]) + [k]:
        raise ValueError(f"Expected LU_pivots to have shape {list(lu.shape[:-2]) + [k]} but got "
                         f"{list(pivots.shape)} instead")
    empty = lu.new_empty(0)
    l_factor, u_factor = empty, empty
    if unpack_data:
        l_factor = lu[..., :, :k].tril(-1) + torch.eye(m, k, dtype=lu.dtype)
        u_factor = lu[..., :k, :].triu()
    p = empty
    if unpack_pivots:
        if m > k:  # the rows past the k-th stay in place (joined as int64, as Kiln's cat)
            rest = torch.arange(k + 1, m + 1).expand(*pivots.shape[:-1], m - k)
            pivots = torch.cat([pivots.long(), rest], -1).int()
        identity = torch.eye(m, dtype=lu.dtype).expand(*pivots.shape[:-1], m, m)
        p = torch.linalg.lu_solve(identity, pivots, identity).mT
    return p, l_factor, u_factor
