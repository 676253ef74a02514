"""Eager references for traced graphs (a kiln.v1.Reference in protobuf JSON:
the inputs traced with and eager PyTorch's outputs, each with its strides
when it is not contiguous), for tools/trace/kiln_trace.py's graph files.
"""
import base64

import torch

from ._functionalize import functionalize, lift_constants
from ._graph import DTYPES
from ._tracing import _trace_graph, flatten_outputs, trace_fx


def tensor_data(t):
    """TensorData JSON: the values row-major, and the strides the tensor has
    when it is not contiguous (a transpose, a slice, an expand)."""
    strides = None if t.is_contiguous() else [int(s) for s in t.stride()]
    t = t.detach().resolve_conj().contiguous()
    if t.dtype == torch.bfloat16:
        raw = t.view(torch.int16).numpy().tobytes()
    else:
        raw = t.numpy().tobytes()
    result = {"dtype": DTYPES[t.dtype], "sizes": [int(s) for s in t.shape],
              "data": base64.b64encode(raw).decode()}
    if strides is not None:
        result["strides"] = strides
    return result


def trace(fn, inputs, name, symbolic=None, weights_seed=None, relations=None,
          eager_bfloat16=False):
    """(kiln.v1.Graph, reference JSON) for fn(*inputs): trace_graph, and eager
    PyTorch's outputs on the inputs and lifted weights. With `weights_seed`,
    the lifted weights are replaced by other random values of the same
    shapes. `symbolic` lists (input name, dim[, symbol]) to make symbolic
    (mark_symbolic); `relations` (kiln.v1.SymbolRelation) go into the graph as
    they are. With `eager_bfloat16`, bfloat16 references are eager's own
    bfloat16 kernels (one op's semantics, for the op suite) instead of
    float32 math."""
    graph, lifted, gm, _, _ = _trace_graph(fn, inputs, name, symbolic, relations, weights_seed)
    all_inputs = list(inputs) + lifted
    low = next((t.dtype for t in inputs if t.dtype in (torch.float16, torch.bfloat16)), None)
    if low == torch.bfloat16 and eager_bfloat16:
        low = None
    if low is not None:
        # The reference is float32 math on the same values, rounded back,
        # as Kiln computes half-precision ops: eager's half-precision CPU
        # kernels round some intermediate results to the input's dtype.
        as_float = [t.float() if t.dtype == low else t for t in all_inputs]
        outputs = _as_list(gm(*as_float))
        if low == torch.bfloat16:  # its kernels exist: they say each output's dtype
            dtypes = [o.dtype for o in _as_list(gm(*all_inputs))]
        else:
            dtypes = [low if o.dtype == torch.float32 else o.dtype for o in outputs]
        outputs = [o.to(dtype) for o, dtype in zip(outputs, dtypes)]
    else:
        outputs = _as_list(gm(*all_inputs))
    with open("/proc/self/maps") as maps:
        blas = next((line.split()[-1] for line in maps if "libblas" in line), "none")
    reference = {"inputs": [tensor_data(t) for t in all_inputs],
                 "outputs": [tensor_data(o) for o in outputs],
                 "provenance": f"torch {torch.__version__}, blas {blas}"
                               + (f", {str(low).replace('torch.', '')} reference from float32 math"
                                  if low is not None else "")}
    return graph, reference


def _as_list(outputs):
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def sized_references(fn, inputs, symbolic, sizes, name):
    """{size: reference JSON} with every symbolic dim resized to `size`:
    fresh random inputs (seeded), the traced weights, eager's outputs."""
    gm, _ = trace_fx(fn, inputs)
    functionalize(gm)
    lifted = lift_constants(gm)
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    generator = torch.Generator().manual_seed(1)
    result = {}
    for size in sizes:
        resized = []
        for position, tensor in enumerate(inputs):
            shape = list(tensor.shape)
            for input_name, dim, *_ in symbolic:
                if names[position] in (input_name, input_name + "_1"):
                    shape[dim] = size
            if list(tensor.shape) == shape:
                resized.append(tensor)
            elif tensor.is_floating_point():
                resized.append(torch.randn(shape, generator=generator).to(tensor.dtype)
                               .requires_grad_(tensor.requires_grad))
            else:
                resized.append(torch.zeros(shape, dtype=tensor.dtype))
        outputs, _ = flatten_outputs(fn(*resized))
        result[size] = {"inputs": [tensor_data(t) for t in resized + lifted],
                        "outputs": [tensor_data(o) for o in outputs],
                        "provenance": f"torch {torch.__version__}, {name} at size {size}"}
    return result
