"""Single-query attention (codegen/ops/attention.cc): F.scaled_dot_product_
attention with one query per head, without a mask, with a boolean prefix
mask (which eager turns into 0 / -inf), a mask of a position tensor (which
kilnd reads as the kernel's bound, kiln.attention_to_length), an additive
float mask, every key masked in one row (zeros, as eager), keys and values
laid out [batch, keys, heads, width] (a paged cache's gather) and a scale of
its own."""
import torch
import torch.nn.functional as F

from cases_common import Case, claimed, generator, random

OP = "aten._scaled_dot_product_flash_attention_for_cpu.default"
# Sums of 64 products and softmaxes over up to 300 keys in another order.
TOLERANCE = (1e-5, 1e-6)


def cases(claims):
    for dtype in claimed(claims, OP):
        g = generator(OP, "attention")
        q, k, v = (random(shape, dtype, g, scale=1.0)
                   for shape in ((2, 3, 1, 16), (2, 3, 300, 16), (2, 3, 300, 16)))
        prefix = (torch.arange(300) <= torch.tensor([[5], [299]])).view(2, 1, 1, 300)
        masked = prefix.clone()
        masked[0] = False  # every key of batch 0's rows
        additive = random((1, 3, 1, 300), dtype, g, scale=1.0)
        yield Case(OP, dtype, "no_mask", lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
                   [q, k, v], tolerance=TOLERANCE)
        yield Case(OP, dtype, "prefix_mask",
                   lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                   [q, k, v, prefix], tolerance=TOLERANCE)
        yield Case(OP, dtype, "position_mask",
                   lambda q, k, v, p: F.scaled_dot_product_attention(
                       q, k, v, attn_mask=(torch.arange(300) <= p).view(2, 1, 1, 300)),
                   [q, k, v, torch.tensor([[5], [299]])], tolerance=TOLERANCE)
        yield Case(OP, dtype, "fully_masked_row",
                   lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                   [q, k, v, masked], tolerance=TOLERANCE)
        yield Case(OP, dtype, "additive_mask_and_scale",
                   lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m,
                                                                     scale=0.3),
                   [q, k, v, additive], tolerance=TOLERANCE)
        yield Case(OP, dtype, "paged_layout",
                   lambda q, k, v: F.scaled_dot_product_attention(
                       q, k.transpose(1, 2), v.transpose(1, 2)),
                   [q, k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()],
                   tolerance=TOLERANCE)
