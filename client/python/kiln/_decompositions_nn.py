"""Kiln's forms of losses, convolutions, pooling, padding and attention, for
the tracer's decomposition table (_decompositions.DECOMPOSITIONS)."""
import math

import torch
import torch.nn.functional as F
from torch import _prims_common
from torch._decomp import decomposition_table

from ._errors import TraceError, decline

aten = torch.ops.aten


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
        count = (span + (step[d] - 1 if ceil_mode else 0)) // step[d] + 1
        if ceil_mode and (count - 1) * step[d] >= size + pad[d]:
            count -= 1  # eager's: the last window starts in the input or its left padding
        for o in range(max(count, 0)):
            if all(not 0 <= o * step[d] - pad[d] + k * spread[d] < size
                   for k in range(kernel[d])):
                return decline(aten.max_pool3d_with_indices.default,
                               f"max_pool3d: window {o} of dim {d - 3} lies wholly in the "
                               f"padding (kernel {kernel}, stride {step}, padding {pad}, "
                               f"dilation {spread})")
    torchs = decomposition_table[aten.max_pool3d_with_indices.default]
    return torchs(x, kernel_size, stride, padding, dilation, ceil_mode)


def _reflection_pad(x, padding):
    """torch's reflection_padNd, refusing a side as large as its dim, as
    eager does (torch's reads out of range there)."""
    for i in range(len(padding) // 2):
        dim, (left, right) = x.dim() - 1 - i, padding[2 * i:2 * i + 2]
        if max(left, right) >= x.shape[dim]:
            raise TraceError(f"reflection padding ({left}, {right}) of dim {dim}: each side "
                             f"must be smaller than its size {x.shape[dim]}")
    return decomposition_table[aten.reflection_pad1d.default](x, padding)  # any rank


def _pad(input, pad, mode="constant", value=None):
    """F.pad in circular mode as slices and a cat per padded dim: each side
    wraps the other end of the dim, a negative side crops it first, as
    eager (ATen's form writes into slices of an empty tensor, which
    functionalize leaves in place). Other modes: ATen's forms."""
    dims = len(pad) // 2
    if mode != "circular" or len(pad) % 2 or input.dim() not in (dims + 1, dims + 2):
        return NotImplemented
    x = input
    for i in range(dims):
        dim, (left, right) = x.dim() - 1 - i, pad[2 * i:2 * i + 2]
        start, stop = max(-left, 0), x.shape[dim] - max(-right, 0)
        if stop - start < max(left, right, 0):  # also a crop past the other side
            return NotImplemented  # eager's error: a side wraps more than once
        x = x.narrow(dim, start, stop - start)
        parts = [x.narrow(dim, x.shape[dim] - left, left)] if left > 0 else []
        parts += [x] + ([x.narrow(dim, 0, right)] if right > 0 else [])
        x = torch.cat(parts, dim) if len(parts) > 1 else x.clone()
    return x


def _embedding_bags_by_offsets(input, weight, offsets, mode, per_sample_weights, padding_idx,
                               include_last_offset):
    """F.embedding_bag of 1-D indices in bags that start at `offsets` (the
    last bag runs to the end, or to the last offset with
    include_last_offset): each position's bag is the count of offsets at or
    below it, less one, and the rows are added (index_add), counted for the
    mean, or their largest kept (scatter_reduce) per bag. Entries equal to
    padding_idx take no part; an empty bag gives zeros, as eager."""
    count, bags = input.shape[0], offsets.shape[0] - (1 if include_last_offset else 0)
    bag = torch.searchsorted(offsets, torch.arange(count), right=True) - 1
    keep = (bag >= 0) & (bag < bags)
    if padding_idx is not None:
        keep = keep & (input != padding_idx % weight.shape[0])
    bag = torch.where(keep, bag, bags)  # a bag past the last gathers the rest, and is dropped
    rows = F.embedding(input, weight)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(-1)
    sizes = torch.zeros(bags + 1, dtype=weight.dtype).index_add(
        0, bag, torch.ones(count, dtype=weight.dtype))[:bags].unsqueeze(1)
    if mode == "max":
        start = torch.full((bags + 1, weight.shape[1]), float("-inf"), dtype=weight.dtype)
        largest = start.scatter_reduce(0, bag.unsqueeze(1).expand(rows.shape), rows, "amax")
        return largest[:bags].masked_fill(sizes == 0, 0.0)
    sums = torch.zeros(bags + 1, weight.shape[1], dtype=weight.dtype).index_add(0, bag, rows)
    return sums[:bags] if mode == "sum" else sums[:bags] / sizes.clamp(min=1)


def _linear_cross_entropy_chunked(input, linear_weight, target, linear_bias, weight, reduction,
                                   ignore_index, label_smoothing, batch_chunk_size, acc_policy,
                                   acc_dtype, allow_retain_graph, compute_input_grad,
                                   compute_linear_weight_grad, compute_linear_bias_grad):
    """F.linear_cross_entropy's batch-chunked op (mean or sum) as linear
    then cross_entropy whole, its gradients (which it computes alongside
    the loss for training) empty where none is asked for; one that asks
    keeps the op whole."""
    if compute_input_grad or compute_linear_weight_grad or compute_linear_bias_grad:
        return NotImplemented
    loss = F.cross_entropy(F.linear(input, linear_weight, linear_bias), target, weight,
                           ignore_index=ignore_index, reduction=reduction,
                           label_smoothing=label_smoothing)
    return (loss, input.new_empty((0, 0)), input.new_empty((0, 0)), input.new_empty((0,)))


def _linear_cross_entropy_chunked_none(input, linear_weight, target, linear_bias, weight,
                                       ignore_index, batch_chunk_size, acc_policy, acc_dtype):
    """The batch-chunked op of reduction 'none': linear then cross_entropy."""
    return F.cross_entropy(F.linear(input, linear_weight, linear_bias), target, weight,
                           ignore_index=ignore_index, reduction="none")


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


def _single_query(query, key, value, dropout_p, is_causal, attn_mask):
    """Whether Kiln lowers this attention natively (codegen/ops/attention.cc):
    one query per head (a decoding step), float32, equal heads, no dropout,
    not causal, values at most 1,024 wide."""
    return (query.dim() == 4 and query.size(2) == 1 and query.size(1) == key.size(1)
            and value.size(-1) <= 1024 and not dropout_p and not is_causal
            and query.dtype == key.dtype == value.dtype == torch.float32
            and (attn_mask is None or attn_mask.dtype == torch.float32))


def _flash_attention_for_cpu(query, key, value, dropout_p=0.0, is_causal=False, *,
                             attn_mask=None, scale=None):
    """What nn.MultiheadAttention and F.scaled_dot_product_attention call on
    the CPU, as torch's math form, its output laid out as the kernel lays it
    out: as query is (empty_like). torch's own decomposition lays it out as
    (L, N, H, E), query's layout in nn.MultiheadAttention; with another
    layout a view that the kernel's output allows fails (torch.export keeps a
    program's .contiguous() only where the kernel's output needed it). The
    second result is the kernel's: the logsumexp of each query's scaled,
    masked scores, (N, H, L). A single query stays the op Kiln lowers."""
    if _single_query(query, key, value, dropout_p, is_causal, attn_mask):
        return NotImplemented
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
