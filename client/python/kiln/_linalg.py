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
