"""Kiln's forms of torch.cov, torch.corrcoef and F.gaussian_nll_loss for the
tracer's torch functions (_decompositions._TORCH_FUNCTIONS): eager's read
values back (the degrees of freedom, whether a weight or a variance is
negative), which a traced graph cannot. Here the checks are kiln_check.check
ops (kiln/_checks.py), raising eager's errors, and the degrees of freedom a
tensor or, without weights, a number known when tracing."""
import math
import warnings

import torch

from ._checks import check

_NO_DEGREES = ("cov(): degrees of freedom is <= 0. Correction should be strictly less than the "
               "number of observations.")


def _weights_taken(weights, observations, floating):
    """Whether `weights` (fweights: integers, aweights: floats) passes eager's
    checks of its shape and dtype; NotImplemented runs eager's, with its
    error."""
    return weights is None or (weights.dim() <= 1 and weights.numel() == observations and (
        weights.dtype.is_floating_point if floating else
        not weights.dtype.is_floating_point and not weights.dtype.is_complex and
        weights.dtype != torch.bool))


def _cov(x, *, correction=1, fweights=None, aweights=None):
    """torch.cov of rows of variables over columns of observations, as
    ATen's composite computes it: the weighted mean's deviations times their
    weighted transpose over the degrees of freedom, which are 0 where they
    would be <= 0 (eager warns; the result is then inf or NaN, as there).
    Negative weights, or weights that sum to 0, raise eager's RuntimeError."""
    if x.dim() > 2 or x.dtype == torch.bool or x.is_complex():
        return NotImplemented  # ATen's, with eager's error
    rows = x if x.dim() == 2 else x.reshape(1, -1)
    observations = rows.shape[1]
    if not (_weights_taken(fweights, observations, False) and
            _weights_taken(aweights, observations, True)):
        return NotImplemented
    if fweights is None and aweights is None:
        degrees = observations - correction
        if degrees <= 0:
            warnings.warn(_NO_DEGREES)
            degrees = 0
        deviations = rows - (rows.sum(1) / observations).unsqueeze(1)
        return (torch.mm(deviations, deviations.t()) / degrees).squeeze()
    for weights, name in ((fweights, "fweights"), (aweights, "aweights")):
        if weights is not None and observations > 0:
            check(weights >= 0, "RuntimeError", f"cov(): {name} cannot be negative")
    w = fweights if aweights is None else aweights if fweights is None else fweights * aweights
    total = w.sum()
    check(total != 0, "RuntimeError", "cov(): weights sum to zero, can't be normalized")
    mean = (rows * w).sum(1) / total
    if correction == 0:
        degrees = total
    elif aweights is None:
        degrees = total - correction
    elif fweights is None and observations == 1 and correction == 1:
        degrees = torch.zeros((), dtype=torch.int64)
    else:
        degrees = total - correction * (w * aweights).sum() / total
    degrees = torch.where(degrees <= 0, 0, degrees)  # eager warns and divides by 0
    if observations == 1 and (fweights is None) != (aweights is None):
        # One observation, one kind of weights: eager's deviations are zeros.
        deviations = torch.zeros_like(rows, dtype=torch.promote_types(rows.dtype, torch.float32))
    else:
        deviations = rows - mean.unsqueeze(1)
    return (torch.mm(deviations, (deviations * w).t()) / degrees).squeeze()


def _corrcoef(x):
    """torch.corrcoef: the covariance over the outer product of the standard
    deviations, clipped to [-1, 1]; one variable's is c / c (NaN where its
    variance is 0, inf or NaN), as eager."""
    covariance = _cov(x)
    if covariance is NotImplemented:
        return NotImplemented
    if covariance.dim() == 0:
        return covariance / covariance
    deviations = covariance.diagonal().sqrt()
    covariance = covariance / deviations.reshape(-1, 1)
    return (covariance / deviations.reshape(1, -1)).clip(-1, 1)


def _gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """F.gaussian_nll_loss with a tensor var, as torch's: a negative variance
    raises its ValueError (a check), var one dim short of input or
    broadcasting along one dim is homoscedastic, and var is clamped to eps."""
    if not isinstance(var, torch.Tensor):
        return NotImplemented  # torch's, which reads no tensor
    check(~(var < 0), "ValueError", "var has negative entry/entries")
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif input.dim() != var.dim() or sum(
                v for i, v in zip(input.shape, var.shape) if i != v) != 1:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var.clamp(min=eps)
    loss = 0.5 * (torch.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss
