"""Kiln's forms of pointwise ops, reductions, distances and factories, for
the tracer's decomposition table (_decompositions.DECOMPOSITIONS)."""
import math

import torch

from ._errors import decline

aten = torch.ops.aten


def _clamp_tensor(x, min=None, max=None):
    """clamp with tensor bounds as eager computes it: maximum, then minimum
    (the upper bound wins where they cross; a NaN bound gives NaN)."""
    if min is not None:
        x = torch.maximum(x, min)
    return x if max is None else torch.minimum(x, max)


def _resize_(x, *size, memory_format=None):
    """x.resize_(size) of a contiguous x to no more elements than it has:
    x.as_strided_ to size's contiguous strides, which is what eager's
    resize_ does to its sizes and strides (the storage kept). The elements
    a larger size adds are uninitialized memory, which no graph can match."""
    size = list(size[0]) if len(size) == 1 and not isinstance(size[0], int) else list(size)
    if memory_format not in (None, torch.contiguous_format):
        return NotImplemented
    if math.prod(size) > x.numel():
        return decline(aten.resize_.default,
                       f"x.resize_({size}) of a tensor of {x.numel()} elements: the elements it "
                       "adds are uninitialized memory; resize to at most as many, or build the "
                       "larger tensor with torch.cat or F.pad")
    if not x.is_contiguous():
        return decline(aten.resize_.default,
                       f"resize_ of a non-contiguous tensor (strides {list(x.stride())}) "
                       "reads its storage in memory order; call .contiguous() first")
    strides = [math.prod(size[d + 1:]) for d in range(len(size))]
    return x.as_strided_(size, strides)


def _unravel_index(indices, shape):
    """torch.unravel_index with the dims' strides as constants: each
    coordinate (indices // stride) % size, as eager computes it (ATen's form
    divides by a tensor of the strides, whose values a kernel cannot check
    for zero)."""
    shape = [shape] if isinstance(shape, int) else list(shape)
    if indices.dtype.is_floating_point or indices.dtype.is_complex or \
            any(not isinstance(size, int) or size <= 0 for size in shape) or \
            math.prod(shape) >= 2 ** 63:
        return NotImplemented  # eager's error
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    return tuple(torch.remainder(torch.floor_divide(indices, stride), size)
                 for stride, size in zip(strides, shape))


def _p_norms(difference, p, nan_max):
    """The p-norms of the last dim of |differences|, as cdist and pdist take
    them; nan_max: whether a NaN wins the max of p = inf (pdist's) or is
    passed over (cdist's)."""
    if p < 0:
        return NotImplemented  # eager's error
    if difference.shape[-1] == 0:
        return difference.sum(-1)
    if p == 0:
        return torch.where(difference != difference, difference,
                           (difference != 0).to(difference.dtype)).sum(-1)
    if p == 1:
        return difference.sum(-1)
    if p == 2:
        return (difference * difference).sum(-1).sqrt()
    if p == float("inf"):
        return (difference if nan_max else difference.nan_to_num(0.0)).amax(-1)
    return difference.pow(p).sum(-1).pow(1.0 / p)


def _cdist(x1, x2, p=2.0, compute_mode=None):
    """cdist (the p-norm distance of every row pair) from the differences
    (eager takes p = 2 of more than 25 rows as _euclidean_dist)."""
    return _p_norms((x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs(), p, nan_max=False)


def _pdist(x, p=2.0):
    """pdist: cdist of the rows with themselves, the pairs i < j in order."""
    n = x.shape[0]
    pairs = [i * n + j for i in range(n) for j in range(i + 1, n)]
    distances = _p_norms((x.unsqueeze(-2) - x.unsqueeze(-3)).abs(), p, nan_max=True)
    if distances is NotImplemented:
        return distances
    return distances.reshape(-1)[torch.tensor(pairs, dtype=torch.int64)]


# Elementwise functions as eager's CPU kernels write them, from ops Kiln has.

def _hypot(a, b):
    """sqrt(a^2 + b^2) scaled by the larger magnitude, so that it neither
    overflows nor underflows where std::hypot (eager's) does not; an inf
    wins over a NaN, as there."""
    a, b = a.abs(), b.abs()
    large = torch.maximum(a, b)
    scale = torch.where(large == 0, 1.0, large)
    ratio = torch.minimum(a, b) / scale
    result = scale * torch.sqrt(1 + ratio * ratio)
    return torch.where((a == math.inf) | (b == math.inf), math.inf, result)


def _signbit(x):
    """x < 0, and -0.0 too (its reciprocal is -inf); a NaN's sign is not
    read (Kiln has no bit views of floats): false."""
    if not x.dtype.is_floating_point:
        return x < 0
    return (x < 0) | ((x == 0) & (1 / x < 0))


def _pow_scalar(base, exponent):
    """base ** t as eager computes it: pow of a tensor of base (1 ** t is 1)."""
    dtype = torch.result_type(base, exponent)
    if base == 1:
        return torch.ones(exponent.shape, dtype=dtype)
    return torch.pow(torch.full(exponent.shape, base, dtype=dtype), exponent)


def _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """_trilinear (bilinear's core) as eager defines it: each input with
    its expand dims inserted, the three multiplied and summed over
    sumdim."""
    def expanded(tensor, dims):
        for dim in sorted(dims):
            tensor = tensor.unsqueeze(dim)
        return tensor
    product = expanded(i1, expand1) * expanded(i2, expand2) * expanded(i3, expand3)
    return product.sum(list(sumdim)) if sumdim else product


def _reduced_dims(x, dim):
    """The dims any and all reduce: every one for None (or an empty list),
    else the one or those named."""
    if dim is None or (isinstance(dim, (list, tuple)) and not dim):
        return list(range(x.dim()))
    return list(dim) if isinstance(dim, (list, tuple)) else [dim]


def _any(x, dim=None, keepdim=False):
    return (x != 0).sum(_reduced_dims(x, dim), keepdim=keepdim) > 0


def _all(x, dim=None, keepdim=False):
    return (x == 0).sum(_reduced_dims(x, dim), keepdim=keepdim) == 0


def _round_decimals(x, decimals=0):
    """torch.round(x, decimals=d) as eager computes it: x times 10^d rounded
    to an integer and divided back (divided, rounded and multiplied for a
    negative d), in x's dtype."""
    scale = 10.0 ** abs(decimals)
    if decimals < 0:
        return torch.round(x / scale) * scale
    return torch.round(x * scale) / scale


def _hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                    layout=None, device=None, pin_memory=None):
    """hamming_window as eager computes it, in its dtype: alpha - beta *
    cos(2 pi n / (N - 1)), over one point more when periodic (then
    dropped); hann_window is alpha = beta = 0.5."""
    dtype = dtype or torch.get_default_dtype()
    if not dtype.is_floating_point:
        return NotImplemented  # eager's error
    if window_length <= 1:
        return torch.ones(window_length, dtype=dtype)
    points = window_length + 1 if periodic else window_length
    window = torch.arange(points, dtype=dtype).mul(2 * math.pi / (points - 1)).cos()
    window = window.mul(-beta).add(alpha)
    return window[:-1] if periodic else window


def _eye(n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None):
    """torch.eye as a comparison of ranges (torch's compares uint8 ones, a
    dtype Kiln lacks)."""
    rows = torch.arange(n).unsqueeze(1)
    return (rows == torch.arange(n if m is None else m)).to(dtype or torch.get_default_dtype())
