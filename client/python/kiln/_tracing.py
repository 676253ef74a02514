"""Traces a PyTorch function or nn.Module with make_fx into Kiln graph JSON
(a kiln.v1.Graph in protobuf JSON), and computes eager references (a
kiln.v1.Reference: the inputs traced with and eager PyTorch's outputs, each
with its strides when it is not contiguous; a static input's strides are in
the graph too, where its guards check them).

Used in process by kiln.compile (trace_graph) and by the command line
tools/trace/kiln_trace.py (trace, sized_references), whose genrules trace the
public workloads at build time. Graphs Kiln cannot take raise TraceError,
whose message names the node.

What it does to make_fx's graph:
  - weights and buffers (get_attr constants) become graph inputs after the
    function's own inputs, so two models with the same architecture and
    different weights share one artifact;
  - PyTorch's fused inference fast paths (batch_first attention) are not
    taken, and ops Kiln lacks are decomposed (DECOMPOSITIONS: indexing,
    padding, scatters of slices, roll, interpolation);
  - torch.compiler.is_compiling() is true while the function runs, as
    under torch.compile, so libraries leave out what reads tensor values;
  - the function's result may be tensors in tuples, lists and dicts: the
    graph's outputs are its tensors in order (flatten_outputs);
  - in-place ops (relu_, add_) are replaced by their out-of-place forms,
    and a graph that writes into a view is traced again through torch.func's
    functionalize; an input changed in place (an argument, a buffer, a
    tensor the function holds) is refused, or for kiln.compile (trace_graph)
    its final value is an extra output, copied into it after each call;
  - dead nodes (detach, empty, unused results) are dropped;
  - the results a backward op's output_mask drops (None) are declared with
    the types the op gives them when computed: Kiln computes every result
    of these ops, and nothing reads the dropped ones;
  - a batch norm in training mode (native_batch_norm, training=True) given
    running statistics: for kiln.compile their updates are computed and
    copied back like any input changed in place; else it compiles as a pure
    function (batch statistics, running ones never updated) and the trace
    warns (RuntimeWarning), and an nn.BatchNorm module in training mode,
    which also counts num_batches_tracked in place, is refused with what to
    do instead;
  - --symbolic NAME:DIM,... (`symbolic`: [(NAME, DIM[, SYMBOL])]) marks
    input dims symbolic: the function is traced again with each symbol one
    larger; view and factory sizes (ones(T, T)) and whole-number scalars
    (arange(T)'s end) that moved become symbolic, and any other traced size
    baked into an argument is refused, naming the node and the argument;
  - --relation "s0 % 8 == 0" (also "2 <= s0 <= 512", "s0 <= 512",
    "s0 >= 16", "a == b"; parse_relation reads them into `relations`) adds
    what the symbolic sizes promise to the graph.
Runs on the pinned torch 2.15 in the checkout's .venv.
"""
import base64
import contextlib
import dataclasses
import functools
import inspect
import itertools
import linecache
import math
import operator
import os
import traceback
import warnings

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from ._decompositions import DECOMPOSITIONS, TraceError, TracingMode  # noqa: F401 (TraceError)

aten = torch.ops.aten

DTYPES = {
    torch.float32: "FLOAT32", torch.float64: "FLOAT64", torch.float16: "FLOAT16",
    torch.bfloat16: "BFLOAT16", torch.int64: "INT64", torch.int32: "INT32", torch.bool: "BOOL",
    torch.int8: "INT8", torch.uint8: "UINT8", torch.int16: "INT16",
    torch.complex64: "COMPLEX64", torch.complex128: "COMPLEX128",
}
# Arguments that never change what Kiln computes on the CPU.
IGNORED_ARGS = {"layout", "device", "pin_memory", "memory_format", "non_blocking"}


def _is_view(node):
    """Whether node's result aliases its first argument (slice, view, ...)."""
    schema = getattr(node.target, "_schema", None)
    alias = schema.returns[0].alias_info if schema is not None and schema.returns else None
    return alias is not None and not alias.is_write


def _value_type(gm, node):
    """(sizes, dtype) of a make_fx graph node's value."""
    if node.op == "get_attr":
        value = getattr(gm, node.target)
        return list(value.shape), value.dtype
    meta = node.meta["tensor_meta"]
    return list(meta.shape), meta.dtype


def _is_in_place(node):
    schema = getattr(node.target, "_schema", None)
    return schema is not None and schema.name.endswith("_") and bool(node.args)


def _drop_whole_slices(gm):
    """Replaces slices that keep every element by what they slice: x[:]
    (to the end at any size), and ones that keep every element at the
    traced size and are written in place (x[:, i] = v takes x[:] first),
    so writing into one is writing into its base. (Others stay: x[:, :16]
    keeps every element only at the traced size.)"""
    for node in list(gm.graph.nodes):
        if node.target is not aten.slice.Tensor:
            continue
        base, dim, start, end, step = (list(node.args)
                                       + [0, None, None, 1][len(node.args) - 1:])[:5]
        if (start or 0) != 0 or step != 1:
            continue
        written = any(_is_in_place(user) and user.args[0] is node for user in node.users)
        if end is None or end >= 2**62 or (written and end >= _value_type(gm, base)[0][dim]):
            node.replace_all_uses_with(base)
            gm.graph.erase_node(node)


def _needs_functionalize(graph):
    """The first in-place op functionalize() below cannot rewire (one that
    writes into a view or into a tensor viewed elsewhere), or None."""
    for node in graph.nodes:
        if not _is_in_place(node):
            continue
        mutated = node.args[0]
        if _is_view(mutated) or any(_is_view(user) for user in mutated.users if user is not node):
            return node
    return None


def _write_into_made_view(graph):
    """The first in-place op that writes into a view of a tensor the graph
    makes (not of an input), or None."""
    for node in graph.nodes:
        if not _is_in_place(node) or not _is_view(node.args[0]):
            continue
        base = node.args[0]
        while _is_view(base):
            base = base.args[0]
        if base.op not in ("placeholder", "get_attr"):
            return node
    return None


def flatten_outputs(value):
    """(tensors, structure) of what a function returns: its tensors in order,
    and the JSON that kiln.unflatten rebuilds the result from
    ("tensor"; {"tuple" | "list": [...]}; {"dict": [[key, ...], ...]};
    {"value": None, a number or a string}). A tuple, list or dict of
    another type, and a dataclass (as a dict of its fields), add "type"."""
    if isinstance(value, torch.Tensor):
        return [value], "tensor"
    if isinstance(value, (tuple, list)):
        parts = [flatten_outputs(v) for v in value]
        kind = "list" if isinstance(value, list) else "tuple"
        structure = {kind: [part for _, part in parts]}
        tensors = [t for tensors, _ in parts for t in tensors]
    elif isinstance(value, dict) and all(isinstance(key, (str, int)) for key in value):
        parts = [(key, flatten_outputs(v)) for key, v in value.items()]
        structure = {"dict": [[key, part] for key, (_, part) in parts]}
        tensors = [t for _, (tensors, _) in parts for t in tensors]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        tensors, structure = flatten_outputs({field.name: getattr(value, field.name)
                                              for field in dataclasses.fields(value)
                                              if field.init})
    elif value is None or isinstance(value, (bool, int, float, str)):
        return [], {"value": value}
    else:
        raise TraceError(f"the function returns a {type(value).__name__}: Kiln takes results that "
                         f"are tensors, or tuples, lists, dicts (str or int keys) and dataclasses "
                         f"of them")
    if type(value) not in (tuple, list, dict):
        from . import _type_name
        structure["type"] = _type_name(type(value))
    return tensors, structure


def _takes_exactly(fn, count):
    """Whether fn's parameters are `count` positional ones (make_fx names
    placeholders after them, and needs every one given)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return len(parameters) == count and all(p.kind in positional for p in parameters)


def _storage_pointer(t):
    """Where t's memory starts (its views share it)."""
    return t.untyped_storage().data_ptr()


def _where_in_user_code(error):
    """'file:line in function (the line)' of the innermost frame of
    `error`'s traceback outside torch and Kiln: the model's line that did
    it, or that called a torch function that did."""
    library = os.path.dirname(torch.__file__) + os.sep
    kiln = os.path.dirname(os.path.abspath(__file__)) + os.sep
    where = "the function"
    for frame, line in traceback.walk_tb(error.__traceback__):
        path = frame.f_code.co_filename
        if not path.startswith((library, kiln, "<")):
            code = linecache.getline(path, line).strip()
            where = f"{os.path.basename(path)}:{line} in {frame.f_code.co_name}" + (
                f" ({code[:80]})" if code else "")
    return where


def _make_fx(fn, inputs, tracing_mode):
    """make_fx(fn)(*inputs) with Kiln's decompositions; a function that
    reads a tensor's value raises TraceError naming its line."""
    try:
        return make_fx(fn, decomposition_table=DECOMPOSITIONS,
                       tracing_mode=tracing_mode)(*inputs)
    except RuntimeError as error:
        if "get value out of a tracing tensor" not in str(error):
            raise
        raise TraceError(
            f"{_where_in_user_code(error)} reads a tensor's value while tracing (.item(), "
            f"int(t), an if on a tensor, a size taken from data): a Kiln graph's work follows "
            f"its inputs' shapes, not their values. Take the size from a shape (x.size(1)) "
            f"instead, or compile with fallback=\"eager\"") from error


@contextlib.contextmanager
def _without_fused_paths():
    """torch 2.x's fused CPU paths off, so that what they fuse traces as the
    ops it is made of: oneDNN's (recurrent nets would call mkldnn_rnn_layer)
    and nn.TransformerEncoder's and nn.MultiheadAttention's inference fast
    paths (nested tensors), which TracingMode alone no longer turns off.
    (torch.backends.mkldnn.flags would also set TF32 flags, and warn.)"""
    mha = torch.backends.mha
    onednn, fast_path = torch._C._get_mkldnn_enabled(), mha.get_fastpath_enabled()
    torch._C._set_mkldnn_enabled(False)
    mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(onednn)
        mha.set_fastpath_enabled(fast_path)


def _compiling():
    """torch.compiler.is_compiling() true, as under torch.compile and
    torch.export: libraries check it to leave out what reads a tensor's
    value (transformers' shortcuts for masks that hide nothing)."""
    return torch.compiler._compile_session_context()


class FunctionalizeError(TraceError):
    """A write into a view that torch.func's functionalize cannot follow (it
    follows writes into its inputs' views only, not into a module's
    buffer)."""


def trace_fx(fn, inputs, *, tracing_mode="real"):
    """(make_fx's graph module of fn(*inputs) returning the list of fn's
    output tensors, flatten_outputs' structure of fn's result), with Kiln's
    decompositions and no fast paths. One that writes into views
    (x[a:b] = v) is traced again through torch.func's functionalize, which
    makes such writes scatters of their base (not first: it cannot trace
    torch.autograd.grad)."""
    structure = []

    def slow_paths(*args):
        with TracingMode(), _without_fused_paths(), _compiling():
            result = fn(*args)
            tensors, shape = flatten_outputs(result)
        if not tensors:
            raise TraceError(f"the function returns no tensors ({result!r}): there is nothing "
                             f"to compile")
        structure[:] = [shape]
        return tensors
    if _takes_exactly(fn, len(inputs)):
        slow_paths.__wrapped__ = fn  # placeholders keep fn's argument names
    gm = _make_fx(slow_paths, inputs, tracing_mode)
    _drop_whole_slices(gm)
    writer = _needs_functionalize(gm.graph)
    if writer is not None:
        try:
            gm = _make_fx(torch.func.functionalize(slow_paths), inputs, tracing_mode)
        except TraceError:
            raise
        except Exception as error:  # functionalize's own limits
            raise FunctionalizeError(f"node '{writer.name}' ({writer.target}) writes in place "
                                     f"where functionalize cannot follow ({error}): write the "
                                     f"result out of place instead") from error
        _drop_whole_slices(gm)
        writer = _write_into_made_view(gm.graph)
        if writer is not None:  # functionalize() below would lose the write into the view
            raise FunctionalizeError(f"node '{writer.name}' ({writer.target}) writes into a view "
                                     f"that functionalize leaves in place (as in F.pad's "
                                     f"circular mode): Unimplemented")
    return gm, structure[0]


def dtype_name(dtype, what, advice="convert it to one of those first (x.float(), x.long())"):
    """The graph's name of `dtype`, which `what` has."""
    if dtype not in DTYPES:
        raise TraceError(f"{what} is {dtype}: Kiln compiles tensors of "
                         f"{', '.join(str(t).removeprefix('torch.') for t in DTYPES)}; {advice}")
    return DTYPES[dtype]


def tensor_type(t, symbols=None, what="a tensor"):
    """TensorType JSON of a tensor (`what`, for errors); `symbols` maps dim
    index -> symbol name. A fake tensor's symbolic sizes (torch.SymInt:
    torch.export's) are the symbols they name (sym_dim)."""
    symbols = symbols or {}
    sizes = [{"symbol": symbols[d]} if d in symbols else sym_dim(s, f"dim {d} of {what}")
             for d, s in enumerate(t.shape)]
    result = {"dtype": dtype_name(t.dtype, what), "sizes": sizes}
    if not symbols and all("constant" in size for size in sizes):
        result["strides"] = [{"constant": int(s)} for s in t.stride()]
    if t.requires_grad:
        result["requiresGrad"] = True
    return result


def sym_terms(size, what):
    """SymExpr JSON of an int or a torch.SymInt (a fake tensor's symbolic
    size, an argument computed from one): a sum of integer coefficients
    times products of symbols, named as torch names them (s0); TraceError
    for any other expression (a division, a remainder)."""
    import sympy
    expr = sympy.expand(size.node.expr) if isinstance(size, torch.SymInt) else sympy.Integer(size)
    terms = []
    for term in sympy.Add.make_args(expr):
        coefficient, product = term.as_coeff_Mul()
        symbols = []
        for factor in sympy.Mul.make_args(product):
            if factor == 1:
                continue
            base, power = factor.as_base_exp()
            if not coefficient.is_Integer or not isinstance(base, sympy.Symbol) or \
                    not power.is_Integer or power < 1:
                raise TraceError(f"{what} is {expr}: Kiln takes symbolic sizes that are integers "
                                 f"times products of symbols (2*s0, s0*s1), and sums of them in "
                                 f"arguments")
            symbols += [str(base)] * int(power)
        terms.append({"coefficient": str(int(coefficient)), **({"symbols": symbols} if symbols
                                                                else {})})
    return {"terms": terms if expr != 0 else []}


def sym_dim(size, what):
    """Dim JSON of an int or a torch.SymInt size: a constant, or a positive
    multiplier times one symbol and the further symbols (`times`) it is
    multiplied by."""
    if not isinstance(size, torch.SymInt):
        return {"constant": int(size)}
    terms = sym_terms(size, what)["terms"]
    if not terms:
        return {"constant": 0}
    if len(terms) == 1 and "symbols" not in terms[0]:
        return {"constant": int(terms[0]["coefficient"])}
    if len(terms) != 1 or int(terms[0]["coefficient"]) < 1:
        raise TraceError(f"{what} is {size}: a Kiln size is a constant, or a constant times "
                         f"symbols (2*s0, s0*s1), not a sum; export that dim static, or pad it "
                         f"to such a size")
    first, *times = terms[0]["symbols"]
    dim = {"symbol": first}
    if terms[0]["coefficient"] != "1":
        dim["multiplier"] = terms[0]["coefficient"]
    if times:
        dim["times"] = times
    return dim


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


def scalar_arg(name, value, node="a node"):
    """An Argument JSON for a non-tensor value of `node` (for errors)."""
    if value is None:
        return {"name": name, "none": True}
    if isinstance(value, bool):
        return {"name": name, "boolValue": value}
    if isinstance(value, int):
        return {"name": name, "intValue": str(value)}
    if isinstance(value, float):
        return {"name": name, "floatValue": value if value == value and abs(value) != float("inf")
                else ("NaN" if value != value else ("Infinity" if value > 0 else "-Infinity"))}
    if isinstance(value, torch.dtype):
        return {"name": name, "dtypeValue": dtype_name(value, f"the {name} of {node}",
                                                       "compute in one of those")}
    if isinstance(value, str):
        return {"name": name, "stringValue": value}
    if isinstance(value, torch.SymInt):
        expr = sym_terms(value, f"the {name} of {node}")
        if any("symbols" in term for term in expr["terms"]):
            return {"name": name, "symInt": expr}
        return {"name": name, "intValue": str(int(value))}
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, torch.SymInt) for v in value):
            return {"name": name, "symIntList": {"values": [
                sym_terms(v, f"the {name} of {node}") for v in value]}}
        if all(isinstance(v, bool) for v in value) and value:
            return {"name": name, "boolList": {"values": list(value)}}
        if all(isinstance(v, int) for v in value):
            return {"name": name, "intList": {"values": [str(v) for v in value]}}
        if all(isinstance(v, (int, float)) for v in value):
            return {"name": name, "floatList": {"values": [float(v) for v in value]}}
    if isinstance(value, torch.device):
        return None
    raise TraceError(f"argument {name}={value!r} of type {type(value).__name__} is not supported")


def _out_of_place(schema):
    """The out-of-place overload of an in-place op's schema (add_.Tensor ->
    add.Tensor; transpose_ -> transpose.int, whose overload has another
    name), or None."""
    packet = getattr(torch.ops.aten, schema.name.split("::")[1][:-1], None)
    if packet is None:
        return None
    same = getattr(packet, schema.overload_name or "default", None)
    if same is not None:
        return same
    names = [argument.name for argument in schema.arguments]
    for name in packet.overloads():
        overload = getattr(packet, name)
        if [argument.name for argument in overload._schema.arguments] == names:
            return overload
    return None


def _copied(gm, node):
    """What dst.copy_(src) leaves in dst: src, broadcast to dst's sizes and
    cast to its dtype where they differ."""
    graph, dst, src = gm.graph, node.args[0], node.args[1]
    (want_sizes, want_dtype), (have_sizes, have_dtype) = _value_type(gm, dst), _value_type(gm, src)
    value = src
    if have_dtype != want_dtype:
        with graph.inserting_after(node):
            value = graph.call_function(aten._to_copy.default, (value,), {"dtype": want_dtype})
    if have_sizes != want_sizes:
        with graph.inserting_after(value if value is not src else node):
            value = graph.call_function(aten.expand.default, (value, want_sizes))
    return value


def _held_tensors(fn):
    """The tensors `fn` holds: a module's parameters, buffers and other
    tensor attributes (_module_tensors), and the globals and closure of a
    function or of a module's forward."""
    held = []
    if isinstance(fn, torch.nn.Module):
        held += list(fn.parameters())
        held += [value for _, _, value in _module_tensors(fn).values()]
        fn = fn.forward
    code = getattr(fn, "__code__", None)
    if code is not None:
        held += [fn.__globals__.get(name) for name in code.co_names]
        held += [cell.cell_contents for cell in getattr(fn, "__closure__", None) or ()]
    return [t for t in held if isinstance(t, torch.Tensor)]


def _tensors_held_by(fn):
    """The storages (data_ptr) of the tensors `fn` holds (_held_tensors)."""
    return {t.data_ptr() for t in _held_tensors(fn)}


class _CopiedBeforeWritten(torch.overrides.TorchFunctionMode):
    """Copies a parameter the first time an in-place function (add_,
    x[i] = v, p -= lr * g) is about to write into its memory: what
    _changes_undone puts back, without a copy of every parameter."""

    def __init__(self, parameters):
        super().__init__()
        self.parameters = {_storage_pointer(p): p for p in parameters if p.numel()}
        self.copies = {}  # id(parameter) -> (parameter, its values before)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if (name == "__setitem__" or (name.endswith("_") and not name.startswith("__"))) and \
                args and isinstance(args[0], torch.Tensor) and args[0].numel():
            try:
                written = self.parameters.get(_storage_pointer(args[0]))
            except RuntimeError:  # no storage: functionalize's wrappers, fake tensors
                written = None
            if written is not None and id(written) not in self.copies:
                self.copies[id(written)] = (written, written.detach().clone())
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _changes_undone(fn, inputs):
    """Tracing runs fn on the real tensors: what it changes in place (an
    input, a buffer, a parameter, a tensor fn holds) is put back when the
    trace is done, so compiling leaves them as they were. Parameters a
    module holds are copied only when about to be written (a model's worth
    of memory otherwise); one changed some other way is named."""
    kept, parameters, seen = [], [], set()
    for held in (False, True):
        for tensor in _held_tensors(fn) if held else inputs:
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            if held and isinstance(tensor, torch.nn.Parameter):
                parameters.append((tensor, tensor._version))
            else:
                kept.append((tensor, tensor._version, tensor.detach().clone()))
    watch = _CopiedBeforeWritten([parameter for parameter, _ in parameters])
    try:
        with watch:
            yield
    finally:
        with torch.no_grad():
            for tensor, version, copy in kept:
                # A training-mode native_batch_norm updates its running
                # statistics without counting a version: compare.
                if tensor._version != version or not torch.equal(tensor, copy):
                    tensor.copy_(copy)
            for parameter, copy in watch.copies.values():
                parameter.copy_(copy)
    changed = [parameter for parameter, version in parameters
               if parameter._version != version and id(parameter) not in watch.copies]
    if changed:
        raise TraceError(f"the function changes {len(changed)} of its module's parameters in "
                         f"place other than through an in-place function (out=, say; shaped "
                         f"{', '.join(str(list(t.shape)) for t in changed[:3])}): the trace ran "
                         f"it once, so they have changed once; write them with in-place "
                         f"functions (p.sub_(lr * g)), or pass them as arguments")


def _fold_trace_constants(gm, held):
    """Computes at trace time the numbers a trace made into tensors
    (torch.tensor(2) in the function; TorchScript's traces turn sizes into
    tensors: x.size(1) // 2) and the ops over only them: the graph gets
    their values, not, say, an integer division by a tensor. Tensors the
    function holds (`held`: _tensors_held_by) are never folded: in-place
    updates of them are seen."""
    graph = gm.graph
    known = {}  # node -> its value
    for node in list(graph.nodes):
        if node.op == "get_attr":
            value = getattr(gm, node.target)
            if isinstance(value, torch.Tensor) and value.dim() == 0 and \
                    value.data_ptr() not in held:
                known[node] = value
            continue
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload) or \
                torch.Tag.nondeterministic_seeded in node.target.tags or \
                not node.all_input_nodes or any(n not in known for n in node.all_input_nodes):
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: known[n])
        value = node.target(*args, **kwargs)
        if not isinstance(value, torch.Tensor) or value.dim() != 0:
            continue
        name = f"_folded_constant{len(known)}"
        gm.register_buffer(name, value)
        with graph.inserting_before(node):
            folded = graph.get_attr(name)
        node.replace_all_uses_with(folded)
        graph.erase_node(node)
        known[folded] = value
    eliminate_dead_code(graph)


def _scalars_second(gm):
    """Arithmetic whose first operand is a number (torch.add(2.0, x), and
    what some decompositions write) with the tensor first, as Kiln's op
    table takes it: add and mul swapped, sub as rsub, div from a full_like."""
    graph = gm.graph
    for node in list(graph.nodes):
        if (node.target not in (aten.add.Tensor, aten.mul.Tensor, aten.sub.Tensor, aten.div.Tensor)
                or len(node.args) < 2 or not isinstance(node.args[0], (int, float))
                or not isinstance(node.args[1], torch.fx.Node)):
            continue
        number, tensor = node.args[0], node.args[1]
        if node.target is aten.sub.Tensor:
            node.target = aten.rsub.Scalar
            node.args = (tensor, number) + tuple(node.args[2:])
        elif node.target is aten.div.Tensor:
            # A number over integers divides in the default float dtype.
            dtype = _value_type(gm, tensor)[1]
            dtype = dtype if dtype.is_floating_point else torch.get_default_dtype()
            with graph.inserting_before(node):
                full = graph.call_function(aten.full_like.default, (tensor, number),
                                           {"dtype": dtype})
            node.args = (full, tensor)
        else:
            alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
            if alpha != 1:  # number + alpha * x
                with graph.inserting_before(node):
                    tensor = graph.call_function(aten.mul.Tensor, (tensor, alpha))
            node.args, node.kwargs = (tensor, number), {}


def functionalize(gm, held=None):
    """Replaces in-place ops by out-of-place ones.

    An in-place op on a graph input (a placeholder, or a tensor the function
    holds: a module's buffer, a global) is refused unless `held` is given
    (_tensors_held_by's storages). Then it is replaced too, the input's
    final value becomes an extra graph output after the function's own, and
    the inputs written are returned in the order of those outputs, for the
    caller to copy each value into its tensor after a call; so are the
    running statistics a training-mode batch norm updates. A tensor the
    trace made (torch.tensor(...) in the function) is a fresh intermediate
    at each eager call: written like one, never back."""
    graph = gm.graph
    first_read = {}  # one node per tensor held, so that its changes are seen by every reader
    for node in list(graph.nodes):
        if node.op == "get_attr" and node.target in first_read:
            node.replace_all_uses_with(first_read[node.target])
            graph.erase_node(node)
        elif node.op == "get_attr":
            first_read[node.target] = node
    final = {}  # an input written -> the node of its latest value
    latest_of = {}  # such a node -> the input it is the latest value of

    def is_input(node):
        if held is None:
            return node.op in ("placeholder", "get_attr")
        return node.op == "placeholder" or (
            node.op == "get_attr" and getattr(gm, node.target).data_ptr() in held)

    def rewire(mutated, replacement, after, made):
        """Readers of `mutated` after `after` (but those `made` to compute
        `replacement`) read `replacement`, and an input whose value `mutated`
        was now has that one."""
        order = {n: i for i, n in enumerate(graph.nodes)}
        for user in list(mutated.users):
            if user not in made and order[user] > order[after]:
                user.replace_input_with(mutated, replacement)
        written = mutated if is_input(mutated) else latest_of.get(mutated)
        if written is not None:
            final[written] = replacement
            latest_of[replacement] = written

    for node in list(graph.nodes):
        if node.op != "call_function" or not hasattr(node.target, "_schema"):
            continue
        if held is not None and _is_training_batch_norm(node) and \
                all(is_input(statistic) or statistic in latest_of for statistic in node.args[3:5]):
            statistics = node.args[3:5]
            updated, made = _update_running_statistics(gm, node)
            for statistic, value in zip(statistics, updated):
                rewire(statistic, value, node, made)
            continue
        if not _is_in_place(node):
            continue
        mutated = node.args[0]
        if held is None and is_input(mutated):
            raise TraceError(f"node '{node.name}' ({node.target}) mutates graph input "
                             f"'{mutated.name}' in place: Unimplemented"
                             + _running_statistics_advice(graph))
        if node.target is aten.copy_.default:
            replacement = _copied(gm, node)
        else:
            overload = _out_of_place(node.target._schema)
            if overload is None:
                raise TraceError(f"node '{node.name}': no out-of-place form of {node.target}")
            with graph.inserting_after(node):
                replacement = graph.call_function(overload, node.args, node.kwargs)
        # The in-place node's own result is the mutated tensor: its new value.
        rewire(mutated, replacement, node, {replacement})
        node.replace_all_uses_with(replacement)
        graph.erase_node(node)
    written = list(final)
    if written:
        output = next(n for n in graph.nodes if n.op == "output")
        output.args = (list(output.args[0]) + [final[node] for node in written],)
    graph.lint()
    return written


def _is_training_batch_norm(node):
    """A native_batch_norm in training mode given running statistics (which
    eager updates in place)."""
    def given(value):
        return isinstance(value, torch.fx.Node)
    return (node.op == "call_function" and node.target is BATCH_NORM and len(node.args) > 6
            and node.args[5] and given(node.args[3]) and given(node.args[4]))


def _update_running_statistics(gm, node):
    """([running_mean, running_var] after a training-mode batch norm, as
    eager computes them: momentum times the batch's mean and unbiased
    variance plus (1 - momentum) times the old ones; the nodes made). The
    node then takes no running statistics (training mode never reads
    them)."""
    graph = gm.graph
    x, running_mean, running_var, momentum = node.args[0], node.args[3], node.args[4], node.args[6]
    dims = [0] + list(range(2, len(_value_type(gm, x)[0])))
    with graph.inserting_after(node):
        mean = graph.call_function(operator.getitem, (node, 1))
    with graph.inserting_after(mean):
        variance = graph.call_function(aten.var.correction, (x, dims), {"correction": 1})
    updated, made = [], {mean, variance}
    last = variance
    for old, batch in ((running_mean, mean), (running_var, variance)):
        with graph.inserting_after(last):
            kept = graph.call_function(aten.mul.Tensor, (old, 1 - momentum))
        with graph.inserting_after(kept):
            new = graph.call_function(aten.mul.Tensor, (batch, momentum))
        with graph.inserting_after(new):
            last = graph.call_function(aten.add.Tensor, (new, kept))
        updated.append(last)
        made |= {kept, new, last}
    node.args = node.args[:3] + (None, None) + node.args[5:]
    return updated, made


BATCH_NORM = torch.ops.aten.native_batch_norm.default
LAYER_NORM = torch.ops.aten.native_layer_norm.default
NORMALIZATIONS = (BATCH_NORM, LAYER_NORM, torch.ops.aten.native_group_norm.default)


def _training_batch_norms(graph):
    """The training-mode batch norms of a make_fx graph given running
    statistics, which eager updates in place."""
    return [node for node in graph.nodes if _is_training_batch_norm(node)]


def _running_statistics_advice(graph):
    """What to do when the in-place update refused is a BatchNorm module's
    (num_batches_tracked += 1 beside a training-mode batch norm)."""
    if not _training_batch_norms(graph):
        return ""
    return (" (a BatchNorm module in training mode updates its running statistics in place, "
            "which a Kiln artifact cannot: compile it in eval mode, module.eval(), or build it "
            "with track_running_stats=False)")


def warn_running_statistics(graph):
    """Warns once per training-mode batch norm given running statistics."""
    for node in _training_batch_norms(graph):
        warnings.warn(f"node '{node.name}' (aten.native_batch_norm, training=True): Kiln "
                      "normalizes with the batch's statistics but does not update running_mean "
                      "and running_var, which eager PyTorch updates in place (a Kiln artifact "
                      "is a pure function)", RuntimeWarning, stacklevel=3)


def _float32_statistics(node, tensors):
    """The results of a float16 normalization with its statistics (mean and
    inverse standard deviation) float32, as Kiln's ops give them (torch's
    meta kernels declare them float16; an eval-mode batch norm's, empty in
    eager, are [C] in Kiln's op)."""
    if node.target is BATCH_NORM and not node.args[5]:
        statistics = [torch.empty(tensors[0].shape[1], dtype=torch.float32, device="meta")] * 2
    else:
        statistics = [torch.empty(t.shape, dtype=torch.float32, device="meta") for t in tensors[1:]]
    return tensors[:1] + statistics


def _with_dropped_results(node, tensors, results):
    """`tensors`, the results of `node`, with each None its output_mask
    dropped replaced by what the op gives with the mask all True, computed
    on fake tensors (only the types are used; eager cannot compute some of
    them, a group norm's weight gradient without a weight)."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    names = [argument.name for argument in node.target._schema.arguments]
    if "output_mask" not in names:
        raise TraceError(f"node '{node.name}' ({node.target}) returns None results")
    position = names.index("output_mask")
    args = list(torch.fx.node.map_arg(node.args, lambda n: results[n]))
    kwargs = dict(torch.fx.node.map_arg(node.kwargs, lambda n: results[n]))
    if position < len(args):
        args[position] = [True] * len(args[position])
    else:
        kwargs["output_mask"] = [True] * len(kwargs["output_mask"])
    values = [v for v in itertools.chain(args, kwargs.values()) if isinstance(v, torch.Tensor)]
    if any(isinstance(v, FakeTensor) for v in values):  # a float16 trace: its fake mode is on
        full = node.target(*args, **kwargs)
    else:
        with FakeTensorMode() as mode:
            def fake(v):
                return mode.from_tensor(v) if isinstance(v, torch.Tensor) else v
            full = node.target(*[fake(a) for a in args],
                               **{k: fake(v) for k, v in kwargs.items()})
    return [t if t is not None else f for t, f in zip(tensors, full)]


def lift_constants(gm):
    """get_attr tensors -> new placeholders after the existing ones (one per
    tensor, however many nodes read it)."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    lifted = []
    by_target = {}
    for node in list(graph.nodes):
        if node.op != "get_attr":
            continue
        value = getattr(gm, node.target)
        if not isinstance(value, torch.Tensor):
            users = ", ".join(f"'{user.name}' ({user.target})" for user in node.users)
            raise TraceError(f"{users} take{'s' if len(node.users) == 1 else ''} a "
                             f"{type(value).__name__}, not a tensor (a quantized module's packed "
                             f"weights, say): Kiln compiles float and integer tensors; compile "
                             f"the float model")
        if node.target not in by_target:
            after = placeholders[-1] if placeholders else next(iter(graph.nodes))
            with graph.inserting_after(after):
                placeholders.append(graph.placeholder(node.target.strip("_") or "weight"))
            by_target[node.target] = placeholders[-1]
            lifted.append(value.detach())
        node.replace_all_uses_with(by_target[node.target])
        graph.erase_node(node)
    return lifted


def node_results(gm, inputs):
    """Runs the graph eagerly and returns {node: result}."""
    results = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            value = super().run_node(n)
            results[n] = value
            return value

    Recorder(gm).run(*inputs)
    return results


def to_kiln(gm, inputs, name, symbols=None, results=None):
    """The Kiln graph JSON of a make_fx graph module. `results` ({node:
    value}) types the graph instead of running it on `inputs`: fake tensors
    with symbolic sizes, and the sizes nodes computing sizes give
    (torch.export's graphs), which their users take as arguments."""
    symbols = symbols or {}
    results = node_results(gm, inputs) if results is None else results
    ids = {}
    statistics = set()  # ids of float16 normalizations' float32 statistics
    graph = {"name": name, "inputs": [], "nodes": [], "outputs": []}
    next_id = 0
    for index, node in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        ids[node] = next_id
        graph["inputs"].append({"value": next_id, "name": node.name,
                                "type": tensor_type(results[node], symbols.get(index),
                                                    f"input '{node.name}'")})
        next_id += 1

    def as_argument(node):  # a size a node computed is its value
        return node if isinstance(results[node], (torch.Tensor, tuple, list)) else results[node]

    for node in gm.graph.nodes:
        if node.target in CHECKS:  # no result: Kiln's is a 0-dim int32 nothing reads
            results[node] = torch.zeros((), dtype=torch.int32)
        if node.op != "call_function" or not isinstance(results[node], (torch.Tensor, tuple, list)):
            continue  # sizes, and runtime asserts on them (None)
        if node.target is operator.getitem:
            source, index = node.args
            ids[node] = ids[source][index]
            continue
        if not hasattr(node.target, "_schema"):
            raise TraceError(f"node '{node.name}' calls {node.target}, not an ATen op")
        schema = node.target._schema
        op_name = str(node.target)
        kiln_node = {"name": node.name, "op": op_name, "inputs": [], "args": [],
                     "outputs": [], "outputTypes": []}
        bound = {}
        for position, value in enumerate(node.args):
            bound[schema.arguments[position].name] = value
        bound.update(node.kwargs)
        for argument in schema.arguments:
            if argument.name not in bound and argument.kwarg_only and str(argument.type) in (
                    "Optional[Tensor]", "Tensor?"):  # left out: absent (segment_reduce's offsets)
                kiln_node["args"].append({"name": argument.name, "none": True})
            if argument.name not in bound or argument.name in IGNORED_ARGS:
                continue
            value = torch.fx.node.map_arg(bound[argument.name], as_argument)
            type_text = str(argument.type)
            if isinstance(value, torch.fx.Node):
                kiln_node["inputs"].append(ids[value])
            elif isinstance(value, (list, tuple)) and value and all(
                    isinstance(v, torch.fx.Node) for v in value):
                kiln_node["inputs"].extend(ids[v] for v in value)
            elif value is None and "Tensor" in type_text:
                kiln_node["args"].append({"name": argument.name, "none": True})
            else:
                arg = scalar_arg(argument.name, value, f"node '{node.name}' ({node.target})")
                if arg is not None:
                    kiln_node["args"].append(arg)
        result = results[node]
        tensors = list(result) if isinstance(result, (tuple, list)) else [result]
        if any(t is None for t in tensors):
            tensors = _with_dropped_results(node, tensors, results)
        widened = []  # the results that are float32 statistics
        if node.target in NORMALIZATIONS and tensors[0].dtype == torch.float16 and any(
                t.dtype != torch.float32 for t in tensors[1:]):
            tensors = _float32_statistics(node, tensors)
            widened = tensors[1:]
        elif _is_view(node) and kiln_node["inputs"] and kiln_node["inputs"][0] in statistics:
            # A view of one (training graphs save them through an alias).
            tensors = widened = [torch.empty(t.shape, dtype=torch.float32, device="meta")
                                 for t in tensors]
        node_ids = []
        for tensor in tensors:
            kiln_node["outputs"].append(next_id)
            kiln_node["outputTypes"].append(
                tensor_type(tensor, what=f"the result of node '{node.name}' ({node.target})"))
            node_ids.append(next_id)
            if any(tensor is w for w in widened):
                statistics.add(next_id)
            next_id += 1
        ids[node] = node_ids if isinstance(result, (tuple, list)) else node_ids[0]
        graph["nodes"].append(kiln_node)
    output = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    outputs = list(output) if isinstance(output, (tuple, list)) else [output]
    graph["outputs"] = [ids[o] for o in outputs]
    return graph


def trace_graph(fn, inputs, name, symbolic=None, relations=None, arguments=None, traced=None):
    """(graph JSON dict, lifted, structure, writes) for fn(*inputs) without
    computing a reference: `lifted` are the weights and buffers lifted into
    graph inputs after `inputs` (detached tensors sharing the module's
    storage, so in-place updates are seen); `structure` is how fn's result
    holds the graph's first outputs (flatten_outputs); `writes` are the
    graph inputs fn changes in place, one per output after those, whose
    value is copied into that input after a call. `symbolic` and
    `relations` are as for trace; `arguments` (an _arguments.Layout) says
    how `inputs` make fn's call when they are not its positional arguments.
    `traced` is what trace_module(fn, inputs, arguments, write_back=True)
    returned, when the caller has it. Raises TraceError for a graph Kiln
    cannot take."""
    graph, lifted, _, structure, writes = _trace_graph(fn, inputs, name, symbolic, relations,
                                                       arguments=arguments, write_back=True,
                                                       traced=traced)
    return graph, lifted, structure, writes


# Ops that return nothing and raise eager's error when a value they read says
# so (linalg.inv's check of its info result, a singular matrix): dead-code
# elimination keeps them, and so does Kiln (codegen/ops/linalg_check.cc).
CHECKS = frozenset([aten._linalg_check_errors.default])


def eliminate_dead_code(graph):
    graph.eliminate_dead_code(is_impure_node=lambda node: node.is_impure() or
                              node.target in CHECKS)


def _refuse_random(gm):
    """Refuses ops that draw random numbers (dropout in training mode,
    randn_like, ...): an artifact is a pure function of its inputs."""
    for node in gm.graph.nodes:
        if torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()):
            raise TraceError(f"node '{node.name}' ({node.target}) draws random numbers, and a Kiln "
                             f"artifact is a pure function of its inputs: call model.eval() for "
                             f"dropout, or pass the noise in as an input")


def _module_state(fn):
    """(names, tensors) of a module's parameters and buffers: each tensor
    once, and names[i] every name tensors[i] has (tied weights have two);
    none for a function."""
    if not isinstance(fn, torch.nn.Module):
        return [], []
    names, tensors, position = [], [], {}
    for prefix, module in fn.named_modules(remove_duplicate=False):
        for kind in (module._parameters, module._buffers):
            for name, tensor in kind.items():
                if tensor is None:
                    continue
                if id(tensor) not in position:
                    position[id(tensor)] = len(tensors)
                    names.append([])
                    tensors.append(tensor.detach())
                names[position[id(tensor)]].append(f"{prefix}.{name}" if prefix else name)
    return names, tensors


def _module_tensors(module):
    """{(id(submodule), name): (submodule, name, value)} of every buffer and
    tensor attribute in `module`'s tree, and of attributes holding None
    (a state a forward may set)."""
    found = {}
    for submodule in module.modules():
        attributes = list(submodule._buffers.items()) + list(vars(submodule).items())
        for name, value in attributes:
            if value is None or isinstance(value, torch.Tensor):
                found[(id(submodule), name)] = (submodule, name, value)
    return found


def _rebinding_as_writes(module, call, allowed):
    """`call` (module's forward over the graph's inputs), such that a forward
    that rebinds a tensor attribute (self.steps = self.steps + 1, a
    recurrent state) traces as a write into the tensor the attribute held:
    after the call each new value is copied into that tensor and the
    attribute is put back, so Kiln writes it back after every call and the
    attribute holds what eager's rebinding leaves. Refused (TraceError)
    when not `allowed`, or when the new tensor's shape or dtype differs."""
    @functools.wraps(call)
    def run(*args):
        before = _module_tensors(module)
        result = call(*args)
        for key, (submodule, name, value) in _module_tensors(module).items():
            old = before.get(key, (None, None, None))[2]
            if value is old:
                continue
            setattr(submodule, name, old)
            what = f"the forward sets {type(submodule).__name__}.{name}"
            if not allowed:
                raise TraceError(f"{what} to a new tensor, which this trace cannot write back: "
                                 f"change it in place instead ({name}.copy_(...))")
            if not isinstance(old, torch.Tensor) or not isinstance(value, torch.Tensor) or \
                    old.shape != value.shape or old.dtype != value.dtype:
                def described(t):
                    return (f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"
                            if isinstance(t, torch.Tensor) else repr(t))
                raise TraceError(f"{what} from {described(old)} to {described(value)}: Kiln "
                                 f"writes a rebound attribute into the tensor it held, so it "
                                 f"must keep its shape and dtype (register it as a buffer of "
                                 f"that shape first)")
            with torch.no_grad():
                old.copy_(value)
        return result
    return run


def _flat_function(fn, arguments, state_names):
    """fn as a function of the graph's inputs: its arguments' tensors
    (`arguments`, an _arguments.Layout, says how they make its call; None:
    they are its positional arguments), then with `state_names` a module's
    parameters and buffers (_module_state's), each under all its names."""
    if arguments is None and not state_names:
        return fn
    count = len(state_names)

    def call(*tensors):
        own = tensors[:len(tensors) - count]
        args, kwargs = arguments.rebuild(own) if arguments is not None else (own, {})
        if not count:
            return fn(*args, **kwargs)
        state = {name: tensor for names, tensor in zip(state_names, tensors[len(own):])
                 for name in names}
        return torch.func.functional_call(fn, state, tuple(args), kwargs)
    return call if arguments is None else arguments.named(call, count)


def trace_module(fn, inputs, arguments=None, write_back=False, tracing_mode=None):
    """(the graph module that computes the graph's outputs from list(inputs)
    + lifted, lifted, structure, writes, whether it is float16): make_fx's
    graph, functionalized, its weights and buffers lifted into inputs.
    With `write_back`, inputs fn changes in place are outputs too (writes:
    functionalize's); else such a change is refused. `tracing_mode` is
    make_fx's ("symbolic": sizes as SymInts, a data-dependent size an
    unbacked one); by default "real", or "fake" for float16."""
    names, state = _module_state(fn)
    half = any(t.dtype == torch.float16 for t in itertools.chain(inputs, state))
    tracing_mode = tracing_mode or ("fake" if half else "real")
    # Traced with fake tensors (eager has almost no float16 kernels; symbolic
    # sizes), which make_fx makes of its inputs only, a float16 module's own
    # tensors are inputs too; so are a module's that writes into a view of
    # its buffer (a cache: self.keys[:, i:j] = k), for functionalize to follow.
    if tracing_mode == "real":
        names, state = [], []

    def trace_with(state_names, state):
        traced = _flat_function(fn, arguments, state_names)
        if isinstance(fn, torch.nn.Module):
            traced = _rebinding_as_writes(fn, traced, write_back and not state_names)
        with _changes_undone(fn, inputs):
            return trace_fx(traced, list(inputs) + state, tracing_mode=tracing_mode)
    try:
        gm, structure = trace_with(names, state)
    except FunctionalizeError:
        if half or not write_back or not isinstance(fn, torch.nn.Module):
            raise
        names, state = _module_state(fn)
        gm, structure = trace_with(names, state)
    _refuse_random(gm)
    held = _tensors_held_by(fn)
    written = functionalize(gm, held if write_back else None)
    _fold_trace_constants(gm, held)
    _scalars_second(gm)
    warn_running_statistics(gm.graph)
    writes = _input_positions(gm, written)
    lifted = state + lift_constants(gm)
    eliminate_dead_code(gm.graph)
    gm.recompile()
    return gm, lifted, structure, writes, half


def _trace_graph(fn, inputs, name, symbolic=None, relations=None, weights_seed=None,
                 arguments=None, write_back=False, traced=None):
    """(graph, lifted, the graph module that computes the graph's outputs
    from list(inputs) + lifted, structure, writes): trace_module's (or
    `traced`, what it returned), in Kiln graph JSON. With `weights_seed`,
    the lifted weights are replaced by other random values of the same
    shapes."""
    gm, lifted, structure, writes, half = traced or trace_module(fn, inputs, arguments,
                                                                 write_back)
    if weights_seed is not None:
        generator = torch.Generator().manual_seed(weights_seed)
        # Same scale as the originals, so activations stay in range.
        lifted = [(torch.randn(w.shape, generator=generator) * w.float().std() + w.float().mean())
                  .to(w.dtype) if w.is_floating_point() and w.numel() > 1 else w for w in lifted]
    all_inputs = list(inputs) + lifted
    graph = to_kiln_half(gm, all_inputs, name) if half else to_kiln(gm, all_inputs, name)
    if symbolic:
        mark_symbolic(fn, inputs, graph, symbolic, name, arguments)
    if relations:
        graph["relations"] = relations + graph.get("relations", [])
    alias_writes(graph, writes)
    return graph, lifted, gm, structure, writes


def alias_writes(graph, writes):
    """Marks the graph's last outputs, the new values of the inputs at
    `writes`, as those inputs' (Graph.output_aliases): Kiln writes each in
    its input's storage when it can (docs/ARCHITECTURE.md, "Outputs that are
    inputs"), and copies it back otherwise."""
    first = len(graph["outputs"]) - len(writes)
    graph["outputAliases"] = [{"output": first + j, "input": position}
                              for j, position in enumerate(writes)]


def _input_positions(gm, nodes):
    """The graph input each of `nodes` (placeholders and get_attr tensors)
    is once lift_constants made the get_attr tensors inputs after the
    placeholders, in the order it lifts them. A tensor held that is only
    written (self.last.copy_(x)) is read by nothing and dropped by then: it
    is read again here, to stay an input to write back to."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    read = {n.target for n in graph.nodes if n.op == "get_attr"}
    for node in nodes:
        if node.op == "get_attr" and node.target not in read:
            with graph.inserting_after(placeholders[-1] if placeholders else None):
                graph.get_attr(node.target)
            read.add(node.target)
    targets = list(dict.fromkeys(n.target for n in graph.nodes if n.op == "get_attr"))
    return [placeholders.index(node) if node.op == "placeholder"
            else len(placeholders) + targets.index(node.target) for node in nodes]


def trace(fn, inputs, name, symbolic=None, weights_seed=None, relations=None,
          eager_bfloat16=False):
    """(graph JSON, reference JSON) for fn(*inputs): trace_graph, and eager
    PyTorch's outputs on the inputs and lifted weights. With `weights_seed`,
    the lifted weights are replaced by other random values of the same
    shapes. `symbolic` lists (input name, dim[, symbol]) to make symbolic
    (mark_symbolic); `relations` (SymbolRelation JSON) go into the graph as
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


def to_kiln_half(gm, inputs, name):
    """The graph of a float16 trace: its types come from fake tensors, since
    the real float16 kernels are missing."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:  # every input goes through from_tensor
        fakes = [mode.from_tensor(t) for t in inputs]
        return to_kiln(gm, fakes, name)


# Ops whose `size` argument may say -1 for "whatever the element count
# implies" (expand: "keep this dim"), or name symbols.
RESHAPES = {"aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
            "aten._reshape_alias.default", "aten.expand.default"}
# Ops whose `size` argument is their result's shape, which may name symbols
# (torch.ones(T, T), a causal mask over a symbolic T).
FACTORIES = {"aten.zeros.default", "aten.ones.default", "aten.full.default",
             "aten.empty.memory_format", "aten.new_zeros.default", "aten.new_ones.default",
             "aten.new_full.default", "aten.new_empty.default"}
ARANGES = {"aten.arange.default", "aten.arange.start", "aten.arange.start_step"}


def monomial(base, grown, values):
    """A size seen as `base` at the traced sizes and as grown[s] when only
    symbol s grew by one, as a SymExpr term {coefficient, symbols}: a
    constant, or coefficient * a product of powers (up to 3) of the symbols
    it moved with (n * n for a mean over [n, n]). None when it is no such
    product."""
    moved = [s for s in values if grown[s] != base]
    if not moved:
        return {"coefficient": str(base)}
    for powers in itertools.product(range(1, 4), repeat=len(moved)):
        at = dict(zip(moved, powers))
        product = math.prod(values[s] ** at[s] for s in moved)
        if product == 0 or base % product != 0:
            continue
        k = base // product
        if all(grown[s] == k * (product // values[s] ** at[s]) * (values[s] + 1) ** at[s]
               for s in moved):
            return {"coefficient": str(k),
                    "symbols": [s for s in moved for _ in range(at[s])]}
    return None


def relax_scalar_argument(node, twins, values):
    """Scalar arguments that differ between the traces (a mean's backward
    divides by the element count, torch.arange(T) counts to it) become
    symbolic sizes when they are whole numbers that move as a product of
    symbols. arange's are ints only: a float one makes a float tensor."""
    for i, arg in enumerate(node["args"]):
        others = [twin["args"][i] for twin in twins.values()]
        if all(other == arg for other in others):
            continue
        key = "intValue" if "intValue" in arg else "floatValue" if "floatValue" in arg else None
        if key == "floatValue" and node["op"] in ARANGES:
            continue
        if key is None or any(key not in other for other in others):
            continue
        base = float(arg[key])
        grown = {s: float(twin["args"][i][key]) for s, twin in twins.items()}
        if any(v != int(v) for v in [base, *grown.values()]):
            continue
        term = monomial(int(base), {s: int(v) for s, v in grown.items()}, values)
        if term is None or "symbols" not in term:
            continue
        symbolic = {"name": arg["name"], "symInt": {"terms": [term]}}
        for other in [arg, *others]:
            other.clear()
            other.update(symbolic)


def relax_size_argument(node, twins, values):
    """A reshape, expand or factory whose size list differs between the
    traces: when only a reshape's leading entry does, that entry becomes -1
    (Kiln infers it); otherwise, and always for expand (whose -1 means
    "keep", not "infer") and factories (which have nothing to infer from),
    each entry names the symbols it moves with (a symbolic size list).
    _reshape_alias's strides are dropped when they differ: Kiln derives a
    view's strides itself."""
    def drop(i):
        del node["args"][i]
        for twin in twins.values():
            del twin["args"][i]
    if node["op"] == "aten._reshape_alias.default":
        for i in reversed(range(len(node["args"]))):
            if node["args"][i]["name"] == "stride" and any(
                    twin["args"][i] != node["args"][i] for twin in twins.values()):
                drop(i)
    for i, arg in enumerate(node["args"]):
        others = {s: twin["args"][i] for s, twin in twins.items()}
        if all(other == arg for other in others.values()):
            continue
        if arg["name"] != "size" or "intList" not in arg or any(
                "intList" not in other or
                len(other["intList"]["values"]) != len(arg["intList"]["values"])
                for other in others.values()):
            continue
        entries = [int(v) for v in arg["intList"]["values"]]
        grown = {s: [int(v) for v in other["intList"]["values"]] for s, other in others.items()}
        differing = {d for d in range(len(entries)) for s in grown if grown[s][d] != entries[d]}
        inferable = node["op"] in RESHAPES and node["op"] != "aten.expand.default"
        if differing == {0} and inferable and -1 not in entries:
            for other in [arg, *others.values()]:
                other["intList"]["values"][0] = "-1"
            continue
        terms = [monomial(entries[d], {s: grown[s][d] for s in grown}, values)
                 for d in range(len(entries))]
        if None in terms:
            return  # left differing: reported as baked in
        del arg["intList"]
        arg["symIntList"] = {"values": [{"terms": [term]} for term in terms]}
        for other in others.values():
            other.clear()
            other.update(arg)


def baked_in_error(node, twin, symbol):
    """The TraceError for an argument of `node` that moves with `symbol`
    (as in `twin`, traced with only that symbol one larger) in a way Kiln
    cannot name, with advice that fits the op."""
    def shown(arg):
        value = next((v for k, v in arg.items() if k != "name"), None)
        if isinstance(value, dict) and "values" in value:
            return "[" + ", ".join(str(v) for v in value["values"]) + "]"
        return str(value)
    moved = [(a, b) for a, b in zip(node["args"], twin["args"]) if a != b]
    if moved:
        here, grown = moved[0]
        what = (f"argument '{here['name']}' ({shown(here)} at the traced sizes, "
                f"{shown(grown)} with '{symbol}' one larger)")
    else:
        here = {}
        what = f"its arguments ({node['args']} vs {twin['args']} with '{symbol}' one larger)"
    if node["op"] in RESHAPES and here.get("name") == "size":
        advice = "write that entry of the view as -1, or retrace with that dim static"
    elif node["op"] in FACTORIES and here.get("name") == "size":
        advice = ("Kiln takes a size that is a constant times symbols (T, 2*T, T*B), "
                  "not a sum like T + 1: retrace with that dim static")
    elif node["op"] in ARANGES:
        advice = ("Kiln takes a symbolic arange only as torch.arange(N), N an int that is a "
                  "constant times symbols (T, 2*T): write arange(1, T + 1) as arange(T) + 1, "
                  "or retrace with that dim static")
    else:
        advice = ("Kiln takes symbolic sizes only as view, expand and factory sizes, arange's "
                  "end and arithmetic's scalar operand: retrace with that dim static")
    return TraceError(f"node '{node['name']}' ({node['op']}) has a symbolic size baked into "
                      f"{what}: {advice}")


def _slice_length_bound(node, types):
    """For a slice to a symbolic end (c * T: position ids or a causal mask
    cut to a sequence's length), the relation that keeps it within the dim
    it slices, "T <= size // c": Kiln's kernel reads within the dim, and a
    call past it gets a static specialization, which clamps as eager does."""
    if node["op"] != "aten.slice.Tensor":
        return None
    args = {arg["name"]: arg for arg in node["args"]}
    terms = args.get("end", {}).get("symInt", {}).get("terms", [])
    if len(terms) != 1 or len(terms[0].get("symbols", [])) != 1:
        return None
    sizes = types[node["inputs"][0]]["sizes"]
    size = sizes[int(args.get("dim", {}).get("intValue", "0")) % len(sizes)]
    if "constant" not in size:
        return None
    largest = int(size["constant"]) // int(terms[0]["coefficient"])
    return {"range": {"symbol": terms[0]["symbols"][0], "max": str(largest)}}


def mark_symbolic(fn, inputs, graph, symbolic, name, arguments=None):
    """Makes the listed input dims symbolic, refusing baked-in sizes. One
    more trace per symbol, with only that symbol's dims one larger, tells
    which symbols each size moves with (S * B from S, B, 2 * S)."""
    names = {node["name"]: i for i, node in enumerate(graph["inputs"])}
    marks = {}  # (input position, dim) -> symbol
    values = {}  # symbol -> traced size
    for index, (input_name, dim, *symbol) in enumerate(symbolic):
        # An input by name (the command line's INPUT:DIM) or by position
        # (kiln.compile's dynamic=).
        if isinstance(input_name, int):
            position = input_name if 0 <= input_name < len(inputs) else None
        else:
            position = names.get(input_name, names.get(input_name + "_1"))
        if position is None:
            raise TraceError(f"the symbolic dims name input '{input_name}', which the graph lacks")
        symbol = symbol[0] if symbol else f"s{index}"
        size = inputs[position].shape[dim]
        if size < 2:
            raise TraceError(f"symbol '{symbol}' is traced at size {size}: trace symbolic dims "
                             f"at 2 or more (1 broadcasts, and Kiln specializes it apart)")
        if values.setdefault(symbol, size) != size:
            raise TraceError(f"symbol '{symbol}' is traced at sizes {values[symbol]} and {size}")
        marks[(position, dim)] = symbol
    twins = {}
    for symbol in values:
        grown = [t.clone() for t in inputs]
        for (position, dim), marked in marks.items():
            if marked == symbol:
                sizes = list(grown[position].shape)
                sizes[dim] += 1
                grown[position] = torch.zeros(sizes, dtype=inputs[position].dtype,
                                              requires_grad=inputs[position].requires_grad)
        try:
            twins[symbol] = trace_graph(fn, grown, name, arguments=arguments)[0]
        except TraceError:
            raise
        except Exception as error:  # torch's own shape checks
            raise TraceError(f"growing only '{symbol}' fails ({error}): the function ties it to "
                             f"another dim; give those dims one symbol") from error
        def shape(g):
            return [(n["op"], [len(t["sizes"]) for t in n["outputTypes"]]) for n in g["nodes"]]
        if shape(twins[symbol]) != shape(graph):
            raise TraceError(f"growing '{symbol}' traces other ops: the function branches on "
                             f"its size; trace that dim static")
    value_types = {i["value"]: i["type"] for i in graph["inputs"]}
    value_types.update((v, t) for node in graph["nodes"]
                       for v, t in zip(node["outputs"], node["outputTypes"]))
    for n, node in enumerate(graph["nodes"]):
        node_twins = {s: twin["nodes"][n] for s, twin in twins.items()}
        if node["op"] in RESHAPES or node["op"] in FACTORIES:
            relax_size_argument(node, node_twins, values)
        else:
            relax_scalar_argument(node, node_twins, values)
            bound = _slice_length_bound(node, value_types)
            if bound is not None and bound not in graph.setdefault("relations", []):
                graph["relations"].append(bound)
        for symbol, twin in node_twins.items():
            if node["args"] != twin["args"]:
                raise baked_in_error(node, twin, symbol)
        for k, types in enumerate(node["outputTypes"]):
            for dim, size in enumerate(types["sizes"]):
                base = int(size["constant"])
                term = monomial(base, {s: int(twin["outputTypes"][k]["sizes"][dim]["constant"])
                                       for s, twin in node_twins.items()}, values)
                if term is None:
                    raise TraceError(f"node '{node['name']}': dim {dim} depends on a "
                                     f"symbolic size in a way Kiln cannot express")
                if "symbols" not in term:
                    continue
                types["sizes"][dim] = {"symbol": term["symbols"][0]}
                if term["coefficient"] != "1":
                    types["sizes"][dim]["multiplier"] = term["coefficient"]
                if len(term["symbols"]) > 1:
                    types["sizes"][dim]["times"] = term["symbols"][1:]
            types.pop("strides", None)
    for (position, dim), symbol in marks.items():
        graph["inputs"][position]["type"]["sizes"][dim] = {"symbol": symbol}
        graph["inputs"][position]["type"].pop("strides", None)
    _selects_from_the_end(graph)


def _selects_from_the_end(graph):
    """x[:, -k] in a symbolic dim (a sequence's last token) as a gather at
    the largest of arange(size), plus 1 - k: a view's offsets are numbers,
    and this one is the dim's size minus k."""
    types = {i["value"]: i["type"] for i in graph["inputs"]}
    types.update((v, t) for node in graph["nodes"]
                 for v, t in zip(node["outputs"], node["outputTypes"]))
    next_id = max(types) + 1
    nodes = []
    for node in graph["nodes"]:
        args = {arg["name"]: arg for arg in node["args"]}
        source = types[node["inputs"][0]] if node["inputs"] else None
        if node["op"] != "aten.select.int" or int(args["index"]["intValue"]) >= 0:
            nodes.append(node)
            continue
        dim = int(args["dim"]["intValue"]) % len(source["sizes"])
        size = source["sizes"][dim]
        if "symbol" not in size:
            nodes.append(node)
            continue
        term = {"coefficient": str(size.get("multiplier", 1)),
                "symbols": [size["symbol"], *size.get("times", [])]}
        positions, last, index, picked = range(next_id, next_id + 4)
        next_id += 4
        name = node["name"]
        kept = [size if d != dim else {"constant": 1} for d, size in enumerate(source["sizes"])]
        nodes += [
            {"name": f"{name}_positions", "op": "aten.arange.default", "inputs": [],
             "args": [{"name": "end", "symInt": {"terms": [term]}}], "outputs": [positions],
             "outputTypes": [{"dtype": "INT64", "sizes": [size]}]},
            {"name": f"{name}_last", "op": "aten.amax.default", "inputs": [positions],
             "args": [{"name": "dim", "intList": {"values": ["0"]}},
                      {"name": "keepdim", "boolValue": True}], "outputs": [last],
             "outputTypes": [{"dtype": "INT64", "sizes": [{"constant": 1}]}]},
            {"name": f"{name}_index", "op": "aten.add.Tensor", "inputs": [last],
             "args": [{"name": "other", "intValue": str(int(args["index"]["intValue"]) + 1)}],
             "outputs": [index], "outputTypes": [{"dtype": "INT64", "sizes": [{"constant": 1}]}]},
            {"name": f"{name}_picked", "op": "aten.index_select.default",
             "inputs": [node["inputs"][0], index], "args": [{"name": "dim", "intValue": str(dim)}],
             "outputs": [picked], "outputTypes": [{"dtype": source["dtype"], "sizes": kept}]},
            {"name": name, "op": "aten.squeeze.dim", "inputs": [picked],
             "args": [{"name": "dim", "intValue": str(dim)}], "outputs": node["outputs"],
             "outputTypes": node["outputTypes"]}]
    graph["nodes"] = nodes


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


def parse_relation(text):
    """A kiln.v1.SymbolRelation (JSON) from "s0 % 8 == 0", "2 <= s0 <= 512",
    "s0 <= 512", "s0 >= 16" or "a == b"; ValueError otherwise."""
    tokens = text.replace("%", " % ").replace("<=", " <= ").replace(">=", " >= ") \
                 .replace("==", " == ").split()
    def number(token):
        return token.lstrip("-").isdigit()
    if len(tokens) == 5 and tokens[1] == "%" and tokens[3:] == ["==", "0"] and number(tokens[2]):
        return {"divisible": {"symbol": tokens[0], "divisor": tokens[2]}}
    if len(tokens) == 3 and tokens[1] == "==" and not number(tokens[0]) and not number(tokens[2]):
        return {"equal": {"lhs": tokens[0], "rhs": tokens[2]}}
    if len(tokens) == 5 and tokens[1] == tokens[3] == "<=" and number(tokens[0]) and number(tokens[4]):
        return {"range": {"symbol": tokens[2], "min": tokens[0], "max": tokens[4]}}
    if len(tokens) == 3 and tokens[1] in ("<=", ">=") and number(tokens[2]):
        bound = "max" if tokens[1] == "<=" else "min"
        return {"range": {"symbol": tokens[0], bound: tokens[2]}}
    raise ValueError(f"cannot read relation '{text}': want 'S % N == 0', 'LO <= S <= HI', "
                     "'S <= HI', 'S >= LO' or 'A == B'")
