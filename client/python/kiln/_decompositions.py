"""What the tracer (kiln._tracing) does so that PyTorch programs trace into
ops Kiln's op table has (docs/PYTHON.md, "What the tracer does"):

  - DECOMPOSITIONS, make_fx's decomposition table: torch's own
    (core_aten_decompositions, and a few of its full table) for every op
    Kiln lacks, never for an op Kiln lowers (KILN_OPS); then Kiln's forms
    (_decompositions_indexing, _decompositions_math, _decompositions_nn)
    where torch has none, or where torch's is wrong for Kiln or grows the
    graph, each entry saying which;
  - TracingMode, active while tracing: PyTorch's fused inference fast paths
    turned off, and torch functions whose ATen forms depend on data
    (repeat_interleave, one_hot) run as Kiln's forms.

Each form computes what eager does; kiln_test checks every one against it.
"""
import torch
import torch.nn.modules.linear_cross_entropy  # noqa: F401 (defines the torch_nn ops below)
from torch._decomp import core_aten_decompositions, get_decompositions
from torch.overrides import TorchFunctionMode

from ._decompositions_indexing import (_cumulative_extreme, _histc, _in_place, _index, _index_add,
                                       _index_put, _logcumsumexp, _searchsorted, _slice_scatter,
                                       _take)
from ._decompositions_math import (_all, _any, _cdist, _clamp_tensor, _eye,
                                   _hamming_window, _hypot, _pdist, _pow_scalar, _resize_,
                                   _round_decimals, _signbit, _trilinear, _unravel_index)
from ._decompositions_nn import (_adaptive_avg_pool3d, _adaptive_max_pool, _avg_pool3d, _col2im,
                                 _convolution_backward, _convolution_without_flags,
                                 _embedding_bags_by_offsets, _flash_attention_for_cpu,
                                 _linear_cross_entropy_chunked,
                                 _linear_cross_entropy_chunked_none, _max_pool3d_with_indices,
                                 _native_multi_head_attention, _nll_loss2d_backward,
                                 _nll_loss2d_forward, _nll_loss_backward, _nll_loss_forward,
                                 _pad, _reflection_pad, _rrelu_with_noise, _shrink_backward,
                                 _transformer_encoder_layer_fwd)
from ._decompositions_stats import _corrcoef, _cov, _gaussian_nll_loss
from . import _linalg
from ._errors import TraceError, decline
from ._op_forms import DECOMPOSITIONS as _OP_FORMS, _embedding_renorm


aten = torch.ops.aten


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
# Single-query attention (codegen/ops/attention.cc); its decomposition
# below takes the other cases (PARTIAL).
KILN_OPS |= {"aten._scaled_dot_product_flash_attention_for_cpu.default"}
# Ops Kiln lowers in some cases only: their entry in DECOMPOSITIONS returns
# NotImplemented for those, so that make_fx keeps the op.
PARTIAL = frozenset(["aten._scaled_dot_product_flash_attention_for_cpu.default",
                     "aten.index_add.default", "aten.index_add_.default"])
# Linear algebra through LAPACK (codegen/ops/linalg.cc).
KILN_OPS |= frozenset(f"aten.{name}" for name in """
    _linalg_det.default _linalg_slogdet.default _linalg_solve_ex.default
    cholesky_inverse.default
    cholesky_solve.default linalg_cholesky_ex.default linalg_inv_ex.default linalg_lu.default
    linalg_lu_factor_ex.default linalg_lu_solve.default linalg_solve_triangular.default
    triangular_solve.default
    _linalg_svd.default _linalg_eigh.default _linalg_check_errors.default
""".split())
# Householder QR and least squares through LAPACK (codegen/ops/qr.cc, lstsq.cc).
KILN_OPS |= frozenset(f"aten.{name}" for name in """
    geqrf.default linalg_householder_product.default linalg_lstsq.default linalg_qr.default
    ormqr.default
""".split())
# The matrix exponential, LDL^T and the general eigendecomposition through
# the runtime (codegen/ops/matrix_exp.cc, ldl.cc, eig.cc).
KILN_OPS |= {f"aten.{name}" for name in """
    linalg_matrix_exp.default linalg_ldl_factor_ex.default linalg_ldl_solve.default
    linalg_eig.default
""".split()}
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

# Single ops: IEEE bit operations, gcd and lcm, full max and min, addbmm,
# empty_strided (codegen/ops/ieee.cc, integers.cc, reductions.cc, gemm.cc,
# creation.cc).
KILN_OPS |= frozenset(f"aten.{name}" for name in """
    addbmm.default copysign.Scalar copysign.Tensor empty_permuted.default empty_strided.default
    frexp.Tensor gcd.default lcm.default max.default min.default nextafter.default
""".split())

# Fractional max pooling (codegen/ops/fractional_max_pool.cc).
KILN_OPS |= {"aten.fractional_max_pool2d.default", "aten.fractional_max_pool3d.default"}


def _torchs(table):
    """The entries of torch's decomposition `table` for ops Kiln lacks,
    but for those that draw random numbers: they stay whole and run through
    torch, drawing from its generator as eager does (bernoulli's decomposition
    draws uniforms instead)."""
    def lacks(op):
        namespace, name, overload = str(op).split(".")
        return f"{namespace}.{name.rstrip('_')}.{overload}" not in KILN_OPS
    return {op: fn for op, fn in table.items()
            if lacks(op) and torch.Tag.nondeterministic_seeded not in op.tags}


# Ops core ATen keeps and Kiln lacks, which torch's full table decomposes.
_BEYOND_CORE = [
    aten.addmv, aten.bucketize, aten.constant_pad_nd, aten._batch_norm_with_update,
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
    aten.linalg_polar.default: _linalg.polar,
    aten.linalg_matrix_sqrth.default: _linalg.matrix_sqrth,
    aten.lu_unpack.default: _linalg.lu_unpack,
    # torch has none: a tensor bound is a maximum or a minimum (as eager, a
    # NaN bound gives NaN).
    aten.clamp_min.Tensor: lambda x, min: _clamp_tensor(x, min=min),
    aten.clamp_min_.Tensor: _in_place(lambda x, min: _clamp_tensor(x, min=min)),
    aten.clamp_max.Tensor: lambda x, max: _clamp_tensor(x, max=max),
    aten.clamp_max_.Tensor: _in_place(lambda x, max: _clamp_tensor(x, max=max)),
    # Kiln's index_add takes vectors and up: a 0-dim one as a vector (PARTIAL).
    aten.index_add.default: _index_add,
    aten.index_add_.default: _in_place(_index_add),
    # F.linear_cross_entropy's chunking saves memory in eager; a graph takes
    # the loss whole.
    torch.ops.torch_nn._linear_cross_entropy_batch_chunked.default:
        _linear_cross_entropy_chunked,
    torch.ops.torch_nn._linear_cross_entropy_batch_chunked_no_reduction.default:
        _linear_cross_entropy_chunked_none,
    **_OP_FORMS,
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
    bags' offsets as a tensor (1-D input with offsets:
    _embedding_bags_by_offsets). Entries equal to padding_idx take no part (a
    bag of padding alone gives zeros, as eager). A max over a NaN is NaN
    (eager's running max keeps a NaN only when it comes first)."""
    if (per_sample_weights is not None and mode != "sum") or input.dim() not in (1, 2) \
            or (offsets is None) != (input.dim() == 2) or (include_last_offset and offsets is None):
        return NotImplemented  # eager's error
    if max_norm is not None:  # the rows read renormalized in place first, as eager
        with torch.no_grad():
            weight.copy_(_embedding_renorm(weight, input, max_norm, norm_type))
    if offsets is not None:
        return _embedding_bags_by_offsets(input, weight, offsets, mode, per_sample_weights,
                                          padding_idx, include_last_offset)
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


def _resize_as_(x, other, *, memory_format=None):
    return _resize_(x, other.shape, memory_format=memory_format)


# Torch functions whose ATen forms depend on data, taken by Kiln's own forms.
_TORCH_FUNCTIONS = {
    torch.repeat_interleave: _repeat_interleave,
    torch.Tensor.repeat_interleave: _repeat_interleave,
    torch.nn.functional.one_hot: _one_hot,
    torch.nn.functional.embedding_bag: _embedding_bag,
    torch.nn.functional.cross_entropy: _cross_entropy,
    torch.unravel_index: _unravel_index,
    torch.nn.functional.pad: _pad,
    torch.Tensor.resize_: _resize_,
    torch.Tensor.resize_as_: _resize_as_,
    torch.resize_as_: _resize_as_,
    # ATen's read the degrees of freedom and the weights' checks back from tensors.
    torch.cov: _cov,
    torch.Tensor.cov: _cov,
    torch.corrcoef: _corrcoef,
    torch.Tensor.corrcoef: _corrcoef,
    torch.nn.functional.gaussian_nll_loss: _gaussian_nll_loss,  # torch's checks var's values
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
