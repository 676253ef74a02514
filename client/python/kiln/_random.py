"""Random numbers under kiln.compile.

Drawn natively (codegen/ops/random.cc, client/runtime/random.h): the ops
this module rewrites (rand, randn, their _like forms, uniform, normal)
become kiln_rng.uniform and kiln_rng.normal, which draw as torch's CPU
generator draws, from its state as a tensor (torch.get_rng_state()'s
bytes). The state is threaded through them in program order, from a lifted
input to the graph's last output, written back into that input after each
call (a write, like a module's buffer). A call of the compiled function
copies torch's default generator state into that input first and sets it
back after: the graph and eager, started from the same state, draw the
same numbers and leave the same state. A torch.manual_seed(s) while traced
becomes kiln_rng.seed at its place among the draws; a
torch.set_rng_state(t) of a state t that torch.get_rng_state() returned
while traced (freeze_rng_state) makes the state the one threaded there.

bernoulli (and so dropout), exponential, cauchy, geometric, log_normal,
multinomial, randint and random_ draw the same way, then transform their
numbers as eager does (kiln/_random_draws.py). Other ops that draw run
through torch (kiln/_partition.py), drawing from torch's generator as eager
does; a graph with one of them keeps all its draws there, so that they stay
in eager's order. A function that sets the generator while traced otherwise
(torch.seed, set_rng_state of another tensor, or any setter with draws Kiln
does not make) cannot be replayed by its graph: its trace raises
TraceError, and kiln.compile runs it through torch.compile(backend="kiln")
instead, which keeps those calls in Python.
"""
import contextlib
import math
import operator
import threading

import torch
from torch.fx.experimental import proxy_tensor
from torch.fx.passes.shape_prop import _extract_tensor_metadata

from . import _checks  # noqa: F401 (defines kiln_check.check)
from . import _random_draws
from ._errors import TraceError

_tracing = threading.local()
_installed = False
_install_lock = threading.Lock()
# The generator's getters and setters, where the function may call them.
_SETTERS = [(torch, "manual_seed"), (torch, "seed"), (torch, "set_rng_state"),
            (torch, "get_rng_state"), (torch.random, "manual_seed"), (torch.random, "seed"),
            (torch.random, "set_rng_state"), (torch.random, "get_rng_state")]

_LIBRARY = torch.library.Library("kiln_rng", "DEF")
_LIBRARY.define("seed(Tensor state, int seed) -> Tensor")
_LIBRARY.define("uniform(Tensor state, SymInt[] size, ScalarType? dtype, float a, float b) "
                "-> (Tensor, Tensor)")
_LIBRARY.define("normal(Tensor state, SymInt[] size, ScalarType? dtype, float a, float b) "
                "-> (Tensor, Tensor)")
_LIBRARY.define("serial_normal(Tensor state, SymInt[] size, ScalarType? dtype, float a, "
                "float b) -> (Tensor, Tensor)")
_LIBRARY.define("integers(Tensor state, SymInt[] size, int range) -> (Tensor, Tensor)")


def _generator(state):
    generator = torch.Generator()
    generator.set_state(state)
    return generator


def _seed(state, seed):
    return torch.Generator().manual_seed(seed).get_state()


def _draw(method):
    def draw(state, size, dtype, a, b):
        generator = _generator(state)
        values = torch.empty(size, dtype=dtype)
        getattr(values, method)(a, b, generator=generator)
        return values, generator.get_state()
    return draw


def _serial_normal(state, size, dtype, a, b):
    """torch's normal_distribution<double> value by value: normal_ of a
    strided (not contiguous) float64 tensor."""
    generator = _generator(state)
    values = torch.empty(math.prod(size), 2, dtype=torch.float64)[:, 0]
    values.normal_(a, b, generator=generator)
    return values.reshape(size).to(dtype), generator.get_state()


def _integers(state, size, range_):
    """int64 in [0, range_) as torch's uniform_int_from_to draws them
    (range_ the uint64 bits, 0 for 2^64)."""
    generator = _generator(state)
    low = -(1 << 63)
    values = torch.empty(size, dtype=torch.int64)
    if range_ == 0:
        values.random_(low, None, generator=generator)
        return values, generator.get_state()
    values.random_(low, low + (range_ % (1 << 64)), generator=generator)
    return values - low, generator.get_state()


def _draw_fake(state, size, dtype, a, b):
    return torch.empty(size, dtype=dtype), torch.empty_like(state)


def _integers_fake(state, size, range_):
    return torch.empty(size, dtype=torch.int64), torch.empty_like(state)


_LIBRARY.impl("seed", _seed, "CompositeExplicitAutograd")
_LIBRARY.impl("uniform", _draw("uniform_"), "CompositeExplicitAutograd")
_LIBRARY.impl("normal", _draw("normal_"), "CompositeExplicitAutograd")
torch.library.register_fake("kiln_rng::seed", lambda state, seed: torch.empty_like(state),
                            lib=_LIBRARY)
torch.library.register_fake("kiln_rng::uniform", _draw_fake, lib=_LIBRARY)
torch.library.register_fake("kiln_rng::normal", _draw_fake, lib=_LIBRARY)
_LIBRARY.impl("serial_normal", _serial_normal, "CompositeExplicitAutograd")
_LIBRARY.impl("integers", _integers, "CompositeExplicitAutograd")
torch.library.register_fake("kiln_rng::serial_normal", _draw_fake, lib=_LIBRARY)
torch.library.register_fake("kiln_rng::integers", _integers_fake, lib=_LIBRARY)

aten = torch.ops.aten
# aten op -> (Kiln's draw, its result's mean or low argument and std or high
# argument: a position in the node's args, or a constant, with the default).
_DRAWS = {
    aten.rand.default: (torch.ops.kiln_rng.uniform.default, 0.0, 1.0),
    aten.rand_like.default: (torch.ops.kiln_rng.uniform.default, 0.0, 1.0),
    aten.uniform.default: (torch.ops.kiln_rng.uniform.default, (1, 0.0), (2, 1.0)),
    aten.uniform_.default: (torch.ops.kiln_rng.uniform.default, (1, 0.0), (2, 1.0)),
    aten.randn.default: (torch.ops.kiln_rng.normal.default, 0.0, 1.0),
    aten.randn_like.default: (torch.ops.kiln_rng.normal.default, 0.0, 1.0),
    aten.normal_.default: (torch.ops.kiln_rng.normal.default, (1, 0.0), (2, 1.0)),
    aten.normal.float_float: (torch.ops.kiln_rng.normal.default, (0, 0.0), (1, 1.0)),
}
# torch.normal with a tensor mean or std draws standard normals of the
# result's shape, then scales them by std and adds mean.
_NORMAL_OF_TENSORS = (aten.normal.Tensor_float, aten.normal.float_Tensor,
                      aten.normal.Tensor_Tensor)


def draws(node):
    """Whether FX `node` draws random numbers. Attention's schema may draw
    (dropout); without dropout it does not (the form Kiln lowers natively)."""
    if node.target == torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default:
        return bool(node.kwargs.get("dropout_p", node.args[3] if len(node.args) > 3 else 0.0))
    return torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())


def _native(node):
    """Whether Kiln draws `node`'s numbers itself: one of the ops above, of
    float32 or float64, of static sizes, from torch's default generator, or
    one of _random_draws'."""
    if node.target in _random_draws.REWRITES:
        return _random_draws.native(node)
    value = node.meta.get("val")
    return (node.target in _DRAWS or node.target in _NORMAL_OF_TENSORS) and \
        isinstance(value, torch.Tensor) and value.dtype in (torch.float32, torch.float64) and \
        all(isinstance(size, int) for size in value.shape) and \
        node.kwargs.get("generator") is None


def _recording(name, setter):
    def recording_setter(*args, **kwargs):
        result = setter(*args, **kwargs)
        calls = getattr(_tracing, "calls", None)
        if calls is not None:
            graph = getattr(_tracing, "graph", None)
            drawn = sum(draws(n) for n in graph.nodes) if graph is not None else 0
            calls.append((name, result if name == "get_rng_state" else args, drawn))
        return result
    recording_setter.__wrapped__ = setter
    return recording_setter


def note_tracer():
    """Called as make_fx starts tracing the function: the graph it records
    into, whose draws setters_recorded counts (the setters may be called
    where the tracer is out of reach: OpInfo's freeze_rng_state calls them
    under no_dispatch)."""
    if getattr(_tracing, "calls", None) is not None:
        mode = proxy_tensor.get_proxy_mode()
        _tracing.graph = mode.tracer.graph if mode is not None else None


@contextlib.contextmanager
def setters_recorded():
    """Within (on this thread), the generator's getters and setters called
    are listed in the list yielded: (name, arguments or, for
    get_rng_state, the state returned, how many draws the graph being
    traced held then). torch's generator is left as it was."""
    global _installed
    with _install_lock:
        if not _installed:
            for module, name in _SETTERS:
                setattr(module, name, _recording(name, getattr(module, name)))
            _installed = True
    outer = getattr(_tracing, "calls", None), getattr(_tracing, "graph", None)
    _tracing.calls, _tracing.graph = calls, _ = [], None
    state = torch.default_generator.get_state()
    try:
        yield calls
    finally:
        _tracing.calls, _tracing.graph = outer
        torch.default_generator.set_state(state)


def check_replayable(gm, calls):
    """TraceError when the traced `gm` draws random numbers and the
    function set the generator while traced (`calls`: setters_recorded's)
    other than by torch.manual_seed or by torch.set_rng_state of a state
    torch.get_rng_state returned (as freeze_rng_state does). What it did is
    gm.meta["kiln_seeds"]: (draws before, event), the event a seed, ("get",
    index) or ("set", index of the get whose state it restores)."""
    if not any(name != "get_rng_state" for name, _, _ in calls) or \
            not any(draws(node) for node in gm.graph.nodes):
        return
    events, gets = [], []
    for name, args, drawn in calls:
        if name == "get_rng_state":
            events.append((drawn, ("get", len(gets))))
            gets.append(args)
        elif name == "set_rng_state" and any(args[0] is got for got in gets):
            events.append((drawn, ("set", next(i for i, got in enumerate(gets)
                                               if args[0] is got))))
        elif name == "manual_seed":
            events.append((drawn, _seed_bits(int(args[0]))))
        else:
            raise _not_replayable(name)
    gm.meta["kiln_seeds"] = events
    gm.meta["kiln_setter"] = next(name for name, _, _ in calls if name != "get_rng_state")


def _not_replayable(setter):
    return TraceError(f"the function calls torch.{setter} while tracing and draws random "
                      f"numbers: a Kiln graph records ops, not changes of torch's generator")


def _seed_bits(seed):
    """torch.manual_seed's uint64 seed (a negative one is 2^64 + seed, as
    torch maps it) as the int64 of its bits, a graph's int."""
    return seed - (1 << 64) if seed >= 1 << 63 else seed


def _argument(node, spec):
    if not isinstance(spec, tuple):
        return spec
    position, default = spec
    name = node.target._schema.arguments[position].name
    if position < len(node.args):
        return float(node.args[position])
    return float(node.kwargs.get(name, default))


def _typed(node, value):
    """`node`, which the rewrite made, with the value it has (for the
    passes after: functionalize reads tensor_meta, partitioning val)."""
    node.meta["val"] = value
    node.meta["tensor_meta"] = _extract_tensor_metadata(value)
    return node


class _Emitter:
    """Adds nodes to `graph` before `before`: draws from the generator state
    (`state`, then the state after each draw) and the ops on them."""

    def __init__(self, graph, before, state, state_value):
        self.graph, self.before, self.state, self._state_value = graph, before, state, state_value

    def draw(self, draw, shape, dtype, *args):
        """The node of the values of kiln_rng op `draw` (its arguments after
        the state and size: `args`), drawn from the state."""
        value = torch.empty(shape, dtype=dtype)
        with self.graph.inserting_before(self.before):
            result = self.graph.call_function(draw, (self.state, list(shape)) + args)
            result.meta["val"] = (value, self._state_value)
            values = _typed(self.graph.call_function(operator.getitem, (result, 0)), value)
            self.state = _typed(self.graph.call_function(operator.getitem, (result, 1)),
                                self._state_value)
        return values

    def op(self, target, args, shape, dtype, kwargs=None, value=None):
        """The node of `target`(*args, **kwargs), whose value has `shape` and
        `dtype` (or is `value`)."""
        with self.graph.inserting_before(self.before):
            node = self.graph.call_function(target, tuple(args), kwargs or {})
        if value is not None:
            node.meta["val"] = value
            return node
        return _typed(node, torch.empty(shape, dtype=dtype))

    def check(self, ok, error, message):
        """A kiln_check.check of the bool node `ok`: eager's `error` with
        `message` where any element is false (kiln/_checks.py)."""
        with self.graph.inserting_before(self.before):
            self.graph.call_function(torch.ops.kiln_check.check.default, (ok, error, message))

    def cast(self, node, dtype):
        """`node` as `dtype`."""
        value = node.meta["val"]
        if value.dtype == dtype:
            return node
        return self.op(aten._to_copy.default, (node,), list(value.shape), dtype,
                       kwargs={"dtype": dtype})


def thread_generator(gm):
    """Rewrites the draws of `gm` into Kiln's, threading torch's generator
    state through them from a get_attr tensor `kiln_generator` (copied
    in before a call), and returns the node of the state after them (an
    output to write back), or None when `gm` draws nothing or draws what
    Kiln does not (then its draws run through torch, in order). The state
    after them is the graph's last output, before the writes functionalize
    adds."""
    graph = gm.graph
    seeds = gm.meta.get("kiln_seeds", [])
    drawing = [node for node in graph.nodes if draws(node)]
    if not drawing and not seeds:
        return None
    if not all(_native(node) for node in drawing):
        if seeds:  # and one Kiln does not draw itself
            raise _not_replayable(gm.meta["kiln_setter"])
        gm.meta.setdefault("kiln_declined", {}).update(_random_draws.declined())
        return None
    gm.register_buffer("kiln_generator", torch.default_generator.get_state())
    first = next(node for node in graph.nodes if node.op != "placeholder")
    with graph.inserting_before(first):
        state = graph.get_attr("kiln_generator")
    pending = list(seeds)
    state_value = torch.empty(len(gm.kiln_generator), dtype=torch.uint8)

    got = []  # the state at each torch.get_rng_state

    def seeded_before(count, before):
        nonlocal state
        while pending and pending[0][0] <= count:
            event = pending.pop(0)[1]
            if isinstance(event, int):
                with graph.inserting_before(before):
                    state = graph.call_function(torch.ops.kiln_rng.seed.default, (state, event))
                _typed(state, state_value)
            elif event[0] == "get":
                got.append(state)
            else:
                state = got[event[1]]
    for count, node in enumerate(drawing):
        seeded_before(count, node)
        value = node.meta["val"]
        if node.target in _random_draws.REWRITES:
            emit = _Emitter(graph, node, state, state_value)
            values = _random_draws.rewrite(emit, node)
            state = emit.state
            if node.target._schema.name.endswith("_"):  # in place
                with graph.inserting_before(node):
                    values = _typed(graph.call_function(aten.copy_.default,
                                                        (node.args[0], values)), value)
            node.replace_all_uses_with(values)
            graph.erase_node(node)
            continue
        with graph.inserting_before(node):
            if node.target in _DRAWS:
                draw, a, b = _DRAWS[node.target]
                a, b = _argument(node, a), _argument(node, b)
            else:
                draw, a, b = torch.ops.kiln_rng.normal.default, 0.0, 1.0
            result = graph.call_function(draw, (state, list(value.shape), value.dtype, a, b))
            result.meta["val"] = (value, state_value)
            values = _typed(graph.call_function(operator.getitem, (result, 0)), value)
            state = _typed(graph.call_function(operator.getitem, (result, 1)), state_value)
            if node.target in _NORMAL_OF_TENSORS:
                mean, std = node.args[0], node.args[1]
                scaled = _typed(graph.call_function(aten.mul.Tensor, (values, std)), value)
                values = _typed(graph.call_function(aten.add.Tensor, (scaled, mean)), value)
            elif node.target in (aten.uniform_.default, aten.normal_.default):
                values = _typed(graph.call_function(aten.copy_.default, (node.args[0], values)),
                                value)
        node.replace_all_uses_with(values)
        graph.erase_node(node)
    output = next(node for node in graph.nodes if node.op == "output")
    seeded_before(len(drawing), output)
    output.args = (list(output.args[0]) + [state],)
    return state


def write_generator(gm, lifted):
    """Once the generator state's get_attr is lifted (into `lifted`, the
    graph's last inputs): marks its input in `lifted` (generator_of finds
    it) and returns that input's position, the first write (of the output
    thread_generator added after the function's results)."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    position = next(p for p, node in enumerate(placeholders) if node.target == "kiln_generator")
    mark_generator(lifted[position - len(placeholders)])
    return position


def mark_generator(tensor):
    """Marks `tensor`, a graph's lifted input, as torch's generator state."""
    tensor.kiln_generator = True


def generator_index(lifted):
    """The index of the generator state among a graph's lifted inputs, or None."""
    return next((i for i, t in enumerate(lifted) if getattr(t, "kiln_generator", False)), None)


def generator_of(lifted):
    """The generator state among a graph's lifted inputs, or None."""
    index = generator_index(lifted)
    return lifted[index] if index is not None else None


@contextlib.contextmanager
def generator_shared(state):
    """Within, `state` (a graph's generator state input, or None: nothing
    to do) holds torch's default generator state; after, torch's generator
    holds what the graph wrote back into it."""
    if state is not None:
        state.copy_(torch.default_generator.get_state())
    yield
    if state is not None:
        torch.default_generator.set_state(state)
