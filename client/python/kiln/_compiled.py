"""kiln.Compiled, what kiln.compile and kiln.load return: the extension's
compiled graph with the call's layout, its results' structure and what to
write back; _Eager, what runs in its place with fallback="eager".
"""
import importlib
import json
import warnings

from . import DaemonUnavailable, GuardError, UnsupportedOpError, _counters, _lock, _random, compile


_MAX_LAYOUTS = 8  # layouts of its arguments one compiled function takes


class Compiled:
    """A compiled function or module: call it like the original."""

    def __init__(self, native, lifted, structure, writes, fn, fallback, graph, layout,
                 options=None, bounds=None):
        self._native = native
        # Results cut to a count the graph computes (_data_dependent.bound).
        self._bounds = bounds
        self._lifted = lifted
        self._generator = _random.generator_of(lifted)  # torch's generator state, if it draws
        self._structure = structure
        # The usual results, without walking the structure at each call.
        self._single = structure == "tensor"
        self._tuple = isinstance(structure, dict) and "type" not in structure and all(
            part == "tensor" for part in structure.get("tuple", [None]))
        self._fn = fn
        self._fallback = fallback
        self._graph_or_bytes = graph  # a kiln.v1.Graph, or its binary form (parsed when needed)
        self._warned = False
        self._layout = layout  # how the traced call's arguments held the graph's inputs
        self._plain = layout.plain
        self._count = len(layout.names)
        self._written_arguments = [p for p in writes if p < self._count]
        self._options = options  # compile's, for other layouts; None: a loaded package
        self._variants = {}  # another layout's key -> what compile made of a call with it
        self._overflow = None  # past _MAX_LAYOUTS with fallback="eager": one _Eager for all

    @property
    def _graph(self):
        if isinstance(self._graph_or_bytes, bytes):
            from .graph_pb2 import Graph
            self._graph_or_bytes = Graph.FromString(self._graph_or_bytes)
        return self._graph_or_bytes

    def __call__(self, *args, **kwargs):
        if self._plain and not kwargs and len(args) == self._count:
            if self._written_arguments and (error := self._aliased_write(args)):
                return self._eager(args, kwargs, error)
            try:
                # The extension called directly unless the graph draws: no
                # Python frame of Kiln's between the call and the extension.
                outputs = (self._native(*args, *self._lifted) if self._generator is None
                           else self._call_native(args))
            except TypeError:  # not all tensors: another layout, or a clear error
                return self._call_with_layout(args, kwargs)
            except (DaemonUnavailable, UnsupportedOpError) as error:
                return self._eager(args, kwargs, error)
            if self._bounds:
                outputs = self._cut(outputs)
            return outputs[0] if self._single else self._results(outputs)
        return self._call_with_layout(args, kwargs)

    def _run(self, tensors, args, kwargs):
        if self._written_arguments and (error := self._aliased_write(tensors)):
            return self._eager(args, kwargs, error)
        try:
            outputs = self._call_native(tensors)
        except (DaemonUnavailable, UnsupportedOpError) as error:
            return self._eager(args, kwargs, error)
        if self._bounds:
            outputs = self._cut(outputs)
        return self._results(outputs)

    def _call_native(self, tensors):
        if self._generator is None:  # no context manager on the common path
            return self._native(*tensors, *self._lifted)
        with _random.generator_shared(self._generator):
            return self._native(*tensors, *self._lifted)

    def _aliased_write(self, tensors):
        """A GuardError when an argument fn changes in place shares memory
        with another argument (eager would see the change through both; the
        graph takes them as two tensors), else None."""
        storages = [t.untyped_storage().data_ptr() if t.numel() else None for t in tensors]
        for written in self._written_arguments:
            for other, storage in enumerate(storages):
                if other != written and storage is not None and storage == storages[written]:
                    return GuardError(
                        f"argument tensors {written} and {other} share memory, and the function "
                        f"changes tensor {written} in place: eager would see that change through "
                        f"both, the compiled graph takes them apart; pass tensors that do not "
                        f"share memory")
        return None

    def _cut(self, outputs):
        from . import _data_dependent  # what imports the tracer: not at every import of kiln
        return _data_dependent.cut(outputs, self._bounds)

    def _results(self, outputs):
        if self._single:
            return outputs[0]
        if self._tuple:
            return tuple(outputs)
        return unflatten(iter(outputs), self._structure)

    def _call_with_layout(self, args, kwargs):
        from . import _arguments
        tensors, layout = _arguments.flatten(self._layout.signature, args, kwargs)
        if layout.key == self._layout.key:
            return self._run(tensors, args, kwargs)
        variant = self._variants.get(layout.key)
        if variant is None:
            variant = self._compile_variant(layout, args, kwargs)
        if isinstance(variant, Compiled):
            return variant._run(tensors, args, kwargs)
        return variant(*args, **kwargs)

    def _compile_variant(self, layout, args, kwargs):
        """What compile makes of a call whose arguments have another layout
        (another value of a number the graph took as a constant, say)."""
        difference = self._layout.difference(layout)
        if self._options is None:
            raise GuardError(f"{difference}: a loaded package runs the arguments it was saved "
                             f"with, and an ExportedProgram those it was exported with; save or "
                             f"export one for each")
        if len(self._variants) + 1 >= _MAX_LAYOUTS:
            error = GuardError(f"{difference}, and {self._graph.name or 'the function'} is "
                               f"compiled for {_MAX_LAYOUTS} layouts of its arguments already: "
                               f"pass what changes from call to call as a tensor")
            if self._fallback != "eager":
                raise error
            self._overflow = self._overflow or _Eager(self._fn, error)
            return self._overflow
        options = dict(self._options)
        if options["dynamic"]:  # the dims of inputs this layout has
            inputs = layout.input_names()
            options["dynamic"] = {key: dims for key, dims in options["dynamic"].items()
                                  if (key in inputs if isinstance(key, str) else key < len(inputs))}
        variant = compile(self._fn, args, example_kwargs=kwargs, fallback=self._fallback,
                          **options)
        with _lock:
            return self._variants.setdefault(layout.key, variant)

    def _eager(self, args, kwargs, error):
        """The original's result, with fallback="eager"; else raises `error`."""
        if self._fallback != "eager":
            raise error
        with _lock:
            _counters["eager_fallbacks"] += 1
        if not self._warned:
            self._warned = True
            warnings.warn(f"kiln: running {self._graph.name or 'the graph'} eagerly: {error}",
                          RuntimeWarning, stacklevel=3)
        return self._fn(*args, **kwargs)

    def prepare(self):
        """Fetches (compiling on a miss) and loads the artifact now."""
        return self._native.prepare()

    def warmup(self, buckets, progress=False):
        """Compiles, loads and runs each bucket of `buckets`: a warmup plan
        entry ({"symbols": [{"symbol": "B", "sizes": [1, 2, 4]}], ...},
        docs/WARMUP.md) for this graph. A bucket runs until its GEMMs' and
        convolutions' fastest ways are chosen, so traffic times none.
        Returns {"buckets", "runs", "entries", "local", "padded_symbols"}.
        With `progress`, prints a line per compile to stderr."""
        report = None
        if progress:
            import sys

            def report(done, total, name):
                print(f"kiln warmup {done}/{total}: {name}", file=sys.stderr)
        return self._native.warmup(json.dumps(buckets), report)

    def artifact(self):
        """The metadata of the graph's own artifact (after a call or prepare)."""
        return self._native.artifact()


def unflatten(tensors, structure):
    """The value `structure` describes, rebuilt with the tensors of the
    iterator `tensors` in its tensors' places: a traced function's result
    (_tracing.flatten_outputs) or a call's arguments (_arguments). A
    tuple, list or dict of another type (a namedtuple, torch.return_types,
    a dataclass, a model output class) names it ("type") and is rebuilt as
    one where it can be imported."""
    if structure == "tensor":
        return next(tensors)
    kind = next(key for key in structure if key != "type")
    parts = structure[kind]
    if kind == "value":
        return parts
    if kind == "dtype":
        import torch
        return getattr(torch, parts)
    if kind == "dict":
        rebuilt = {key: unflatten(tensors, part) for key, part in parts}
    else:
        rebuilt = [unflatten(tensors, part) for part in parts]
    made = _result_type(structure["type"]) if "type" in structure else None
    if made is None:
        return rebuilt if kind != "tuple" else tuple(rebuilt)
    if kind == "dict":
        return made(**rebuilt) if all(isinstance(key, str) for key in rebuilt) else \
            made(rebuilt.items())
    return made(*rebuilt) if hasattr(made, "_fields") else made(rebuilt)  # namedtuple or not


# "module:qualname" -> the result type it names (None: not importable here).
_result_types = {}


def _type_name(cls):
    """The name unflatten rebuilds `cls` by: remembered for this process
    (a class defined in a function works here), imported elsewhere."""
    name = f"{cls.__module__}:{cls.__qualname__}"
    _result_types[name] = cls
    return name


def _result_type(name):
    if name not in _result_types:
        module, _, qualname = name.partition(":")
        try:
            found = importlib.import_module(module)
            for attribute in qualname.split("."):
                found = getattr(found, attribute)
        except (ImportError, AttributeError):
            warnings.warn(f"kiln: results of type {name} come back as plain tuples, lists and "
                          f"dicts: it cannot be imported in this process", RuntimeWarning)
            found = None
        _result_types[name] = found
    return _result_types[name]


class _Eager:
    """What compile returns with fallback="eager" when compiling failed."""

    def __init__(self, fn, error):
        self._fn = fn
        self._error = error
        self._warned = False

    def __call__(self, *args, **kwargs):
        with _lock:
            _counters["eager_fallbacks"] += 1
        if not self._warned:
            self._warned = True
            warnings.warn(f"kiln: running eagerly: {self._error}", RuntimeWarning, stacklevel=2)
        return self._fn(*args, **kwargs)
