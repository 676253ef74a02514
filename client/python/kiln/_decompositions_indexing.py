"""Kiln's forms of indexing, scatter, sorting and cumulative ops, for the
tracer's decomposition table (_decompositions.DECOMPOSITIONS)."""
import math

import torch

from ._errors import TraceError, decline

aten = torch.ops.aten


def _index(x, indices):
    """x[indices] (advanced indexing, NumPy's rules) as one index_select of
    x with the indexed dims flattened into one; negative indices count from
    the end, as in eager."""
    dims = [d for d, index in enumerate(indices) if index is not None]
    if any(indices[d].dtype in (torch.bool, torch.uint8) for d in dims):
        return decline(aten.index.Tensor,
                       "indexing with a boolean mask (x[mask]) gives a result whose size "
                       "depends on the data, and Kiln compiles fixed shapes: use "
                       "torch.where(mask, x, fill), or index with integer positions")
    if x.dtype == torch.bool:  # Kiln's lookups read numbers (transformers' padding masks)
        return _index(x.long(), indices).bool()
    linear = None
    for d in dims:
        index = torch.where(indices[d] < 0, indices[d] + x.shape[d], indices[d])
        linear = index if linear is None else linear * x.shape[d] + index
    batch = list(torch.broadcast_shapes(*(indices[d].shape for d in dims)))
    # Indexed dims apart from one another put the index's dims first.
    start = dims[0]
    if dims != list(range(dims[0], dims[-1] + 1)):
        x = x.permute(dims + [d for d in range(x.dim()) if d not in dims])
        start = 0
    sizes = list(x.shape)
    end = start + len(dims)
    flat = x.reshape(sizes[:start] + [math.prod(sizes[start:end])] + sizes[end:])
    picked = torch.index_select(flat, start, linear.expand(batch).reshape(-1))
    return picked.view(sizes[:start] + batch + sizes[end:])


def _gather_along(x, dim, positions, count):
    """x gathered along dim at `positions` (int64, one per result position),
    and where a position is outside [0, count): a mask of x's rank."""
    dim = dim + x.dim() if dim < 0 else dim
    outside = (positions < 0).logical_or(positions >= count)
    gathered = torch.index_select(x, dim, positions.clamp(0, count - 1))
    return gathered, outside.view([-1] + [1] * (x.dim() - dim - 1))


def _slice_scatter(x, src, dim=0, start=None, end=None, step=1):
    """x with x[start:end:step] along dim replaced by src: what functionalize
    makes of x[a:b] = v and of an in-place op on a slice."""
    size, count = x.shape[dim], src.shape[dim]
    start = 0 if start is None else start + size if start < 0 else start
    start = min(max(start, 0), size)
    if start == 0 and step == 1 and count == size:  # the whole dim (x[:] = v)
        return src.clone()
    if step == 1:
        positions = torch.arange(size) - start
    else:  # sizes are static here: the positions as a constant
        positions = torch.tensor([(p - start) // step if p >= start and (p - start) % step == 0
                                  else -1 for p in range(size)])
    gathered, outside = _gather_along(src, dim, positions, count)
    return torch.where(outside, x, gathered)


# The cumulative ops compare every pair of a row: rows up to this long.
_MAX_SORT = 4096


def _positions(n, what):
    """0..n-1 for `what` over rows of n, which compares every pair."""
    if n > _MAX_SORT:
        raise TraceError(f"{what} along a dim of {n}: Kiln compares every pair, up to "
                         f"{_MAX_SORT} elements")
    return torch.arange(n)


def _prefixes(x, dim, fill):
    """(x's rows along dim as the last, [..., i, j]: row element j where
    j <= i and `fill` after i, the positions 0..n-1, the j <= i mask)."""
    rows = x.movedim(dim, -1)
    index = _positions(rows.shape[-1], "a cumulative op")
    upto = index.unsqueeze(-1) >= index
    return rows, torch.where(upto, rows.unsqueeze(-2), fill), index, upto


def _cumulative_extreme(largest):
    """cummax (cummin) as eager: the running max (min), NaN from the first
    NaN on, and the last position so far holding it."""
    def extreme(x, dim):
        if x.dim() == 0:
            return x.clone(), torch.zeros((), dtype=torch.int64)
        if x.dtype == torch.bool:
            values, indices = extreme(x.long(), dim)
            return values.bool(), indices
        if x.dtype.is_floating_point:
            fill = -math.inf if largest else math.inf
        else:
            fill = torch.iinfo(x.dtype).min if largest else torch.iinfo(x.dtype).max
        rows, prefix, index, upto = _prefixes(x, dim, fill)
        values = prefix.amax(-1) if largest else prefix.amin(-1)
        value, element = values.unsqueeze(-1), rows.unsqueeze(-2)
        holds = (element == value) | ((element != element) & (value != value))
        indices = torch.where(upto & holds, index, -1).amax(-1)
        return values.movedim(-1, dim), indices.movedim(-1, dim)
    return extreme


def _logcumsumexp(x, dim):
    """logcumsumexp as the logsumexp of each prefix (eager adds one term at
    a time: the same within rounding)."""
    if x.dim() == 0:
        return x.clone()
    _, prefix, _, _ = _prefixes(x, dim, -math.inf)
    return torch.logsumexp(prefix, -1).movedim(-1, dim)


def _take(x, index):
    """x.flatten()[index] as one aten.index: torch's form indexes in Python,
    which reads a 0-dim index's value while tracing."""
    return aten.index.Tensor(x.reshape(-1), [index])


def _count_below(sorted_sequence, values, right):
    """How many of each row of sorted_sequence come before each value (<,
    or <= when right): searchsorted's and bucketize's positions."""
    rows, points = sorted_sequence.unsqueeze(-2), values.unsqueeze(-1)
    before = rows <= points if right else rows < points
    return before.sum(-1)


def _searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None,
                  sorter=None):
    if sorter is not None:
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    right = right or side == "right"
    if sorted_sequence.dim() == 1:
        count = _count_below(sorted_sequence, values.reshape(-1), right).reshape(values.shape)
    else:
        count = _count_below(sorted_sequence, values, right)
    return count.to(torch.int32 if out_int32 else torch.int64)


def _histc(x, bins=100, min=0, max=0):
    """histc as eager's CPU kernel counts: over [min, max] (the data's range
    when they are equal, widened by 1 on each side when that is one value),
    element e in bin trunc((e - min) * bins / (max - min)) computed in x's
    dtype, the last bin closed; elements outside the range are not counted.
    The counts add ones with index_add."""
    if not x.dtype.is_floating_point or x.numel() == 0 or min > max:
        return NotImplemented  # eager's error, or its zeros
    low, high = torch.tensor(min, dtype=x.dtype), torch.tensor(max, dtype=x.dtype)
    if min == max:
        low, high = x.amin(), x.amax()
        same = low == high
        low, high = torch.where(same, low - 1, low), torch.where(same, high + 1, high)
    flat = x.reshape(-1)
    inside = (flat >= low) & (flat <= high)
    place = ((flat - low) * bins / (high - low)).to(torch.int64).clamp(0, bins - 1)
    return torch.zeros(bins, dtype=x.dtype).index_add(0, place, inside.to(x.dtype))


def _masked_put(x, dim, mask, values, accumulate):
    """x with x[..., mask, ...] = values (mask over x's dims from `dim`):
    values must broadcast to the selected elements whatever their count,
    so a where (with accumulate, of x + values) does it."""
    if list(mask.shape) != list(x.shape[dim:dim + mask.dim()]):
        return NotImplemented  # eager's error
    trailing = list(x.shape[dim + mask.dim():])
    selected = list(x.shape[:dim]) + [1] + trailing  # the count of selected elements at `dim`
    shape = [1] * (len(selected) - values.dim()) + list(values.shape)
    if values.dim() > len(selected) or shape[dim] != 1 or \
            any(have not in (1, want) for have, want in zip(shape, selected)):
        return decline(aten.index_put.default,
                       "x[mask] = v with a v that does not broadcast to every count of "
                       "elements the mask selects (a size that depends on the values); use "
                       "torch.where(mask, v, x) with v broadcast to x")
    values = values.to(x.dtype).reshape(shape[:dim] + [1] * mask.dim() + shape[dim + 1:])
    mask = mask.bool().view([1] * dim + list(mask.shape) + [1] * len(trailing))
    return torch.where(mask, x + values if accumulate else values, x)


def _index_put(x, indices, values, accumulate=False):
    """x with x[indices] = values (not in place): where a boolean mask over
    x's dims selects (_masked_put); integer positions (negative ones
    counted from the end) are an index_copy, or with accumulate an
    index_add, kernels that write only the rows named. Several index
    tensors name positions of their dims taken as one (row-major), those
    dims moved first where they are not adjacent, as eager lays out the
    values; a position outside its dim is one outside them all."""
    dims = [d for d, index in enumerate(indices) if index is not None]
    if not dims:
        return NotImplemented
    if any(indices[d].dtype in (torch.bool, torch.uint8) for d in dims):
        if len(dims) != 1:
            return decline(aten.index_put.default,
                           "x[mask, i] = v with a mask and other indices: index with the mask "
                           "alone, or with integer tensors alone")
        return _masked_put(x, dims[0], indices[dims[0]], values, accumulate)
    if len(dims) == 1:
        dim, index = dims[0], indices[dims[0]]
        size, positions = x.shape[dim], index.reshape(-1).to(torch.int64)
        positions = torch.where(positions < 0, positions + size, positions)
        shape = list(x.shape[:dim]) + list(index.shape) + list(x.shape[dim + 1:])
        values = values.to(x.dtype).expand(shape).reshape(
            list(x.shape[:dim]) + [positions.shape[0]] + list(x.shape[dim + 1:]))
        return (torch.index_add if accumulate else torch.index_copy)(x, dim, positions, values)
    broadcast = list(torch.broadcast_shapes(*(indices[d].shape for d in dims)))
    flat, total, inside = 0, 1, True
    for d in dims:
        size, position = x.shape[d], indices[d].to(torch.int64).expand(broadcast)
        inside = inside & (position >= -size) & (position < size)
        flat = flat * size + torch.where(position < 0, position + size, position)
        total *= size
    positions = torch.where(inside, flat, total).reshape(-1)
    rest = [d for d in range(x.dim()) if d not in dims]
    if dims == list(range(dims[0], dims[0] + len(dims))):  # adjacent: values keep x's order
        layout = list(x.shape[:dims[0]]) + broadcast + list(x.shape[dims[-1] + 1:])
        values = values.to(x.dtype).expand(layout).movedim(
            list(range(dims[0], dims[0] + len(broadcast))), list(range(len(broadcast))))
    else:
        values = values.to(x.dtype).expand(broadcast + [x.shape[d] for d in rest])
    kept = [x.shape[d] for d in rest]
    moved = x.permute(dims + rest)
    result = (torch.index_add if accumulate else torch.index_copy)(
        moved.reshape([total] + kept), 0, positions, values.reshape([-1] + kept))
    return result.reshape(moved.shape).permute([(dims + rest).index(d) for d in range(x.dim())])


def _index_add(x, dim, index, source, *, alpha=1):
    """index_add into a 0-dim x as into a vector of its one element (Kiln's
    takes vectors and up: others keep the op whole)."""
    if x.dim() != 0 or source.dim() != 0 or index.numel() != 1:
        return NotImplemented
    return torch.index_add(x.reshape(1), dim, index.reshape(1), source.reshape(1),
                           alpha=alpha).reshape(())


def _in_place(functional):
    """An in-place op as its functional form written back with copy_, which
    the tracer's functionalize() turns into that result."""
    def in_place(x, *args, **kwargs):
        result = functional(x, *args, **kwargs)
        return result if result is NotImplemented else x.copy_(result)
    return in_place
