"""Traces a PyTorch function or nn.Module with make_fx into a Kiln graph (a
kiln.v1.Graph). This module runs make_fx and walks its graph; the parts
are modules of their own: _functionalize (in-place writes, lifted
weights), _graph (FX nodes as kiln.v1.Graph nodes), _symbols (symbolic
dims) and _references (eager references for graph files).

Used in process by kiln.compile (trace_graph) and by the command line
tools/trace/kiln_trace.py (_references.trace, sized_references), whose
genrules trace the public workloads at build time. Graphs Kiln cannot take
raise TraceError, whose message names the node.

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
import contextlib
import dataclasses
import functools
import inspect
import itertools
import linecache
import os
import traceback

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from . import _errors, _random, _symbols
from ._decompositions import DECOMPOSITIONS, TraceError, TracingMode  # noqa: F401 (TraceError)
from ._fake_shapes import fake_shapes
from ._functionalize import (CHECKS, _changes_undone, _fold_trace_constants, _is_in_place,
                             _module_tensors, _scalars_second, _tensors_held_by, _value_type,
                             eliminate_dead_code, functionalize, lift_constants,
                             warn_running_statistics)
from ._graph import _is_view, alias_writes, to_kiln, to_kiln_half

aten = torch.ops.aten


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
        with fake_shapes(), _random.setters_recorded() as calls:
            gm = make_fx(fn, decomposition_table=DECOMPOSITIONS,
                         tracing_mode=tracing_mode)(*inputs)
        _random.check_replayable(gm, calls)
        return gm
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
        _random.note_tracer()
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
                                     f"that functionalize leaves in place (as ATen's "
                                     f"_pad_circular does): Unimplemented")
    return gm, structure[0]


def trace_graph(fn, inputs, name, symbolic=None, relations=None, arguments=None, traced=None):
    """(kiln.v1.Graph, lifted, structure, writes) for fn(*inputs) without
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


def _refuse_random(gm):
    """Refuses ops that draw random numbers (dropout in training mode,
    randn_like, ...): an artifact is a pure function of its inputs."""
    for node in gm.graph.nodes:
        if _random.draws(node):
            declined = gm.meta.get("kiln_declined", {}).get(str(node.target))
            if declined:
                raise TraceError(f"node '{node.name}' ({node.target}) draws random numbers: "
                                 f"{declined}; compile without strict=True to draw them through "
                                 f"torch")
            raise TraceError(f"node '{node.name}' ({node.target}) draws random numbers, and a Kiln "
                             f"artifact is a pure function of its inputs: call model.eval() for "
                             f"dropout, pass the noise in as an input, or compile without "
                             f"strict=True to draw them through torch")


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


def trace_module(fn, inputs, arguments=None, write_back=False, tracing_mode=None,
                 declining=False):
    """(the graph module that computes the graph's outputs from list(inputs)
    + lifted, lifted, structure, writes, whether it is float16): make_fx's
    graph, functionalized, its weights and buffers lifted into inputs.
    With `write_back`, inputs fn changes in place are outputs too (writes:
    functionalize's); else such a change is refused. `tracing_mode` is
    make_fx's ("symbolic": sizes as SymInts, a data-dependent size an
    unbacked one); by default "real", or "fake" for float16. With
    `declining`, a call Kiln's decompositions cannot take is traced whole and
    gm.meta["kiln_declined"] says why ({op: why}), for partitioning."""
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
    with (_errors.declining() if declining else contextlib.nullcontext({})) as declined:
        try:
            gm, structure = trace_with(names, state)
        except FunctionalizeError:
            if half or not write_back or not isinstance(fn, torch.nn.Module):
                raise
            names, state = _module_state(fn)
            gm, structure = trace_with(names, state)
    gm.meta["kiln_declined"] = declined
    drawn = _random.thread_generator(gm)  # the generator's state after the draws Kiln makes
    held = _tensors_held_by(fn)
    written = functionalize(gm, held if write_back else None)
    _fold_trace_constants(gm, held)
    _scalars_second(gm)
    warn_running_statistics(gm.graph)
    writes = _input_positions(gm, written)
    lifted = state + lift_constants(gm)
    if drawn is not None:
        writes.insert(0, _random.write_generator(gm, lifted))
    eliminate_dead_code(gm.graph)
    gm.recompile()
    return gm, lifted, structure, writes, half


def _trace_graph(fn, inputs, name, symbolic=None, relations=None, weights_seed=None,
                 arguments=None, write_back=False, traced=None):
    """(graph, lifted, the graph module that computes the graph's outputs
    from list(inputs) + lifted, structure, writes): trace_module's (or
    `traced`, what it returned), as a kiln.v1.Graph. With `weights_seed`,
    the lifted weights are replaced by other random values of the same
    shapes."""
    gm, lifted, structure, writes, half = traced or trace_module(fn, inputs, arguments,
                                                                 write_back)
    _refuse_random(gm)
    if weights_seed is not None:
        generator = torch.Generator().manual_seed(weights_seed)
        # Same scale as the originals, so activations stay in range.
        lifted = [(torch.randn(w.shape, generator=generator) * w.float().std() + w.float().mean())
                  .to(w.dtype) if w.is_floating_point() and w.numel() > 1 else w for w in lifted]
    all_inputs = list(inputs) + lifted
    graph = to_kiln_half(gm, all_inputs, name) if half else to_kiln(gm, all_inputs, name)
    if symbolic:
        _symbols.mark_symbolic(fn, inputs, graph, symbolic, name, arguments)
    if relations:
        # Given first, then those mark_symbolic found.
        found = list(graph.relations)
        graph.ClearField("relations")
        graph.relations.extend([*relations, *found])
    alias_writes(graph, writes)
    return graph, lifted, gm, structure, writes


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
