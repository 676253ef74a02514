"""The draws beyond uniform and normal that Kiln makes itself, each as
torch's CPU kernel makes it (aten/src/ATen/core/DistributionsHelper.h,
TransformationHelper.h): numbers drawn by a kiln_rng op from the threaded
generator state, in the order and width eager draws them, then eager's
transform of them as ordinary graph ops.

  bernoulli(p), p a tensor      one uniform of p's type (float32: 24 bits,
                                float64: 53) per value, then u < p
  bernoulli_(p), p a float      one float64 uniform per value, then u < p
                                (dropout, its 2-d, 3-d and alpha forms, and
                                attention's dropout draw this way)
  exponential_(lambd)           float64 u: -1 / lambd * log1p(-u)
  cauchy_(median, sigma)        float64 u: median + sigma * tan(pi * (u - 0.5))
  geometric_(p)                 float64 u: ceil(log(u) / log1p(-p))
  multinomial(p, n), without    exponential_(1) of p's shape, then the n
  replacement or n = 1          largest of p / q (argmax for n = 1)
  multinomial(p, n), with       one float64 u per sample, then the first
  replacement                   bucket of p's normalized running sum not
                                below u
  log_normal_(mean, std)        kiln_rng.serial_normal (normal_distribution
                                <double>, value by value), then exp
  randint, randint_like,        kiln_rng.integers: a 32-bit output (64 bits
  random_                       from a range of 2^28 on) modulo the range,
                                plus the low bound

Each transform runs in the type eager's runs in (float64, but for bernoulli
of a float32 p), and the result is cast to the tensor's dtype. bernoulli_(p) with a float p has another kernel in torch
builds that draw it through MKL (viRngBernoulli from one 32-bit seed, older
releases on Intel CPUs): scalar_bernoulli_drawn_as_default asks this torch
which one it runs, and where it is MKL's, that op stays with torch.
"""
import functools
import math
import operator

import torch
from torch.utils._python_dispatch import _disable_current_modes

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.float64)


@functools.lru_cache(maxsize=None)
def scalar_bernoulli_drawn_as_default():
    """Whether this torch draws bernoulli_(p) of a float p from its CPU
    generator, one float64 uniform per value (the kernel Kiln draws as).
    Asked of torch once: a draw from a generator of its own, against the
    uniform draw that kernel makes; MKL's kernel takes one 32-bit seed
    instead, so leaves another state. Real tensors, whatever mode is on."""
    with _disable_current_modes():
        drawn = torch.Generator().manual_seed(0)
        values = torch.empty(64).bernoulli_(0.5, generator=drawn)
        expected = torch.Generator().manual_seed(0)
        uniform = torch.empty(64, dtype=torch.float64).uniform_(generator=expected)
        return torch.equal(drawn.get_state(), expected.get_state()) and \
            torch.equal(values, (uniform < 0.5).float())


MKL_BERNOULLI = ("this torch draws bernoulli_ of a float p through MKL's generator on this CPU, "
                 "not torch's CPU generator that Kiln draws as")


# Eager's error for a tensor p outside [0, 1] (its check's own text).
BERNOULLI_P = ("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error "
               "message be improved?  If so, please report an enhancement request to PyTorch.)")


def _argument(node, position, name, default):
    if position < len(node.args):
        return node.args[position]
    return node.kwargs.get(name, default)


def _value(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _float_tensor(node):
    """Whether `node` is a contiguous float32 or float64 tensor of static sizes."""
    value = _value(node)
    return isinstance(value, torch.Tensor) and value.dtype in _FLOATS and \
        all(isinstance(size, int) for size in value.shape) and value.is_contiguous()


def _uniform(emit, shape, dtype):
    return emit.draw(torch.ops.kiln_rng.uniform.default, shape, dtype, dtype, 0.0, 1.0)


def _bernoulli_of_tensor(emit, node, shape, dtype):
    p = node.args[1] if node.target in (aten.bernoulli_.Tensor, aten.bernoulli.Tensor) \
        else node.args[0]
    p_shape = list(_value(p).shape)
    at_least_0 = emit.op(aten.ge.Scalar, (p, 0), p_shape, torch.bool)
    at_most_1 = emit.op(aten.le.Scalar, (p, 1), p_shape, torch.bool)
    emit.check(emit.op(aten.logical_and.default, (at_least_0, at_most_1), p_shape, torch.bool),
               "RuntimeError", BERNOULLI_P)
    uniform = _uniform(emit, shape, _value(p).dtype)
    return emit.cast(emit.op(aten.lt.Tensor, (uniform, p), shape, torch.bool), dtype)


def _bernoulli_of_float(emit, node, shape, dtype):
    p = float(_argument(node, 1, "p", 0.5))
    uniform = _uniform(emit, shape, torch.float64)
    return emit.cast(emit.op(aten.lt.Scalar, (uniform, p), shape, torch.bool), dtype)


def _exponential_of(emit, shape, lambd):
    uniform = _uniform(emit, shape, torch.float64)
    negated = emit.op(aten.neg.default, (uniform,), shape, torch.float64)
    logged = emit.op(aten.log1p.default, (negated,), shape, torch.float64)
    return emit.op(aten.mul.Tensor, (logged, -1.0 / lambd), shape, torch.float64)


def _exponential(emit, node, shape, dtype):
    return emit.cast(_exponential_of(emit, shape, float(_argument(node, 1, "lambd", 1.0))), dtype)


def _cauchy(emit, node, shape, dtype):
    median = float(_argument(node, 1, "median", 0.0))
    sigma = float(_argument(node, 2, "sigma", 1.0))
    uniform = _uniform(emit, shape, torch.float64)
    centered = emit.op(aten.sub.Tensor, (uniform, 0.5), shape, torch.float64)
    angle = emit.op(aten.mul.Tensor, (centered, math.pi), shape, torch.float64)
    tangent = emit.op(aten.tan.default, (angle,), shape, torch.float64)
    scaled = emit.op(aten.mul.Tensor, (tangent, sigma), shape, torch.float64)
    return emit.cast(emit.op(aten.add.Tensor, (scaled, median), shape, torch.float64), dtype)


def _geometric(emit, node, shape, dtype):
    p = float(_argument(node, 1, "p", None))
    uniform = _uniform(emit, shape, torch.float64)
    logged = emit.op(aten.log.default, (uniform,), shape, torch.float64)
    ratio = emit.op(aten.div.Tensor, (logged, math.log1p(-p)), shape, torch.float64)
    return emit.cast(emit.op(aten.ceil.default, (ratio,), shape, torch.float64), dtype)


def _log_normal(emit, node, shape, dtype):
    mean = float(_argument(node, 1, "mean", 1.0))
    std = float(_argument(node, 2, "std", 2.0))
    normal = emit.draw(torch.ops.kiln_rng.serial_normal.default, shape, torch.float64,
                       torch.float64, mean, std)
    return emit.cast(emit.op(aten.exp.default, (normal,), shape, torch.float64), dtype)


# uniform_int's range for random_() without bounds, by dtype (int32's takes
# a 32-bit output where the rule below would take 64 bits: not listed).
_RANDOM_RANGES = {torch.float32: (1 << 24) + 1, torch.float64: (1 << 53) + 1,
                  torch.int64: 1 << 63, torch.bool: 2}


def _integer_range(node, dtype):
    """(range, base) of torch's draw of (bits % range) + base for `node`;
    None for one Kiln does not draw. (make_fx cannot trace random_.from:
    its generated code names the overload `from`.)"""
    name = node.target._schema.name.split("::")[1].rstrip("_")
    overload = node.target._overloadname
    if name == "randint":
        low, high = (0, node.args[0]) if overload == "default" else node.args[:2]
    elif name == "randint_like":
        low, high = (0, node.args[1]) if overload == "default" else node.args[1:3]
    elif overload == "to":
        low, high = 0, node.args[1]
    else:
        return (_RANDOM_RANGES[dtype], 0) if dtype in _RANDOM_RANGES else None
    if not all(isinstance(bound, int) for bound in (low, high)) or not low < high:
        return None
    return high - low, low


def _integers(emit, node, shape, dtype):
    range_, base = _integer_range(node, dtype)
    bits = range_ - (1 << 64) if range_ >= 1 << 63 else range_  # the uint64's bits
    values = emit.draw(torch.ops.kiln_rng.integers.default, shape, torch.int64, bits)
    if base:
        values = emit.op(aten.add.Tensor, (values, base), shape, torch.int64)
    return emit.cast(values, dtype)


def _multinomial(emit, node, shape, dtype):
    """torch's multinomial without replacement: the n largest of p / q, q
    drawn as exponential_(1) of p's dtype (argmax for one sample)."""
    p, samples = node.args[0], int(node.args[1])
    p_shape, p_dtype = list(_value(p).shape), _value(p).dtype
    q = emit.cast(_exponential_of(emit, p_shape, 1.0), p_dtype)
    ratio = emit.op(aten.div.Tensor, (p, q), p_shape, p_dtype)
    if samples == 1:
        return emit.op(aten.argmax.default, (ratio, -1, True), shape, torch.int64)
    top = emit.op(aten.topk.default, (ratio, samples), None, None,
                  value=(torch.empty(shape, dtype=p_dtype), torch.empty(shape, dtype=torch.int64)))
    return emit.op(operator.getitem, (top, 1), shape, torch.int64)


def _multinomial_with_replacement(emit, node, shape, dtype):
    """torch's multinomial with replacement: each row's running sum in p's
    dtype divided by its total, then per sample one float64 uniform u and the
    index of the first bucket whose sum is not below u (the count of those
    below it; the last bucket, set to 1, never is)."""
    p, samples = node.args[0], int(node.args[1])
    p_shape, p_dtype = list(_value(p).shape), _value(p).dtype
    uniform = _uniform(emit, shape, torch.float64)
    categories = p_shape[-1]
    running = emit.op(aten.cumsum.default, (p, -1), p_shape, p_dtype)
    total = emit.op(aten.slice.Tensor, (running, -1, categories - 1, categories),
                    p_shape[:-1] + [1], p_dtype)
    normalized = emit.op(aten.div.Tensor, (running, total), p_shape, p_dtype)
    head_shape = p_shape[:-1] + [categories - 1]
    head = emit.cast(emit.op(aten.slice.Tensor, (normalized, -1, 0, categories - 1), head_shape,
                             p_dtype), torch.float64)
    rows = emit.op(aten.unsqueeze.default, (head, -2), p_shape[:-1] + [1, categories - 1],
                   torch.float64)
    columns = emit.op(aten.unsqueeze.default, (uniform, -1), shape + [1], torch.float64)
    below = emit.op(aten.lt.Tensor, (rows, columns), shape + [categories - 1], torch.bool)
    return emit.op(aten.sum.dim_IntList, (below, [-1]), shape, torch.int64)


def _multinomial_any(emit, node, shape, dtype):
    """multinomial, after eager's checks of p (each of its two kernels says
    it in words of its own)."""
    p, replacement = node.args[0], bool(_argument(node, 2, "replacement", False))
    p_shape, p_dtype = list(_value(p).shape), _value(p).dtype
    negative = emit.op(aten.lt.Scalar, (p, 0), p_shape, torch.bool)
    finite = emit.op(aten.logical_and.default,
                     (emit.op(aten.eq.Tensor, (p, p), p_shape, torch.bool),
                      emit.op(aten.lt.Scalar, (emit.op(aten.abs.default, (p,), p_shape, p_dtype),
                                               math.inf), p_shape, torch.bool)),
                     p_shape, torch.bool)
    if replacement and int(node.args[1]) > 1:
        emit.check(emit.op(aten.logical_not.default, (negative,), p_shape, torch.bool),
                   "RuntimeError", "invalid multinomial distribution (encountering probability "
                   "entry < 0)")
        emit.check(finite, "RuntimeError", "invalid multinomial distribution (encountering "
                   "probability entry = infinity or NaN)")
    else:
        emit.check(emit.op(aten.logical_and.default,
                           (finite, emit.op(aten.logical_not.default, (negative,), p_shape,
                                            torch.bool)), p_shape, torch.bool),
                   "RuntimeError", "probability tensor contains either `inf`, `nan` or element < 0")
    total = emit.op(aten.sum.dim_IntList, (p, [-1]), p_shape[:-1], p_dtype)
    emit.check(emit.op(aten.gt.Scalar, (total, 0), p_shape[:-1], torch.bool), "RuntimeError",
               "invalid multinomial distribution (sum of probabilities <= 0)")
    replacement = bool(_argument(node, 2, "replacement", False))
    if replacement and int(node.args[1]) > 1:
        return _multinomial_with_replacement(emit, node, shape, dtype)
    return _multinomial(emit, node, shape, dtype)


def _multinomial_native(node):
    return _float_tensor(node.args[0]) and _argument(node, 3, "generator", None) is None


def _positive_finite(position, name):
    def check(node):
        value = float(_argument(node, position, name, 1.0))
        return value > 0 and math.isfinite(value)
    return check


def _probability_below_one(node):
    return 0 < float(_argument(node, 1, "p", 0.5)) < 1


# aten op -> (its rewrite, whether Kiln draws that call: beyond the result
# being a float or bool tensor of static sizes from the default generator).
REWRITES = {
    aten.bernoulli.default: (_bernoulli_of_tensor, lambda node: _float_tensor(node.args[0])),
    aten.bernoulli.Tensor: (_bernoulli_of_tensor, lambda node: _float_tensor(node.args[1])),
    aten.bernoulli_.Tensor: (_bernoulli_of_tensor, lambda node: _float_tensor(node.args[1])),
    aten.bernoulli.p: (_bernoulli_of_float, lambda node: scalar_bernoulli_drawn_as_default()),
    aten.bernoulli_.float: (_bernoulli_of_float, lambda node: scalar_bernoulli_drawn_as_default()),
    aten.exponential.default: (_exponential, _positive_finite(1, "lambd")),
    aten.exponential_.default: (_exponential, _positive_finite(1, "lambd")),
    aten.cauchy.default: (_cauchy, lambda node: True),
    aten.cauchy_.default: (_cauchy, lambda node: True),
    aten.geometric.default: (_geometric, _probability_below_one),
    aten.geometric_.default: (_geometric, _probability_below_one),
    aten.multinomial.default: (_multinomial_any, _multinomial_native),
    aten.log_normal.default: (_log_normal, _positive_finite(2, "std")),
    aten.log_normal_.default: (_log_normal, _positive_finite(2, "std")),
}
_INTEGER_DRAWS = (aten.randint.default, aten.randint.low, aten.randint_like.default,
                  aten.randint_like.low_dtype, aten.random.default, aten.random_.default,
                  aten.random.to, aten.random_.to)
REWRITES.update({op: (_integers, lambda node: _integer_range(node, _value(node).dtype)
                      is not None) for op in _INTEGER_DRAWS})
_BOOL_RESULT = (aten.bernoulli.default, aten.bernoulli.Tensor, aten.bernoulli_.Tensor,
                aten.bernoulli.p, aten.bernoulli_.float)


def native(node):
    """Whether Kiln draws `node`'s numbers itself (one of REWRITES'), and
    when not for a reason of its own, that reason (else None)."""
    if node.target not in REWRITES:
        return False
    value = _value(node)
    dtypes = _FLOATS + ((torch.bool, torch.int64) if node.target in _BOOL_RESULT else ()) + \
        ((torch.int64,) if node.target == aten.multinomial.default else ()) + \
        ((torch.int64, torch.int32, torch.bool) if node.target in _INTEGER_DRAWS else ())
    if not (isinstance(value, torch.Tensor) and value.dtype in dtypes and
            all(isinstance(size, int) for size in value.shape) and
            node.kwargs.get("generator") is None):
        return False
    return REWRITES[node.target][1](node)


def declined():
    """{op name: why it stays with torch} for the draws Kiln makes on other
    torch builds but not on this one (functionalize's name and the in-place
    one)."""
    if scalar_bernoulli_drawn_as_default():
        return {}
    return {"aten.bernoulli.p": MKL_BERNOULLI, "aten.bernoulli_.float": MKL_BERNOULLI}


def rewrite(emit, node):
    """The node of `node`'s values, made by `emit` (_random's emitter)."""
    value = _value(node)
    return REWRITES[node.target][0](emit, node, list(value.shape), value.dtype)
