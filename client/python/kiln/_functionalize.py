"""In-place writes in a make_fx graph made out of place: a write into an
input (an argument, a buffer, a tensor the function holds) becomes an extra
output to copy back, a training-mode batch norm's running statistics too;
constants the trace made are folded, and weights lifted into inputs.
"""
import contextlib
import operator
import warnings

import torch

from . import _random
from ._decompositions import TraceError
from ._graph import BATCH_NORM, CHECKS

aten = torch.ops.aten


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


def _storage_pointer(t):
    """Where t's memory starts (its views share it)."""
    return t.untyped_storage().data_ptr()


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
            replacement.meta = dict(node.meta)  # its value: partitioning reads it
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


def eliminate_dead_code(graph):
    graph.eliminate_dead_code(is_impure_node=lambda node: node.is_impure() or
                              node.target in CHECKS or _random.draws(node))  # as eager draws


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
