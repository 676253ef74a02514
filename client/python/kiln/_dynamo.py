"""Kiln as a torch.compile backend: torch.compile(model, backend=kiln.backend)
or backend="kiln" (the torch_dynamo_backends entry point names kiln.backend).

Dynamo hands the backend one FX graph per region of Python it captured
(several after a graph break), each with its example inputs; each graph is
compiled with Kiln on its own and cached by kilnd under its own key.

  - Inference (grad mode off, or no input that requires grad) compiles the
    graph as it is: no backward graph.
  - Training (an input requires grad while grad mode is on) goes through
    AOTAutograd (aot_module_simplified) with torch's core ATen
    decompositions and Kiln's, and Kiln compiles the forward graph and the
    backward graph.

A graph input dim that Dynamo made symbolic (dynamic=True, mark_dynamic, or
its automatic dynamism after a recompile) is a Kiln symbol of the same name,
bounded by its value range in Dynamo's ShapeEnv as Kiln relations; two dims
Dynamo found equal share one symbol. A symbol the ShapeEnv knows a multiple
of d (s0 % 8 == 0) is d times a Kiln symbol (s0_div8), its dims split. A SymInt
graph input that is such a dim's size is computed from that dim, so one
artifact serves every size. One that is no input's size (an int argument
Dynamo made dynamic) is passed as a constant: Kiln compiles a graph per value
(up to 8). A graph's SymInt results are computed from its inputs' sizes.
"""
import inspect
import operator
import threading

import torch

# options= of torch.compile(backend="kiln"), with their defaults: as kiln.compile's.
OPTIONS = {
    "target": "native",            # "native", "x86-64-v3" or "x86-64-v4"
    "fallback": "raise",           # "eager": run a graph Kiln cannot compile as Dynamo gave it
    "on_stride_miss": "specialize",  # or "copy" (kiln.compile)
    "relations": None,             # more relations of Dynamo's symbols: ["s0 % 8 == 0"]
    "name": None,                  # the graphs' name in kilnd (`kiln ls`); else "dynamo"
    "strict": False,               # True: refuse a graph with ops Kiln lacks (kiln.compile)
}


# Set while kiln.compile compiles a graph Dynamo captured: a graph that it
# cannot trace is then not handed to Dynamo again (Split).
_compiling = threading.local()


def compiling():
    """Whether this thread is compiling a graph Dynamo captured."""
    return getattr(_compiling, "active", False)


class Split:
    """What non-strict kiln.compile returns for a function make_fx cannot
    trace whole (it reads a tensor's value: .item(), an if on a tensor,
    torch.equal; it seeds torch's generator; it returns no tensors; it takes
    a sparse tensor): torch.compile(backend="kiln") runs
    it, Dynamo splitting it at those points and Kiln compiling each graph
    Dynamo captures, partitioned as kiln.compile's; a graph Kiln cannot
    take runs as Dynamo gave it. Call it like the function."""

    def __init__(self, fn, reason, options):
        self.reason = reason
        self.graphs = []  # each graph Dynamo captured, as the backend took it

        def kiln_backend(gm, example_inputs):
            graph = backend(gm, example_inputs, options={**options, "fallback": "eager"})
            self.graphs.append(graph)
            return graph
        self._function = torch.compile(fn, backend=kiln_backend)

    def __call__(self, *args, **kwargs):
        return self._function(*args, **kwargs)

    def explain(self):
        from . import _Eager, _partition
        lines = [f"split by torch.compile: {self.reason}",
                 f"  {len(self.graphs)} graph{'s' * (len(self.graphs) != 1)} captured by Dynamo"]
        for number, graph in enumerate(self.graphs):
            compiled = getattr(graph, "compiled", None)
            if isinstance(compiled, _Eager):
                text = f"through torch: {compiled._error}"
            elif isinstance(compiled, _partition.Partitioned):
                text = compiled.explain().replace("\n", "\n    ")
            elif compiled is not None:
                text = f"compiled by Kiln: artifact {compiled.artifact().get('key', '')}"
            else:
                text = "computes no tensors, or not called yet"
            lines.append(f"  graph {number}: {text}")
        return "\n".join(lines)


def backend(gm, example_inputs, *, options=None, mode=None, name=None):
    """Compiles one graph Dynamo captured (docs/PYTHON.md,
    "torch.compile(backend="kiln")"). `options` are OPTIONS' keys; `mode`
    and `name` are what torch.compile passes for its own arguments."""
    if mode is not None:
        raise ValueError(f"torch.compile(backend='kiln') takes no mode (given {mode!r}): Kiln "
                         f"compiles one way; its choices are options=: {', '.join(OPTIONS)}")
    options = {**OPTIONS, **_checked(options or {})}
    options["name"] = options["name"] or name or "dynamo"
    if torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs):
        return _training(gm, example_inputs, options)
    return _Graph(gm, example_inputs, options, options["name"])


def _checked(options):
    """`options`, refused with what is known when a key is unknown or a
    value is not one the option takes."""
    from . import _check_on_stride_miss, _graph
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"torch.compile(backend='kiln') got unknown option"
                         f"{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                         f"it takes {', '.join(OPTIONS)}")
    if options.get("fallback", "raise") not in ("raise", "eager"):
        raise ValueError(f"option fallback is 'raise' or 'eager', not {options['fallback']!r}")
    _check_on_stride_miss(options.get("on_stride_miss", "specialize"))
    for relation in options.get("relations") or []:
        _graph.parse_relation(relation)
    return options


def _training(gm, example_inputs, options):
    """AOTAutograd's forward and backward graphs of `gm`, each compiled with
    Kiln when first called."""
    from torch._inductor.decomposition import select_decomp_table
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

    from ._decompositions import DECOMPOSITIONS

    def compiler(part):
        def compile_part(graph, inputs):
            return make_boxed_func(_Graph(graph, inputs, options, f"{options['name']}_{part}"))
        return compile_part
    return aot_module_simplified(gm, example_inputs, fw_compiler=compiler("forward"),
                                 bw_compiler=compiler("backward"),
                                 decompositions={**select_decomp_table(), **DECOMPOSITIONS})


def _value(node, given):
    """A placeholder's value as Dynamo or AOTAutograd traced it: a fake
    tensor with symbolic sizes, a SymInt, or the example input itself."""
    for key in ("example_value", "val"):
        if key in node.meta:
            return node.meta[key]
    return given


def _reads_value(node):
    """Whether `node` reads its tensor input's value (x.item())."""
    return node.target in ("item", torch.ops.aten._local_scalar_dense.default,
                           torch.ops.aten.item.default)


def _writes(node):
    """Whether dead-code elimination must keep `node`: FX's impure nodes, and
    the in-place writes Dynamo records as calls whose results nothing reads
    (self.keys.index_copy_(2, pos, k), x[i] = v), which FX counts as pure."""
    if node.is_impure() or node.target is operator.setitem:
        return True
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return node.op in ("call_method", "call_function") and name.endswith("_") \
        and not name.endswith("__")


def _symbol(size):
    """The sympy expression of a SymInt (a symbol, or an expression of
    symbols: 2*s0), or None for a number (one Dynamo specialized too)."""
    if not isinstance(size, torch.SymInt) or size.node.expr.is_number:
        return None
    return size.node.expr


class _Graph:
    """One FX graph, compiled with Kiln at its first call (with real inputs:
    AOTAutograd traces with fake ones) and called through it after.

    Kiln's graph takes the FX graph's tensor inputs, then its inputs that
    are neither tensors nor sizes of them (constants to Kiln), and returns
    the tensors the FX graph computes. Results that are inputs, None or
    SymInts are put in place around it."""

    def __init__(self, gm, example_inputs, options, name):
        self._options = options
        self._name = name
        self._lock = threading.Lock()
        self._compiled = None
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        values = [_value(node, given) for node, given in zip(placeholders, example_inputs)]
        self._count = len(values)
        # A number Dynamo passes as a 0-d tensor (a float attribute, layer
        # norm's eps, under dynamic=True) that the graph reads with .item():
        # Kiln takes its value, a constant.
        self._numbers = {i: values[i].dtype for i, node in enumerate(placeholders)
                         if isinstance(values[i], torch.Tensor) and values[i].dim() == 0
                         and any(_reads_value(user) for user in node.users)}
        self._tensors = [i for i, v in enumerate(values)
                         if isinstance(v, torch.Tensor) and i not in self._numbers]
        self._sources = {}  # symbol -> (tensor's position among the tensors, dim)
        shape_env = None
        for k, i in enumerate(self._tensors):
            for dim, size in enumerate(values[i].shape):
                symbol = _symbol(size)
                if symbol is None:
                    continue
                if not symbol.is_Symbol:
                    from . import UnsupportedOpError
                    raise UnsupportedOpError(
                        f"graph input '{placeholders[i].name}' has dim {dim} of size {size}, an "
                        f"expression of Dynamo's symbols: Kiln takes an input dim that is one "
                        f"symbol; mark that dim static (torch._dynamo.mark_static) or pass the "
                        f"tensor it derives from")
                shape_env = size.node.shape_env
                self._sources.setdefault(symbol, (k, dim))
        # A symbol Dynamo knows a multiple of d (it guarded s % d == 0: a
        # view(-1, d) needs it) is d * t to Kiln: Kiln takes each of its dims
        # split in two, (t, d), and merges them back first, so that every
        # size (s // d is t) stays a constant times symbols.
        self._divisors = _divisors(shape_env, self._sources)
        self._splits = {}  # tensor position -> [(dim, divisor)], the last dim first
        self.dynamic = {}  # kiln.compile's: tensor position -> {dim: symbol name}
        for k, i in enumerate(self._tensors):
            sizes = [_symbol(size) for size in values[i].shape]
            for dim, symbol in enumerate(sizes):
                if symbol is None:
                    continue
                divisor = self._divisors.get(symbol, 1)
                before = sum(self._divisors.get(s, 1) > 1 for s in sizes[:dim] if s is not None)
                self.dynamic.setdefault(k, {})[dim + before] = _kiln_symbol(symbol, divisor)
                if divisor > 1:
                    self._splits.setdefault(k, []).insert(0, (dim, divisor))
        # SymInt inputs Kiln computes from a tensor's size; the other
        # non-tensors are passed to Kiln's graph as they are.
        self._sized = {i: self._sources[_symbol(v)] for i, v in enumerate(values)
                       if _symbol(v) is not None and _symbol(v) in self._sources}
        self._passed = [i for i in range(len(values))
                        if i not in self._sized and i not in self._tensors]
        self._symbols = {_symbol(values[i]): i for i in self._passed
                         if _symbol(values[i]) is not None and _symbol(values[i]).is_Symbol}
        self.relations = (_relations(shape_env, self._sources, self._divisors)
                          + list(options["relations"] or []))
        self._module, self._results, self._kind = self._kernel_module(gm, placeholders)

    def _kernel_module(self, gm, placeholders):
        """(the GraphModule of the tensors the FX graph computes, where each
        of its results comes from, the type of its results)."""
        output = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        kind = type(output) if isinstance(output, (tuple, list)) else None
        computed, results = [], []
        for result in (output if kind else [output]):
            value = result.meta.get("example_value", result.meta.get("val")) \
                if isinstance(result, torch.fx.Node) else result
            if not isinstance(result, torch.fx.Node):
                results.append(("constant", result))
            elif result.op == "placeholder":
                results.append(("input", placeholders.index(result)))
            elif isinstance(value, (int, torch.SymInt)):
                results.append(("size", value))
            else:
                if result not in computed:
                    computed.append(result)
                results.append(("kiln", computed.index(result)))
        graph = torch.fx.Graph()
        copied = {}
        graph.graph_copy(gm.graph, copied)
        graph.output(tuple(copied[node] for node in computed))
        module = torch.fx.GraphModule(gm, graph)
        module.graph.eliminate_dead_code(is_impure_node=_writes)
        module.recompile()
        return module, results, kind

    def _kernel(self):
        """The function Kiln traces: the FX graph's computed tensors from
        its tensor inputs and its passed ones, named after its inputs."""
        module, tensors, sized, passed = self._module, self._tensors, self._sized, self._passed
        numbers, splits = self._numbers, self._splits

        def kernel(*args):
            args = list(args)
            for k, dims in splits.items():
                for n, (dim, _) in enumerate(dims):  # the last dim first
                    args[k] = args[k].flatten(dim + len(dims) - 1 - n, dim + len(dims) - n)
            full = [None] * self._count
            for k, i in enumerate(tensors):
                full[i] = args[k]
            for j, i in enumerate(passed):
                full[i] = args[len(tensors) + j]
                if i in numbers:
                    full[i] = torch.tensor(full[i], dtype=numbers[i])
            for i, (k, dim) in sized.items():
                full[i] = args[k].size(dim)
            return module(*full)
        names = [n.name for n in module.graph.nodes if n.op == "placeholder"]
        kernel.__signature__ = inspect.Signature([
            inspect.Parameter(names[i], inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for i in tensors + passed])
        return kernel

    def _compile(self, args):
        from . import compile
        options = self._options
        _compiling.active = True
        try:
            return compile(self._kernel(), args, dynamic=self.dynamic or None,
                           relations=self.relations or None, fallback=options["fallback"],
                           name=self._name, target=options["target"],
                           on_stride_miss=options["on_stride_miss"], strict=options["strict"])
        finally:
            _compiling.active = False

    @property
    def compiled(self):
        """The kiln.Compiled of this graph (None before its first call, or
        when it computes no tensors)."""
        return self._compiled

    def __call__(self, *args):
        kernel_args = [args[i] for i in self._tensors] + [
            args[i].item() if i in self._numbers else args[i] for i in self._passed]
        for k, dims in self._splits.items():
            for dim, divisor in dims:
                kernel_args[k] = kernel_args[k].unflatten(dim, (-1, divisor))
        computed = ()
        if any(kind == "kiln" for kind, _ in self._results):
            if self._compiled is None:
                with self._lock:
                    if self._compiled is None:
                        self._compiled = self._compile(kernel_args)
            computed = self._compiled(*kernel_args)
            if not isinstance(computed, tuple):
                computed = (computed,)
        results = [self._result(kind, where, args, computed) for kind, where in self._results]
        return self._kind(results) if self._kind else results[0]

    def _result(self, kind, where, args, computed):
        if kind == "kiln":
            return computed[where]
        if kind == "input":
            return args[where]
        if kind == "constant" or not isinstance(where, torch.SymInt):
            return where
        values = {symbol: args[self._tensors[k]].size(dim)
                  for symbol, (k, dim) in self._sources.items()}
        values.update((symbol, args[i]) for symbol, i in self._symbols.items())
        return int(where.node.expr.xreplace(values))


def _divisors(shape_env, sources):
    """{symbol: d} for each symbol in `sources` that `shape_env` knows is a
    multiple of d > 1 (Dynamo records Mod(s0, 8) when it guards
    s0 % 8 == 0); d is the least common multiple of those it knows."""
    import math

    import sympy
    from torch.utils._sympy.functions import Mod

    divisors = {}
    for expression in (shape_env.divisible if shape_env is not None else ()):
        symbol, divisor = expression.args if isinstance(expression, Mod) else (None, None)
        if symbol in sources and isinstance(divisor, sympy.Integer) and divisor > 1:
            divisors[symbol] = math.lcm(divisors.get(symbol, 1), int(divisor))
    return divisors


def _kiln_symbol(symbol, divisor):
    """Kiln's name of Dynamo's `symbol` divided by `divisor`."""
    return str(symbol) if divisor == 1 else f"{symbol}_div{divisor}"


def _relations(shape_env, sources, divisors):
    """Kiln relations ("2 <= s0 <= 64") of what `shape_env` knows of the
    value ranges of the symbols in `sources`, each in the symbol's Kiln
    name: s0_div8's (s0 // 8) for one that is a multiple of 8 (`divisors`)."""
    if shape_env is None:
        return []
    from torch.utils._sympy.numbers import int_oo

    relations = []
    for symbol in sources:
        bounds = shape_env.var_to_range.get(symbol)
        if bounds is None:
            continue
        divisor = divisors.get(symbol, 1)
        name = _kiln_symbol(symbol, divisor)
        low = -(-int(bounds.lower) // divisor) \
            if bounds.lower.is_finite and bounds.lower is not -int_oo else None
        high = int(bounds.upper) // divisor \
            if bounds.upper.is_finite and bounds.upper is not int_oo else None
        if low is not None and high is not None:
            relations.append(f"{low} <= {name} <= {high}")
        elif low is not None:
            relations.append(f"{name} >= {low}")
        elif high is not None:
            relations.append(f"{name} <= {high}")
    return relations
