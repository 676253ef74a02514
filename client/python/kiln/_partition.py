"""Partitioned graphs: a function whose traced graph holds ops Kiln does not
compile runs them through torch, and Kiln compiles the regions between them
(kiln.compile's default; strict=True refuses such a graph instead).

An op runs through torch when Kiln's op table (the extension's op_table(),
what kilnd's type checker reads) lacks it, when a tensor it takes or makes
has a dtype Kiln lacks, when its output's shape depends on its
input's values (nonzero, masked_select, unique: torch.Tag.dynamic_output_shape),
when it draws random numbers (from torch's generator, as eager draws them),
when Kiln's decomposition of it declined the call (gm.meta["kiln_declined"]),
or when kilnd refused it before in this process. A data-dependent op Kiln
has a form of (kiln/_data_dependent.py) is compiled as a segment of its
own, its results cut to their counts. torch.fx's
CapabilityBasedPartitioner groups the other ops into the largest regions
that keep the graph acyclic; each region is a graph module that
kiln.compile compiles (strict) at its first call, under its own cache key,
so a fresh process hits each one as it hits any graph.

The function is traced with make_fx's symbolic sizes (with real tensors, at
their sizes, when it holds an op fake tensors cannot run), so a size that
follows a data-dependent op (nonzero's count) is an unbacked SymInt (u0)
and the ops after it take their sizes from their inputs (aten.sym_size),
not a number seen once. A region input dim whose size holds such a symbol,
or a symbol of `dynamic`, is a Kiln symbol: one artifact serves every count,
as it serves every batch, where a compile per size would compile again for
each count the data gives. Sizes are duplicated into each region that reads
them, so regions pass tensors only.
"""
import operator
import re
import threading

import torch
from torch._subclasses.fake_tensor import DynamicOutputShapeException, UnsupportedOperatorException
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from . import _data_dependent, _functionalize, _graph, _random, _tracing

_lock = threading.Lock()
_op_table = None
# An op's signature (signature()) -> why kilnd refused it, for ops the op
# table lists but takes only some arguments of (a sort past 4,096
# elements): kilnd is asked once per process.
_refused = {}


def _ops():
    global _op_table
    if _op_table is None:
        from . import _native
        _op_table = set(_native().op_table())
    return _op_table


def signature(node):
    """A node's op, with its arguments' dtypes and shapes and its other
    arguments: what kilnd's answer for it depends on."""
    def described(value):
        if isinstance(value, torch.fx.Node):
            value = _value(value)
        if isinstance(value, torch.SymInt):  # the size it was traced at
            return value.node.hint if value.node.hint is not None else str(value)
        if isinstance(value, torch.Tensor):
            return (str(value.dtype), tuple(described(size) for size in value.shape))
        if isinstance(value, (tuple, list)):
            return tuple(described(part) for part in value)
        return repr(value)
    return (str(node.target), described(node.args), described(tuple(sorted(node.kwargs.items()))))


def refuse(gm, ops, reason):
    """Records that kilnd refused the nodes of `gm` that call `ops`
    (UnsupportedOpError.ops) for `reason`; whether there were any not
    recorded before."""
    added = False
    with _lock:
        for node in gm.graph.nodes:
            if node.op == "call_function" and str(node.target) in ops and \
                    signature(node) not in _refused:
                _refused[signature(node)] = reason
                added = True
    return added


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for t in value if isinstance(t, torch.Tensor)]
    return []


def _value(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def why_torch(node):
    """Why `node` (a call_function) runs through torch, or None when Kiln
    compiles it."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return f"{target} is not an ATen op"
    name = str(target)
    declined = getattr(node.graph.owning_module, "meta", {}).get("kiln_declined", {})
    if name in declined:
        return declined[name]
    if torch.Tag.nondeterministic_seeded in target.tags:
        return "it draws random numbers, from torch's generator as in eager"
    if name not in _ops():
        if torch.Tag.dynamic_output_shape in target.tags:
            return "the shape of its result depends on its input's values"
        return "Kiln's op table lacks it"
    if _refused and signature(node) in _refused:
        return _refused[signature(node)]
    inputs = [_value(arg) for arg in node.all_input_nodes]
    for tensor in _tensors(_value(node)) + [t for value in inputs for t in _tensors(value)]:
        if tensor.dtype not in _graph.DTYPES:
            return f"Kiln compiles no {str(tensor.dtype).removeprefix('torch.')} tensors"
    return None


def refused_nodes(gm):
    """{node: why} of the nodes of `gm` that run through torch (those whose
    value the trace could not record, a sparse tensor, among them)."""
    reasons = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem and \
                (_tensors(_value(node)) or _value(node) is None or
                 node.target in _functionalize.CHECKS) and \
                (reason := why_torch(node)) is not None:
            reasons[node] = reason
    return reasons


def _is_size(node):
    """A node computing a size (aten.sym_size, SymInt arithmetic), not a tensor."""
    return isinstance(_value(node), (int, torch.SymInt)) and not isinstance(_value(node), bool)


def _sizes_per_reader(gm):
    """Each size node read by several nodes is copied for each, so a region
    computes the sizes it reads from its own inputs."""
    graph = gm.graph
    for node in reversed(list(graph.nodes)):
        if not _is_size(node) or len(node.users) < 2:
            continue
        for user in list(node.users)[1:]:
            with graph.inserting_before(user):
                copy = graph.node_copy(node)
            user.replace_input_with(node, copy)


class _Support(OperatorSupportBase):
    def __init__(self, torch_nodes):
        self._torch = torch_nodes

    def is_node_supported(self, submodules, node):
        if node.op != "call_function" or node in self._torch:
            return False
        if node.target is operator.getitem:
            return node.args[0] not in self._torch
        if _is_size(node):  # with its reader
            return all(self.is_node_supported(submodules, user) for user in node.users)
        return _tensors(_value(node)) != []


class Segment:
    """A region Kiln compiles: its graph module, compiled at its first call.
    The partitioned graph module holds it as a plain attribute, not a
    submodule, so calling it costs one Python call, not nn.Module's."""

    def __init__(self, module, name, placeholders, options):
        self.module = module
        self.name = name
        self.compiled = None
        self._options = options
        self._lock = threading.Lock()
        # Tensor input -> {dim: Kiln symbol}: dims whose size holds an
        # unbacked symbol (a data-dependent size) or one of `dynamic`'s.
        self.dynamic = {}
        for position, node in enumerate(placeholders):
            value = _value(node)
            if not isinstance(value, torch.Tensor):
                continue
            for dim, size in enumerate(value.shape):
                symbol = _symbol_of(size, options["symbols"])
                if symbol is not None:
                    self.dynamic.setdefault(position, {})[dim] = symbol

    def __call__(self, *args):
        if self.compiled is None:
            with self._lock:
                if self.compiled is None:
                    self.compiled = self._compile(args)
        return self.compiled(*args)

    def _compile(self, args):
        from . import compile
        options = self._options
        symbols = {s for dims in self.dynamic.values() for s in dims.values()}
        relations = [text for text in options["relations"] or []
                     if set(re.findall(r"[A-Za-z_]\w*", text)) <= symbols]
        return compile(self.module, _at_least_two(args, self.dynamic), name=self.name,
                       dynamic=self.dynamic or None, relations=relations or None,
                       target=options["target"], on_stride_miss=options["on_stride_miss"],
                       strict=True)


def _symbol_of(size, symbols):
    """The Kiln symbol of a traced size: a data-dependent size's own (u0),
    or the name `dynamic` gave an input dim's; None for a static size."""
    if not isinstance(size, torch.SymInt):
        return None
    expression = size.node.expr
    free = {str(s) for s in expression.free_symbols}
    if not any(s in symbols or s.startswith("u") for s in free):
        return None
    text = str(expression.xreplace({s: s.func(symbols.get(str(s), str(s)))
                                    for s in expression.free_symbols}))
    return re.sub(r"\W+", "_", text).strip("_")


def _at_least_two(args, dynamic):
    """The example arguments to trace a segment with: a symbolic dim traced
    at size 0 or 1 (Kiln traces symbols at 2 or more) grown to 2, with
    zeros, in every argument that has that symbol."""
    small = {symbol for position, dims in dynamic.items() for dim, symbol in dims.items()
             if args[position].shape[dim] < 2}
    if not small:
        return list(args)
    grown = list(args)
    for position, dims in dynamic.items():
        if any(symbol in small for symbol in dims.values()):
            sizes = list(args[position].shape)
            for dim, symbol in dims.items():
                if symbol in small:
                    sizes[dim] = 2
            grown[position] = torch.zeros(sizes, dtype=args[position].dtype)
    return grown


class Partitioned:
    """A function whose graph runs partly through torch: call it like the
    original."""

    def __init__(self, module, lifted, structure, writes, layout, segments, torch_ops):
        self._module = module
        self._lifted = lifted
        self._generator = _random.generator_of(lifted)  # torch's generator state, if it draws
        self._structure = structure
        self._writes = writes
        self._layout = layout
        self._count = len(layout.names) if layout.plain else None  # tensors, passed as they are
        self.segments = segments
        self.torch_ops = torch_ops  # [(node name, ATen op, why)]

    # make_fx traced the graph below autograd (a gradient the function takes
    # is in it as ops), so its ops through torch run there too, skipping
    # autograd's kernels (a custom op's is Python).
    def __call__(self, *args, **kwargs):
        if not kwargs and len(args) == self._count and \
                all(isinstance(arg, torch.Tensor) for arg in args):
            inputs = [*args, *self._lifted]  # the traced layout: nothing to flatten
        else:
            inputs = self._inputs(args, kwargs)
        if self._generator is None and not self._writes:
            with torch._C._AutoDispatchBelowAutograd():
                outputs = self._module.forward(*inputs)
        else:
            with _random.generator_shared(self._generator):
                with torch._C._AutoDispatchBelowAutograd():
                    outputs = self._module.forward(*inputs)
                with torch.no_grad():
                    for position, value in zip(self._writes, outputs[-len(self._writes):]):
                        inputs[position].copy_(value)
            outputs = outputs[:len(outputs) - len(self._writes)]
        if self._structure == "tensor":
            return outputs[0]
        from . import unflatten
        return unflatten(iter(outputs), self._structure)

    def _inputs(self, args, kwargs):
        """The graph's inputs of a call whose arguments have the traced
        layout; a GuardError for any other."""
        from . import GuardError, _arguments
        tensors, layout = _arguments.flatten(self._layout.signature, args, kwargs)
        if layout.key != self._layout.key:
            raise GuardError(f"{self._layout.difference(layout)}: a partitioned graph runs the "
                             f"arguments it was compiled with; compile one for each")
        return list(tensors) + self._lifted

    def explain(self):
        lines = [f"partitioned: {len(self.segments)} segment{'s' * (len(self.segments) != 1)} "
                 f"compiled by Kiln, {len(self.torch_ops)} op"
                 f"{'s' * (len(self.torch_ops) != 1)} through torch"]
        lines += [f"  torch: node '{node}' ({op}): {why}" for node, op, why in self.torch_ops]
        for segment in self.segments:
            key = segment.compiled.artifact().get("key", "") if segment.compiled else "not compiled"
            lines.append(f"  kiln:  {segment.name}: artifact {key}")
        return "\n".join(lines)


def _alone(gm, node):
    """Replaces `node` by a call of a graph module of its own, which
    computes node's result from its tensor arguments."""
    graph = torch.fx.Graph()
    arguments = {}
    for argument in node.all_input_nodes:
        arguments[argument] = graph.placeholder(argument.name)
        arguments[argument].meta = dict(argument.meta)
    graph.output(graph.call_function(node.target, *torch.fx.map_arg(
        (node.args, node.kwargs), arguments.__getitem__)))
    name = f"kiln_{node.name}"
    gm.add_submodule(name, torch.fx.GraphModule(torch.nn.Module(), graph))
    with gm.graph.inserting_before(node):
        call = gm.graph.call_module(name, tuple(arguments))
    call.meta = dict(node.meta)
    node.replace_all_uses_with(call)
    gm.graph.erase_node(node)


def compile(fn, inputs, layout, name, *, dynamic, relations, target, on_stride_miss):
    """A Partitioned of fn(*inputs): traced with symbolic sizes, its ops
    Kiln lacks left to torch, each region compiled by kiln.compile.
    `dynamic` is [(input position or name, dim, symbol)]. A region kilnd
    refuses for an op it takes only some arguments of is split again
    around that op."""
    from . import UnsupportedOpError
    tracing_mode = "symbolic"
    while True:
        try:
            gm, lifted, structure, writes, _ = _tracing.trace_module(
                fn, inputs, arguments=None if layout.plain else layout, write_back=True,
                tracing_mode=tracing_mode, declining=True)
        except (DynamicOutputShapeException, UnsupportedOperatorException):
            if tracing_mode != "symbolic":
                raise
            # An op fake tensors cannot run (geqrf, histogram) or size
            # (lstsq, ctc_loss): traced with the real inputs, at their sizes.
            tracing_mode = None
            continue
        partitioned = _partitioned(gm, lifted, structure, writes, layout, name, dynamic,
                                   {"relations": relations, "target": target,
                                    "on_stride_miss": on_stride_miss})
        try:
            with torch.no_grad():
                partitioned._module(*(list(inputs) + lifted))  # compiles (or hits) each segment
            return partitioned
        except UnsupportedOpError as error:
            segment = next(s for s in partitioned.segments if s.compiled is None)
            if not error.ops or not refuse(segment.module, error.ops, str(error)):
                raise


def _partitioned(gm, lifted, structure, writes, layout, name, dynamic, options):
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    symbols = {}  # symbol of an input dim -> the name `dynamic` gives it
    for position, dim, symbol in dynamic:
        if isinstance(position, str):
            position = layout.input_names().index(position)
        size = _value(placeholders[position]).shape[dim]
        if isinstance(size, torch.SymInt):
            symbols[str(size.node.expr)] = symbol
    torch_nodes = refused_nodes(gm)
    # Data-dependent ops Kiln has a form of, of inputs with no Kiln symbol
    # (a count, a dim of `dynamic`): a segment each (their results its
    # outputs), outside the partitions.
    bounded = {node for node in torch_nodes
               if _data_dependent.formable(node) and signature(node) not in _refused and
               all(_symbol_of(size, symbols) is None for argument in node.all_input_nodes
                   for tensor in _tensors(_value(argument)) for size in tensor.shape)}
    torch_ops = [(node.name, str(node.target), why) for node, why in torch_nodes.items()
                 if node not in bounded]
    _sizes_per_reader(gm)
    partitioner = CapabilityBasedPartitioner(gm, _Support(torch_nodes),
                                             allows_single_node_partition=True)
    partitions = [p for p in partitioner.propose_partitions()
                  if any(_tensors(_value(node)) for node in p.nodes)]
    fused = partitioner.fuse_partitions(partitions)
    names = {node.name for node in bounded}
    for node in [node for node in fused.graph.nodes if node.name in names]:
        _alone(fused, node)
    options = {**options, "symbols": symbols}
    segments = []
    for node in fused.graph.nodes:
        if node.op != "call_module":
            continue
        module = fused.get_submodule(node.target)
        module_placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
        segment = Segment(module, f"{name}_segment{len(segments)}", module_placeholders, options)
        delattr(fused, node.target)
        setattr(fused, node.target, segment)
        segments.append(segment)
    fused.recompile()
    return Partitioned(fused, lifted, structure, writes, layout, segments, torch_ops)
