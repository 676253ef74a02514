"""What the tracer (kiln._tracing) does so that PyTorch programs trace into
ops Kiln's op table has (docs/PYTHON.md, "What the tracer does"):

  - DECOMPOSITIONS, make_fx's decomposition table: torch's own
    (core_aten_decompositions, and a few of its full table) for every op
    Kiln lacks, never for an op Kiln lowers (KILN_OPS); then Kiln's forms
    where torch has none, or where torch's is wrong for Kiln or grows the
    graph, each entry saying which;
  - TracingMode, active while tracing: PyTorch's fused inference fast paths
    turned off, and torch functions whose ATen forms depend on data
    (repeat_interleave, one_hot) run as Kiln's forms.

Each form computes what eager does; kiln_test checks every one against it.
"""
import math

import torch
import torch.nn.functional as F
from torch import _prims_common
from torch._decomp import core_aten_decompositions, decomposition_table, get_decompositions
from torch.overrides import TorchFunctionMode

from . import _linalg


class TraceError(Exception):
    """A graph Kiln cannot take, with a message naming the node."""


aten = torch.ops.aten


def _index(x, indices):
    """x[indices] (advanced indexing, NumPy's rules) as one index_select of
    x with the indexed dims flattened into one; negative indices count from
    the end, as in eager."""
    dims = [d for d, index in enumerate(indices) if index is not None]
    if any(indices[d].dtype in (torch.bool, torch.uint8) for d in dims):
        raise TraceError("indexing with a boolean mask (x[mask]) gives a result whose size depends "
                         "on the data, and Kiln compiles fixed shapes: use torch.where(mask, x, "
                         "fill), or index with integer positions")
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


def _clamp_tensor(x, min=None, max=None):
    """clamp with tensor bounds as eager computes it: maximum, then minimum
    (the upper bound wins where they cross; a NaN bound gives NaN)."""
    if min is not None:
        x = torch.maximum(x, min)
    return x if max is None else torch.minimum(x, max)


def _nll_loss_forward(x, target, weight, reduction, ignore_index):
    """nll_loss as eager computes it: ignored targets add nothing and weigh
    nothing."""
    channel_dim = 0 if x.dim() < 2 else 1
    if weight is not None:
        x = x * (weight.unsqueeze(0) if x.dim() > 1 else weight)
    counted = target != ignore_index
    at = target.masked_fill(~counted, 0).unsqueeze(channel_dim)
    result = (-torch.gather(x, channel_dim, at).squeeze(channel_dim)).masked_fill(~counted, 0.0)
    if reduction == 0 and x.dim() > 1:  # none
        return result, x.new_full((), 0.0)
    if weight is None:
        total = counted.sum().to(x.dtype)
    else:
        w = weight.unsqueeze(0).expand(x.shape) if x.dim() > 1 else weight
        total = torch.gather(w, channel_dim, at).squeeze(channel_dim).masked_fill(~counted, 0.0)
        total = total.sum()
    if reduction == 2:  # sum
        result = result.sum()
    elif reduction == 1:  # mean
        result = result.sum() / total
    return result, total


def _class_rows(x):
    """[N, C, H, W] as [N * H * W, C] rows: the classes made the last dim."""
    return x.movedim(1, -1).reshape(-1, x.shape[1])


def _nll_loss2d_forward(x, target, weight, reduction, ignore_index):
    """nll_loss over [N, C, H, W] (and [N, C, d], which F.nll_loss views so),
    over _class_rows."""
    rows = _class_rows(x)
    result, total = _nll_loss_forward(rows, target.reshape(-1), weight, reduction, ignore_index)
    return (result.reshape(target.shape) if reduction == 0 else result), total


def _nll_loss_backward(grad_output, x, target, weight, reduction, ignore_index, total_weight):
    """nll_loss's input gradient for any ignore_index: -weight * grad at each
    counted target's class (divided by the total weight for a mean), as a
    comparison with the classes."""
    channel_dim = 0 if x.dim() < 2 else 1
    counted = target != ignore_index
    classes = torch.arange(x.shape[channel_dim])
    if x.dim() > 1:
        hit = (target.unsqueeze(1) == classes) & counted.unsqueeze(1)
    else:
        hit = (target == classes) & counted
    if reduction == 1:  # mean
        grad_output = grad_output / total_weight
    if x.dim() > 1 and grad_output.dim() > 0:
        grad_output = grad_output.unsqueeze(1)
    grad = -grad_output.expand(x.shape)
    if weight is not None:
        grad = grad * (weight.unsqueeze(0) if x.dim() > 1 else weight)
    return torch.where(hit, grad, 0.0)  # 0, not NaN, where nothing counts


def _nll_loss2d_backward(grad_output, x, target, weight, reduction, ignore_index, total_weight):
    """_nll_loss_backward over the [N * H * W, C] rows _nll_loss2d_forward
    reads, moved back to [N, C, H, W]."""
    grad = grad_output.reshape(-1) if reduction == 0 else grad_output
    grad = _nll_loss_backward(grad, _class_rows(x), target.reshape(-1), weight, reduction,
                              ignore_index, total_weight)
    return grad.reshape(x.movedim(1, -1).shape).movedim(-1, 1)


def _convolution_backward(grad_output, x, weight, bias_sizes, stride, padding, dilation,
                          transposed, output_padding, groups, output_mask):
    """A convolution's gradients as convolutions Kiln runs (oneDNN's): the
    input's is the transposed convolution of grad_output with the weight;
    the weight's correlates x with grad_output, x's batch made channels
    (x[N, g * Ci, ...] as [Ci, g * N, ...], grad_output[N, g * Co, ...] as
    the weight [g * Co, N, ...], stride and dilation swapped, groups g),
    cut to the kernel's size; the bias's sums grad_output but over
    channels. Not for a transposed convolution's backward."""
    if transposed:
        return NotImplemented
    spatial = x.dim() - 2
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        extra = [x.shape[2 + d] - ((grad_output.shape[2 + d] - 1) * stride[d] - 2 * padding[d]
                                   + dilation[d] * (weight.shape[2 + d] - 1) + 1)
                 for d in range(spatial)]
        grad_input = aten.convolution(grad_output, weight, None, stride, padding, dilation, True,
                                      extra, groups)
    if output_mask[1]:
        n, g = x.shape[0], groups
        ci, co = x.shape[1] // g, grad_output.shape[1] // g
        order = [2, 1, 0] + list(range(3, 3 + spatial))
        inputs = x.reshape(n, g, ci, *x.shape[2:]).permute(order).reshape(ci, g * n, *x.shape[2:])
        grads = grad_output.reshape(n, g, co, *grad_output.shape[2:])
        grads = grads.permute([1, 2, 0] + list(range(3, 3 + spatial)))
        grads = grads.reshape(g * co, n, *grad_output.shape[2:])
        correlated = aten.convolution(inputs, grads, None, dilation, padding, stride, False,
                                      [0] * spatial, g)
        grad_weight = correlated.transpose(0, 1)
        for d in range(spatial):
            grad_weight = grad_weight.narrow(2 + d, 0, weight.shape[2 + d])
    if output_mask[2] and bias_sizes is not None:
        grad_bias = grad_output.sum([0] + list(range(2, 2 + spatial)))
    return grad_input, grad_weight, grad_bias


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


def _take(x, index):
    """x.flatten()[index] as one aten.index: torch's form indexes in Python,
    which reads a 0-dim index's value while tracing."""
    return aten.index.Tensor(x.reshape(-1), [index])


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


def _rrelu_with_noise(x, noise, lower=0.125, upper=1.0 / 3, training=False, generator=None):
    """RReLU in eval: leaky_relu with the mean of the slopes' range (in
    training it draws its slopes: refused as random)."""
    if training:
        return NotImplemented
    return torch.nn.functional.leaky_relu(x, (lower + upper) / 2)


def _col2im(x, output_size, kernel_size, dilation, padding, stride):
    """F.fold: each kernel position's blocks added onto a padded canvas at
    the strided rows and columns they came from (slice scatters), then the
    padding cut away. Overlap-add, as eager, in kernel order."""
    unbatched = x.dim() == 2
    x = x.unsqueeze(0) if unbatched else x
    (h, w), (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (
        output_size, kernel_size, dilation, padding, stride)
    blocks_h = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    blocks_w = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    n, channels = x.shape[0], x.shape[1] // (kh * kw)
    blocks = x.reshape(n, channels, kh, kw, blocks_h, blocks_w)
    canvas = torch.zeros(n, channels, h + 2 * ph, w + 2 * pw, dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            top, left = i * dh, j * dw
            rows = canvas[:, :, top:top + sh * (blocks_h - 1) + 1:sh]
            added = rows[..., left:left + sw * (blocks_w - 1) + 1:sw] + blocks[:, :, i, j]
            rows = rows.slice_scatter(added, 3, left, left + sw * (blocks_w - 1) + 1, sw)
            canvas = canvas.slice_scatter(rows, 2, top, top + sh * (blocks_h - 1) + 1, sh)
    result = canvas[:, :, ph:ph + h, pw:pw + w]
    return result[0] if unbatched else result


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


def _copysign(a, b):
    magnitude = a.abs() if a.dtype.is_floating_point else a.abs().to(torch.get_default_dtype())
    return torch.where(_signbit(b), -magnitude, magnitude)


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


def _triple(value):
    value = [value] if isinstance(value, int) else list(value)
    return value * 3 if len(value) == 1 else value


def _frames_then_time(x, pool2d, kernel_size, stride, padding, rest):
    """A 3-D pooling as Kiln's 2-D one twice: over (H, W) in every frame,
    then over windows of T of those results, as [N * C, 1, T, OH * OW]
    planes. rest(stage) gives the arguments after padding of stage 0 and
    1; returns both stages' results and (N, C, OH, OW)."""
    (kt, kh, kw), (pt, ph, pw) = _triple(kernel_size), _triple(padding)
    st, sh, sw = _triple(stride or kernel_size)
    n, c, t, h, w = x.shape
    first = pool2d(x.reshape(n, c * t, h, w), [kh, kw], [sh, sw], [ph, pw], *rest(0))
    planes = first[0] if isinstance(first, tuple) else first
    oh, ow = planes.shape[-2:]
    second = pool2d(planes.reshape(n * c, 1, t, oh * ow), [kt, 1], [st, 1], [pt, 0], *rest(1))
    return first, second, (n, c, oh, ow)


def _max_pool3d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """torch's max_pool3d, refusing a window that lies wholly in the padding,
    where eager's index points into the padding and torch's is negative."""
    kernel, step, pad, spread = map(_triple, (kernel_size, stride or kernel_size, padding,
                                              dilation))
    for d, size in enumerate(x.shape[-3:]):
        span = size + 2 * pad[d] - spread[d] * (kernel[d] - 1) - 1
        for o in range(max((span + (step[d] - 1 if ceil_mode else 0)) // step[d] + 1, 0)):
            if all(not 0 <= o * step[d] - pad[d] + k * spread[d] < size
                   for k in range(kernel[d])):
                raise TraceError(f"max_pool3d: window {o} of dim {d - 3} lies wholly in the "
                                 f"padding (kernel {kernel}, stride {step}, padding {pad}, "
                                 f"dilation {spread})")
    torchs = decomposition_table[aten.max_pool3d_with_indices.default]
    return torchs(x, kernel_size, stride, padding, dilation, ceil_mode)


def _pow_scalar(base, exponent):
    """base ** t as eager computes it: pow of a tensor of base (1 ** t is 1)."""
    dtype = torch.result_type(base, exponent)
    if base == 1:
        return torch.ones(exponent.shape, dtype=dtype)
    return torch.pow(torch.full(exponent.shape, base, dtype=dtype), exponent)


def _reflection_pad(x, padding):
    """torch's reflection_padNd, refusing a side as large as its dim, as
    eager does (torch's reads out of range there)."""
    for i in range(len(padding) // 2):
        dim, (left, right) = x.dim() - 1 - i, padding[2 * i:2 * i + 2]
        if max(left, right) >= x.shape[dim]:
            raise TraceError(f"reflection padding ({left}, {right}) of dim {dim}: each side "
                             f"must be smaller than its size {x.shape[dim]}")
    return decomposition_table[aten.reflection_pad1d.default](x, padding)  # any rank


def _avg_pool3d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    """avg_pool3d as two averages, over (H, W) in every frame and then over
    T: each window's divisor is the product of its dims' (with or without
    padding), so the mean of means is the mean; a divisor_override divides
    the two stages' sums once."""
    if not x.dtype.is_floating_point:
        return NotImplemented  # two integer averages would truncate twice
    unbatched = x.dim() == 4
    x = x.unsqueeze(0) if unbatched else x
    divisor = None if divisor_override is None else 1
    _, pooled, (n, c, oh, ow) = _frames_then_time(
        x, aten.avg_pool2d, kernel_size, stride, padding,
        lambda stage: (ceil_mode, count_include_pad, divisor))
    pooled = pooled.reshape(n, c, -1, oh, ow)
    if divisor_override is not None:
        pooled = pooled / divisor_override
    return pooled[0] if unbatched else pooled


def _adaptive_avg_pool3d(x, output_size):
    """_adaptive_avg_pool3d as two adaptive averages, over (H, W) in every
    frame and then over T: each window is a box, so the mean of the frames'
    means is its mean."""
    if not x.dtype.is_floating_point or x.numel() == 0:
        return NotImplemented
    unbatched = x.dim() == 4
    x = x.unsqueeze(0) if unbatched else x
    n, c, t, h, w = x.shape
    ot, oh, ow = _triple(output_size)
    frames = aten._adaptive_avg_pool2d(x.reshape(n, c * t, h, w), [oh, ow])
    pooled = aten._adaptive_avg_pool2d(frames.reshape(n * c, 1, t, oh * ow), [ot, oh * ow])
    pooled = pooled.reshape(n, c, ot, oh, ow)
    return pooled[0] if unbatched else pooled


def _adaptive_max_pool(spatial):
    """adaptive_max_pool2d (3d) with indices: torch's where its windows are
    regular, else each window's elements gathered along each pooled dim
    (windows of fewer than the largest size repeat their last element) and
    taken as eager's kernel takes them: the first maximum, or the last NaN,
    at its flat position in the input's pooled dims."""
    regular = decomposition_table[getattr(aten, f"adaptive_max_pool{spatial}d").default]

    def pool(x, output_size):
        result = regular(x, output_size)
        if result is not NotImplemented:
            return result
        sizes, outputs = x.shape[-spatial:], list(output_size)
        lead = x.dim() - spatial
        positions = torch.zeros((), dtype=torch.int64)
        for d, (size, out) in enumerate(zip(sizes, outputs)):
            starts = [o * size // out for o in range(out)]
            ends = [-(-(o + 1) * size // out) for o in range(out)]
            width = max(e - s for s, e in zip(starts, ends))
            index = torch.tensor([[min(s + k, e - 1) for k in range(width)]
                                  for s, e in zip(starts, ends)])
            dim = lead + 2 * d
            x = x.index_select(dim, index.reshape(-1)).unflatten(dim, (out, width))
            positions = positions.unsqueeze(-1).unsqueeze(-1) * size + index
        order = list(range(lead)) + [lead + 2 * d for d in range(spatial)] + \
            [lead + 2 * d + 1 for d in range(spatial)]
        windows = x.permute(order).flatten(-spatial)
        positions = positions.permute([2 * d for d in range(spatial)] +
                                      [2 * d + 1 for d in range(spatial)]).flatten(-spatial)
        values = windows.amax(-1)
        nan = windows != windows
        last_nan = (nan * torch.arange(windows.shape[-1])).amax(-1)
        first_max = (windows == values.unsqueeze(-1)).to(torch.int64).argmax(-1)
        chosen = torch.where(nan.any(-1), last_nan, first_max)
        return values, positions.expand(windows.shape).gather(-1, chosen.unsqueeze(-1))[..., 0]
    return pool


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


def _index_put(x, indices, values, accumulate=False):
    """x with x[indices] = values (not in place): where a boolean mask over
    x's dims selects (a scalar value); integer positions along one dim
    (negative ones counted from the end) are an index_copy, or with
    accumulate an index_add: kernels that write only the rows named."""
    dims = [d for d, index in enumerate(indices) if index is not None]
    if len(dims) != 1:
        raise TraceError("x[i, j] = v with several index tensors: Kiln takes one")
    dim, index = dims[0], indices[dims[0]]
    if index.dtype in (torch.bool, torch.uint8):
        if accumulate or values.numel() != 1 or \
                list(index.shape) != list(x.shape[dim:dim + index.dim()]):
            raise TraceError("x[mask] = v takes a scalar v and a mask of x's shape: use "
                             "torch.where(mask, v, x)")
        mask = index.bool().view([1] * dim + list(index.shape)
                                 + [1] * (x.dim() - dim - index.dim()))
        return torch.where(mask, values.reshape([]).to(x.dtype), x)
    size, positions = x.shape[dim], index.reshape(-1).to(torch.int64)
    positions = torch.where(positions < 0, positions + size, positions)
    shape = list(x.shape[:dim]) + list(index.shape) + list(x.shape[dim + 1:])
    values = values.to(x.dtype).expand(shape).reshape(
        list(x.shape[:dim]) + [positions.shape[0]] + list(x.shape[dim + 1:]))
    return (torch.index_add if accumulate else torch.index_copy)(x, dim, positions, values)


def _in_place(functional):
    """An in-place op as its functional form written back with copy_, which
    the tracer's functionalize() turns into that result."""
    return lambda x, *args, **kwargs: x.copy_(functional(x, *args, **kwargs))


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


def _flash_attention_for_cpu(query, key, value, dropout_p=0.0, is_causal=False, *,
                             attn_mask=None, scale=None):
    """What nn.MultiheadAttention and F.scaled_dot_product_attention call on
    the CPU, as torch's math form, its output laid out as the kernel lays it
    out: as query is (empty_like). torch's own decomposition lays it out as
    (L, N, H, E), query's layout in nn.MultiheadAttention; with another
    layout a view that the kernel's output allows fails (torch.export keeps a
    program's .contiguous() only where the kernel's output needed it). The
    second result is the kernel's: the logsumexp of each query's scaled,
    masked scores, (N, H, L)."""
    output, _ = aten._scaled_dot_product_attention_math.default(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
        scale=scale, enable_gqa=query.size(1) != key.size(1))
    order, _ = _prims_common.compute_elementwise_output_logical_to_physical_perm(query)
    laid_out = output.permute(order).contiguous()
    key = key.repeat_interleave(query.size(1) // key.size(1), dim=1)
    scores = query @ key.transpose(-2, -1) * (scale or query.size(-1) ** -0.5)
    if is_causal:
        attn_mask = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask
    return laid_out.permute(_prims_common.invert_perm(order)), torch.logsumexp(scores, -1)


def _eye(n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None):
    """torch.eye as a comparison of ranges (torch's compares uint8 ones, a
    dtype Kiln lacks)."""
    rows = torch.arange(n).unsqueeze(1)
    return (rows == torch.arange(n if m is None else m)).to(dtype or torch.get_default_dtype())


def _shrink_backward(grad, x, lambd):
    return torch.where((x >= -lambd) & (x <= lambd), torch.zeros_like(grad), grad)


def _native_multi_head_attention(query, key, value, embed_dim, num_heads, qkv_weight, qkv_bias,
                                 proj_weight, proj_bias, mask=None, need_weights=True,
                                 average_attn_weights=True, mask_type=None):
    """nn.MultiheadAttention's fused inference op (batch first), as the ops
    of its slow path: TorchScript records it (scripted modules, and modules
    traced under no_grad), where TracingMode cannot turn it off. `mask` is
    a key padding mask [B, S] (mask_type 1) or [L, S], True where left out."""
    batch, length, _ = query.shape
    head = embed_dim // num_heads

    def heads(x, weight, bias):
        return F.linear(x, weight, bias).view(batch, -1, num_heads, head).transpose(1, 2)
    weights, biases = qkv_weight.chunk(3), qkv_bias.chunk(3)
    q = heads(query, weights[0], biases[0]) / math.sqrt(head)
    k, v = heads(key, weights[1], biases[1]), heads(value, weights[2], biases[2])
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        mask = mask.view(batch, 1, 1, -1) if mask_type == 1 else mask
        scores = scores.masked_fill(mask, float("-inf")) if mask.dtype == torch.bool \
            else scores + mask
    attention = scores.softmax(-1)
    out = (attention @ v).transpose(1, 2).reshape(batch, length, embed_dim)
    out = F.linear(out, proj_weight, proj_bias)
    if not need_weights:
        return out, None
    return out, attention.mean(1) if average_attn_weights else attention


def _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                   proj_bias, use_gelu, norm_first, eps, norm_weight_1,
                                   norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
                                   ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None,
                                   mask_type=None):
    """nn.TransformerEncoderLayer's fused inference op, as its slow path's
    ops (see _native_multi_head_attention)."""
    def attend(x):
        return _native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias,
                                            proj_weight, proj_bias, mask, False, True,
                                            mask_type)[0]

    def feed_forward(x):
        hidden = F.linear(x, ffn_weight_1, ffn_bias_1)
        return F.linear(F.gelu(hidden) if use_gelu else F.relu(hidden), ffn_weight_2, ffn_bias_2)

    def norm(x, weight, bias):
        return F.layer_norm(x, [embed_dim], weight, bias, eps)
    if norm_first:
        x = src + attend(norm(src, norm_weight_1, norm_bias_1))
        return x + feed_forward(norm(x, norm_weight_2, norm_bias_2))
    x = norm(src + attend(src), norm_weight_1, norm_bias_1)
    return norm(x + feed_forward(x), norm_weight_2, norm_bias_2)


def _convolution_without_flags(x, weight, bias, stride, padding, dilation, transposed,
                               output_padding, groups, *flags):
    return aten.convolution.default(x, weight, bias, stride, padding, dilation, transposed,
                                    output_padding, groups)


# Kiln's op table (codegen/ops/, listed in docs/OPS.md; kiln_test checks that
# the two agree): ops Kiln lowers natively, which make_fx must leave as they
# are (a native kernel beats any decomposition), with their in-place forms.
KILN_OPS = frozenset(["prims.convert_element_type.default"] + [f"aten.{name}" for name in """
    _adaptive_avg_pool2d.default _adaptive_avg_pool2d_backward.default _log_softmax.default
    _reshape_alias.default _softmax.default _softmax_backward_data.default _to_copy.default
    _unsafe_view.default _weight_norm_interface.default abs.default acos.default acosh.default
    add.Scalar add.Tensor addmm.default alias.default amax.default amin.default arange.default
    arange.start arange.start_step argmax.default argmin.default as_strided.default
    asin.default asinh.default atan.default atan2.default atanh.default avg_pool2d.default
    avg_pool2d_backward.default baddbmm.default bmm.default cat.default ceil.default
    clamp.default clamp_max.default clamp_min.default clone.default contiguous.default
    convolution.default cos.default cosh.default count_nonzero.default
    count_nonzero.dim_IntList cumprod.default cumsum.default detach.default div.Scalar
    div.Tensor div.Tensor_mode elu.default elu_backward.default embedding.default
    embedding_dense_backward.default empty.memory_format empty_like.default eq.Scalar eq.Tensor
    erf.default exp.default exp2.default expand.default expm1.default fill.Scalar fill.Tensor
    flip.default floor.default floor_divide.default fmod.Scalar fmod.Tensor full.default
    full_like.default gather.default ge.Scalar ge.Tensor gelu.default gelu_backward.default
    gt.Scalar gt.Tensor hardshrink.default hardsigmoid.default hardsigmoid_backward.default
    hardswish.default hardswish_backward.default hardtanh.default hardtanh_backward.default
    huber_loss.default huber_loss_backward.default index_add.default index_copy.default
    index_select.default
    le.Scalar le.Tensor leaky_relu.default leaky_relu_backward.default lerp.Scalar lerp.Tensor
    lift_fresh.default lift_fresh_copy.default linear.default log.default log10.default
    log1p.default log2.default logical_and.default logical_not.default logical_or.default
    logical_xor.default lt.Scalar lt.Tensor masked_fill.Scalar masked_fill.Tensor max.dim
    max_pool2d_with_indices.default max_pool2d_with_indices_backward.default maximum.default
    mean.default mean.dim min.dim minimum.default mm.default mse_loss.default
    mse_loss_backward.default mul.Scalar mul.Tensor native_batch_norm.default
    native_batch_norm_backward.default native_group_norm.default
    native_group_norm_backward.default native_layer_norm.default
    native_layer_norm_backward.default ne.Scalar ne.Tensor neg.default new_empty.default
    new_full.default new_ones.default new_zeros.default ones.default ones_like.default
    permute.default pixel_shuffle.default pixel_unshuffle.default pow.Tensor_Scalar
    pow.Tensor_Tensor prelu.default prelu_backward.default prod.default prod.dim_int
    reciprocal.default relu.default remainder.Scalar remainder.Tensor repeat.default
    reshape.default round.default rsqrt.default rsub.Scalar scalar_tensor.default
    scatter.src scatter.value scatter_add.default select.int sigmoid.default sign.default
    silu.default sin.default
    sinh.default slice.Tensor smooth_l1_loss.default smooth_l1_loss_backward.default
    softshrink.default split.Tensor split_with_sizes.default sqrt.default squeeze.default
    squeeze.dim squeeze.dims stack.default std.correction sub.Scalar sub.Tensor sum.default
    sum.dim_IntList t.default tan.default tanh.default threshold_backward.default transpose.int
    tril.default triu.default trunc.default unbind.int unfold.default unsqueeze.default
    var.correction var_mean.correction view.default where.self xlogy.Scalar_Other xlogy.Tensor
    zeros.default zeros_like.default
    bitwise_and.Tensor bitwise_and.Scalar bitwise_or.Tensor bitwise_or.Scalar bitwise_xor.Tensor
    bitwise_xor.Scalar bitwise_not.default bitwise_left_shift.Tensor
    bitwise_left_shift.Tensor_Scalar bitwise_right_shift.Tensor bitwise_right_shift.Tensor_Scalar
    fmax.default fmin.default
    sort.default sort.stable topk.default kthvalue.default mode.default median.default
    median.dim nanmedian.default nanmedian.dim
""".split()] + [f"aten.{name}" for name in """
    _conj.default _conj_physical.default _fft_c2c.default _fft_c2r.default _fft_r2c.default
    angle.default complex.default polar.default view_as_complex.default view_as_real.default
""".split()])  # complex numbers and FFTs (codegen/ops/complex.cc, fft.cc)
# Linear algebra through LAPACK (codegen/ops/linalg.cc).
KILN_OPS |= frozenset(f"aten.{name}" for name in """
    _linalg_det.default _linalg_slogdet.default _linalg_solve_ex.default
    cholesky_inverse.default
    cholesky_solve.default linalg_cholesky_ex.default linalg_inv_ex.default linalg_lu.default
    linalg_lu_factor_ex.default linalg_lu_solve.default linalg_solve_triangular.default
    triangular_solve.default
    _linalg_svd.default _linalg_eigh.default
""".split())
# The index and scatter family (codegen/ops/scatter_reduce.cc).
KILN_OPS |= {f"aten.{name}" for name in """
    as_strided_scatter.default diagonal_scatter.default index_reduce.default
    masked_scatter.default put.default scatter.reduce scatter.value_reduce scatter_reduce.two
    segment_reduce.default
""".split()}
# The special functions (codegen/ops/special.cc).
KILN_OPS |= frozenset(f"aten.{name}" for name in """
    digamma.default erfc.default erfinv.default i0.default igamma.default igammac.default
    lgamma.default polygamma.default special_airy_ai.default special_bessel_j0.default
    special_bessel_j1.default special_bessel_y0.default special_bessel_y1.default
    special_chebyshev_polynomial_t.default special_chebyshev_polynomial_t.n_scalar
    special_chebyshev_polynomial_u.default special_chebyshev_polynomial_u.n_scalar
    special_chebyshev_polynomial_v.default special_chebyshev_polynomial_v.n_scalar
    special_chebyshev_polynomial_w.default special_chebyshev_polynomial_w.n_scalar
    special_erfcx.default special_hermite_polynomial_h.default
    special_hermite_polynomial_h.n_scalar special_hermite_polynomial_he.default
    special_hermite_polynomial_he.n_scalar special_i0e.default special_i1.default
    special_i1e.default special_laguerre_polynomial_l.default
    special_laguerre_polynomial_l.n_scalar special_legendre_polynomial_p.default
    special_legendre_polynomial_p.n_scalar special_modified_bessel_i0.default
    special_modified_bessel_i1.default special_modified_bessel_k0.default
    special_modified_bessel_k1.default special_ndtri.default
    special_scaled_modified_bessel_k0.default special_scaled_modified_bessel_k1.default
    special_shifted_chebyshev_polynomial_t.default
    special_shifted_chebyshev_polynomial_t.n_scalar
    special_shifted_chebyshev_polynomial_u.default
    special_shifted_chebyshev_polynomial_u.n_scalar
    special_shifted_chebyshev_polynomial_v.default
    special_shifted_chebyshev_polynomial_v.n_scalar
    special_shifted_chebyshev_polynomial_w.default
    special_shifted_chebyshev_polynomial_w.n_scalar special_spherical_bessel_j0.default
    special_zeta.default special_zeta.other_scalar
""".split())


def _torchs(table):
    """The entries of torch's decomposition `table` for ops Kiln lacks."""
    def lacks(op):
        namespace, name, overload = str(op).split(".")
        return f"{namespace}.{name.rstrip('_')}.{overload}" not in KILN_OPS
    return {op: fn for op, fn in table.items() if lacks(op)}


# Ops core ATen keeps and Kiln lacks, which torch's full table decomposes.
_BEYOND_CORE = [
    aten.addmv, aten.bucketize, aten.constant_pad_nd,
    aten.diagonal, aten.grid_sampler_2d, aten.isinf, aten._native_batch_norm_legit,
    aten.as_strided_copy, aten.dist, aten.ldexp, aten.narrow_copy, aten.new_empty_strided,
    aten.permute_copy, aten.unbind_copy, aten.view_copy,
    aten.tril_indices, aten.triu_indices, aten.upsample_bicubic2d,
    aten.upsample_bilinear2d, aten.upsample_nearest2d, aten.upsample_trilinear3d,
]

# make_fx's decomposition table: torch's own for the ops Kiln lacks, then
# Kiln's forms above where torch's do not serve (each says why).
DECOMPOSITIONS = {
    **_torchs(core_aten_decompositions()),
    **_torchs(get_decompositions(_BEYOND_CORE)),
    # In none of torch's tables.
    aten._cdist_forward.default: _cdist,
    aten._pdist_forward.default: _pdist,
    aten.avg_pool3d.default: _avg_pool3d,
    aten._adaptive_avg_pool3d.default: _adaptive_avg_pool3d,
    aten._trilinear.default: _trilinear,
    aten.adaptive_max_pool2d.default: _adaptive_max_pool(2),
    aten.adaptive_max_pool3d.default: _adaptive_max_pool(3),
    aten.convolution_backward.default: _convolution_backward,
    aten.cummax.default: _cumulative_extreme(largest=True),
    aten.take.default: _take,  # torch's reads a 0-dim index's value
    aten.cummin.default: _cumulative_extreme(largest=False),
    aten.hamming_window.default: _hamming_window,
    aten.hamming_window.periodic: _hamming_window,
    aten.hamming_window.periodic_alpha: _hamming_window,
    aten.hamming_window.periodic_alpha_beta: _hamming_window,
    aten.hardshrink_backward.default: _shrink_backward,
    aten.softshrink_backward.default: _shrink_backward,
    aten.logcumsumexp.default: _logcumsumexp,
    aten.rrelu_with_noise.default: _rrelu_with_noise,
    aten.searchsorted.Tensor: _searchsorted,
    aten.histc.default: _histc,
    aten.unsafe_chunk.default: aten.chunk.default,
    aten.index.Tensor: _index,  # also what torch's _unsafe_index (interpolation) is
    aten.index_put.default: _index_put,
    aten.index_put_.default: _in_place(_index_put),
    # A count of zeros: torch's all is not(any(not x)), two nodes more in
    # every attention's softmax (_safe_softmax).
    aten.all.default: _all,
    aten.all.dim: _all,
    aten.all.dims: _all,
    aten.any.default: _any,
    aten.any.dim: _any,
    aten.any.dims: _any,
    # torch's multiplies and rounds in prims.
    aten.round.decimals: _round_decimals,
    # x << n and x >> n are the shifts' operators.
    aten.__lshift__.Scalar: aten.bitwise_left_shift.Tensor_Scalar,
    aten.__lshift__.Tensor: aten.bitwise_left_shift.Tensor,
    aten.__rshift__.Scalar: aten.bitwise_right_shift.Tensor_Scalar,
    aten.__rshift__.Tensor: aten.bitwise_right_shift.Tensor,
    # torch's, after the checks eager makes and torch's leave out.
    aten.max_pool3d_with_indices.default: _max_pool3d_with_indices,
    aten.reflection_pad1d.default: _reflection_pad,
    aten.reflection_pad2d.default: _reflection_pad,
    aten.reflection_pad3d.default: _reflection_pad,
    # Functionalization's form of a write (x.copy_(src), x[i] = v): src as x's
    # dtype and shape.
    aten.copy.default: lambda x, src, non_blocking=False: src.to(x.dtype).expand(x.shape).clone(),
    # What TorchScript's tracer records (torch.jit.trace): cuDNN's flags, and
    # fused paths no mode turns off there.
    aten._convolution.default: _convolution_without_flags,
    aten._convolution.deprecated: _convolution_without_flags,
    aten._native_multi_head_attention.default: _native_multi_head_attention,
    aten._transformer_encoder_layer_fwd.default: _transformer_encoder_layer_fwd,
    # Fewer nodes than torch's: a gather and a where per scattered dim
    # (torch's compares positions by floor division: 24 nodes to 11), and
    # nll_loss's comparisons with the classes (torch's gathers the weights
    # and scatters the gradient: a cross_entropy step is 48 nodes to 33).
    aten.slice_scatter.default: _slice_scatter,
    aten.nll_loss_forward.default: _nll_loss_forward,
    aten.nll_loss2d_forward.default: _nll_loss2d_forward,
    aten.nll_loss_backward.default: _nll_loss_backward,
    aten.nll_loss2d_backward.default: _nll_loss2d_backward,
    # torch's lays its output out as (L, N, H, E) whatever the query's layout.
    aten._scaled_dot_product_flash_attention_for_cpu.default: _flash_attention_for_cpu,
    # torch's go through ops or dtypes Kiln lacks: prims (pow, signbit,
    # hypot, ne), uint8 (eye).
    aten.copysign.Tensor: _copysign,
    aten.pow.Scalar: _pow_scalar,
    aten.eye.default: _eye,
    aten.eye.m: _eye,
    aten.hypot.default: _hypot,
    aten.isnan.default: lambda x: x != x,
    aten.signbit.default: _signbit,
    # torch's accumulates with an index_put, which Kiln refuses.
    aten.col2im.default: _col2im,
    # torch's is 9 nodes to these 3 (maximum, then minimum, as eager).
    aten.clamp.Tensor: _clamp_tensor,
    # Eager's, over the SVD and eigh (kiln/_linalg.py).
    aten.linalg_pinv.atol_rtol_tensor: _linalg.pinv,
}


def _repeat_interleave(x, repeats, dim=None, *, output_size=None):
    """repeat_interleave by a whole number, as an expand: ATen's form
    computes its positions from a tensor of repeats (data-dependent)."""
    if not isinstance(repeats, int):
        return NotImplemented
    if dim is None:
        x, dim = x.flatten(), 0
    dim = dim % x.dim()
    sizes = list(x.shape)
    return x.unsqueeze(dim + 1).expand(sizes[:dim + 1] + [repeats] + sizes[dim + 1:]) \
        .flatten(dim, dim + 1)


def _one_hot(indices, num_classes=-1):
    """F.one_hot with num_classes given, as a comparison: ATen's form reads
    the largest index first (data-dependent)."""
    if num_classes < 0:
        return NotImplemented
    return (indices.unsqueeze(-1) == torch.arange(num_classes)).long()


def _embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2.0,
                   scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                   include_last_offset=False, padding_idx=None):
    """F.embedding_bag (nn.EmbeddingBag) of a 2-D input, bags of one size,
    as an embedding and a reduction over each bag: ATen's form takes the
    bags' offsets as a tensor. Entries equal to padding_idx take no part (a
    bag of padding alone gives zeros, as eager). A max over a NaN is NaN
    (eager's running max keeps a NaN only when it comes first)."""
    if (max_norm is not None  # renormalizes weight in place
            or include_last_offset or (per_sample_weights is not None and mode != "sum")):
        return NotImplemented  # ATen's form: refused, or eager's error
    if input.dim() != 2 or offsets is not None:
        raise TraceError("embedding_bag over 1-D indices with offsets (bags of varying size): "
                         "Kiln takes a 2-D input of bags of one size; pad the shorter bags with "
                         "padding_idx")
    rows = torch.nn.functional.embedding(input, weight)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(-1)
    if padding_idx is None:
        keep = None
    else:
        keep = (input != padding_idx % weight.shape[0]).unsqueeze(-1)
        rows = rows.masked_fill(~keep, float("-inf") if mode == "max" else 0.0)
    if mode == "sum":
        return rows.sum(1)
    if mode == "mean":
        count = input.shape[1] if keep is None else keep.sum(1).clamp(min=1)
        return rows.sum(1) / count
    largest = rows.amax(1)
    return largest if keep is None else largest.masked_fill(~keep.any(1), 0.0)


def _cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                   reduction="mean", label_smoothing=0.0):
    """F.cross_entropy with label smoothing over class indices, as eager
    computes it, but for the mean over the targets that count: ATen's form
    takes it with masked_select (a size that depends on data)."""
    if (label_smoothing == 0.0 or weight is not None or size_average is not None
            or reduce is not None or target.dtype.is_floating_point):
        return NotImplemented
    class_dim = 0 if input.dim() == 1 else 1
    log_probs = torch.log_softmax(input, class_dim)
    nll = torch.nn.functional.nll_loss(log_probs, target, ignore_index=ignore_index,
                                       reduction=reduction)
    counted = target != ignore_index
    smooth = (-log_probs.sum(class_dim)).masked_fill(~counted, 0.0)
    if reduction == "mean":
        smooth = smooth.sum() / counted.sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    return (1 - label_smoothing) * nll + smooth * (label_smoothing / input.shape[class_dim])


# Torch functions whose ATen forms depend on data, taken by Kiln's own forms.
_TORCH_FUNCTIONS = {
    torch.repeat_interleave: _repeat_interleave,
    torch.Tensor.repeat_interleave: _repeat_interleave,
    torch.nn.functional.one_hot: _one_hot,
    torch.nn.functional.embedding_bag: _embedding_bag,
    torch.nn.functional.cross_entropy: _cross_entropy,
}


class TracingMode(TorchFunctionMode):
    """Active while tracing.
      - In inference, nn.MultiheadAttention, TransformerEncoderLayer and
        TransformerEncoder (batch_first) take fast paths that run one fused
        op (_native_multi_head_attention, _transformer_encoder_layer_fwd,
        nested tensors) unless some argument "has a torch function", which
        an active mode makes so: make_fx then sees the ops their slow paths
        are made of, which Kiln compiles.
      - Torch functions in _TORCH_FUNCTIONS run Kiln's forms."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _TORCH_FUNCTIONS:
            result = _TORCH_FUNCTIONS[func](*args, **kwargs)
            if result is not NotImplemented:
                return result
        return func(*args, **kwargs)
