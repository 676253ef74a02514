"""Kiln from Python: compile PyTorch functions and modules through kilnd.

    import kiln
    layer = kiln.compile(model, [x], dynamic={0: {1: "B"}})   # traced, compiled, cached
    y = layer(x)                                              # runs the kernel in-process

A compiled callable takes and returns torch.Tensors without copying them;
its guards are checked in C++ and the GIL is released while the kernel runs.
The first call fetches the artifact: from the local index with no round
trip when kilnd has compiled it before, else through kilnd (docs/PYTHON.md).

Importing kiln loads nothing but this file: the C++ extension (and with it
the client library) loads on first use, so tools that only trace stay light.
"""
import functools
import json
import os
import pkgutil
import re
import threading
import warnings

from ._package import (_PACKAGE_FORMAT, _PACKAGE_FORMATS, _module_tensor, _read_weights,
                       _weight_names, _write_weights)

__all__ = [
    "compile",
    "save",
    "load",
    "backend",
    "explain",
    "stats",
    "KilnError",
    "UnsupportedOpError",
    "GuardError",
    "DaemonUnavailable",
]


class KilnError(RuntimeError):
    """An error the Kiln client or kilnd reported; its message says what to do."""


class UnsupportedOpError(KilnError):
    """The graph uses an op (or dtype) Kiln does not compile. `ops` lists the
    ops the message names: ATen's, and quoted ones of any namespace (a
    torch.library custom op)."""

    def __init__(self, message=""):
        super().__init__(message)
        self.ops = sorted(set(re.findall(r"aten\.[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?", message))
                          | set(re.findall(r"'(\w+\.\w+\.\w+)'", message)))


class GuardError(KilnError):
    """The inputs do not match what the graph was compiled for (the message
    names the input and the dim), and no specialization can serve them."""


class DaemonUnavailable(KilnError):
    """No kilnd answered (none runs, or it did not answer in time), and the
    artifact is not in the local index."""


_native_module = None
_client = None
_lock = threading.Lock()
_native_lock = threading.Lock()
_counters = {"eager_fallbacks": 0}


def _native():
    """The C++ extension, loaded on first use: next to this file when the
    package is installed with it, else from the Bazel output tree of the
    checkout this file is in (the optimized build first). It loads gRPC
    (libkiln_grpc.so, beside it) only when it first needs kilnd."""
    global _native_module
    with _native_lock:
        if _native_module is None:
            import importlib.util
            import torch  # noqa: F401  (libtorch first: the extension links against it)
            path = _tool_path("_kiln.so", "client", "python", "kiln", "_kiln.so")
            if not path:
                raise ImportError("kiln's C++ extension is not built: run `bazel build -c opt "
                                  "//client/python:kiln/_kiln.so //client/python:kiln/"
                                  "libkiln_grpc.so //:kilnd` in the Kiln checkout")
            _check_torch_version(path, torch.__version__)
            spec = importlib.util.spec_from_file_location("kiln._kiln", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _native_module = module
        return _native_module


def _check_torch_version(path, running):
    """Refuses an extension built against another torch than the running one
    (its libtorch symbols would not match): the build records the version
    in _kiln.torch_version, beside the extension."""
    record = os.path.join(os.path.dirname(path), "_kiln.torch_version")
    try:
        with open(record) as file:
            built = file.read().strip()
    except OSError:
        built = f"an unknown version ({record} is missing)"
    if built != running:
        raise ImportError(f"kiln's C++ extension {path} is built against torch {built}, but this "
                          f"process runs torch {running}: run it with torch {built} "
                          "(scripts/install-deps.sh --with-torch installs it in the checkout's "
                          ".venv), or rebuild the extension against this torch")


def _kilnd_path():
    """The kilnd a client auto-starts: $KILN_DAEMON, else the one built in
    this checkout, else the C++ client's own search (PATH)."""
    return os.environ.get("KILN_DAEMON") or _tool_path("kilnd", "daemon", "kilnd")


def _tool_path(name, *built):
    """A binary of the checkout this package is in: next to this file, in
    Bazel runfiles, the optimized build, or bazel-bin; "" when none is."""
    here = os.path.dirname(os.path.abspath(__file__))
    checkout = os.path.join(here, "..", "..", "..")
    for path in (os.path.join(here, name),
                 os.path.join(checkout, *built),  # Bazel runfiles
                 os.path.join(checkout, "bazel-out", "k8-opt", "bin", *built),
                 os.path.join(checkout, "bazel-bin", *built)):
        if os.path.isfile(path):
            return os.path.realpath(path)
    return ""


# graph_pb2, kiln.v1.Graph's classes, is generated from proto/graph.proto by
# Bazel (//client/python:graph_pb2): it is beside this file in an installed
# package and in Bazel runfiles; else in a `kiln` directory on sys.path (the
# genrules that trace put their output tree on PYTHONPATH), or in the Bazel
# output tree of the checkout this file is in (as the extension is).
__path__ = pkgutil.extend_path(__path__, __name__) + [
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", *tree, "client",
                 "python", "kiln") for tree in (["bazel-out", "k8-opt", "bin"], ["bazel-bin"])]


def _default_client():
    global _client
    with _lock:
        if _client is None:
            _client = _native().Client(daemon_path=_kilnd_path())
        return _client


def _symbolic(dynamic):
    """compile's `dynamic` ({input position: dim, [dims] or {dim: symbol}})
    as the tracer's [(input position, dim, symbol), ...]."""
    marks = []
    for position, dims in (dynamic or {}).items():
        if isinstance(dims, int):
            dims = [dims]
        if isinstance(dims, dict):
            marks.extend((position, dim, symbol) for dim, symbol in dims.items())
        else:
            marks.extend((position, dim, f"s{position}_{dim}") for dim in dims)
    return marks


_STRIDE_MISSES = ("specialize", "copy")


def _check_on_stride_miss(on_stride_miss):
    if on_stride_miss not in _STRIDE_MISSES:
        raise ValueError(f"on_stride_miss is 'specialize' or 'copy', not {on_stride_miss!r}")


def _exported(fn):
    """Whether fn is a torch.export.ExportedProgram (none exists before
    torch.export is imported)."""
    import sys
    export = sys.modules.get("torch.export")
    return export is not None and isinstance(fn, export.ExportedProgram)


def _refuse_with_exported(what, **given):
    passed = [name for name, value in given.items() if value is not None]
    if passed:
        raise TypeError(f"{what} takes no {', '.join(passed)} with an ExportedProgram: its example "
                        f"inputs are the ones it was exported with, and its Dims say which sizes "
                        f"vary and within what range")


def _keeping_generator(function):
    """`function`, leaving torch's generator as it found it: tracing runs
    the ops that draw random numbers, and a compile inside a call (a graph
    Dynamo captured) must not change what the call draws."""
    @functools.wraps(function)
    def keeping(*args, **kwargs):
        import torch
        with torch.random.fork_rng(devices=[]):
            return function(*args, **kwargs)
    return keeping


@_keeping_generator
def compile(fn, example_inputs=None, *, example_kwargs=None, dynamic=None, relations=None,
            buckets=None, fallback="raise", name=None, target="native",
            on_stride_miss="specialize", strict=False):
    """Traces `fn` (a function or nn.Module) called with `example_inputs`
    (and `example_kwargs`) and returns a callable that runs Kiln's compiled
    kernels.

    `fn` may be a torch.export.ExportedProgram instead, given alone
    (kiln.compile(ep)): it is compiled as exported, its Dims' symbols
    symbolic and their ranges relations; the result is called as
    ep.module() is, and refuses sizes outside those ranges (GuardError).
    One Kiln cannot compile whole is partitioned as a function is, unless
    strict (kiln/_export.py).

    Arguments are tensors, tuples, lists and dicts of them, and plain values
    (None, bools, numbers, strings, dtypes): the graph takes those as
    constants, and a call that passes other ones (or other structures) is
    compiled for them too, up to 8 such layouts (docs/PYTHON.md).

    dynamic:   input dims that vary: {0: 0} (input 0's dim 0), {0: [0, 1]},
               or {0: {1: "B"}, 1: {0: "B"}} to name a symbol shared by dims.
               Inputs are the arguments' tensors in order, by position or
               by name ({"mask": 1}; a nested one as "batch_mask").
    relations: what symbolic sizes promise, e.g. ["B % 8 == 0", "2 <= B <= 64"].
    buckets:   a warmup plan entry ({"symbols": [{"symbol": "B", "sizes": [1, 8]}]})
               warmed before compile returns (Compiled.warmup).
    fallback:  "raise" (the default) raises KilnError subclasses; "eager"
               runs `fn` instead when it cannot be compiled or kilnd is
               unreachable with no local artifact (warns once, counted in
               kiln.stats()).
    target:    "native", "x86-64-v3" or "x86-64-v4" (docs/ARCHITECTURE.md).
    on_stride_miss: what a call does whose inputs have other strides than the
               compiled layouts (a transpose, a slice, an expand of what was
               traced): "specialize" (the default) compiles an entry for
               those strides, once per stride pattern, and later calls hit
               it; "copy" copies such inputs into the traced layout and runs
               the traced artifact, compiling nothing for strides.
    strict:    False (the default) runs the ops Kiln cannot compile (an op
               its op table lacks, nonzero's data-dependent shape, an op
               that draws random numbers) through torch, and compiles the
               regions between them, warning once (kiln/_partition.py); a
               function make_fx cannot trace whole (it reads a tensor's
               value) runs through torch.compile(backend="kiln"), split
               there (kiln/_dynamo.py, Split). True refuses such a graph
               (UnsupportedOpError naming the op).

    Parameters and buffers of a module become graph inputs; each call passes
    the module's tensors, so in-place weight updates are seen.
    """
    if fallback not in ("raise", "eager"):
        raise ValueError(f"fallback is 'raise' or 'eager', not {fallback!r}")
    _check_on_stride_miss(on_stride_miss)
    from . import _arguments, _data_dependent, _dynamo, _partition, _tracing
    bounds = None
    options = {"dynamic": dynamic, "relations": relations, "name": name, "target": target,
               "on_stride_miss": on_stride_miss}
    name = name or getattr(fn, "__name__", None) or type(fn).__name__
    exported = _exported(fn)
    if exported:
        _refuse_with_exported("kiln.compile", example_inputs=example_inputs,
                              example_kwargs=example_kwargs, dynamic=dynamic, relations=relations)
        options = None  # no other layouts: the program is exported for its own
        program, fn = fn, fn.module()  # fn: for fallback="eager"
    elif example_inputs is None:
        raise TypeError("kiln.compile(fn, example_inputs) needs the inputs to trace fn with "
                        "(kiln.compile(exported_program) takes none)")
    try:
        if exported:
            from . import _export
            graph, lifted, _, structure, writes, layout = _export.trace(program, name)
        else:
            traced, inputs, layout = _trace_module(fn, example_inputs, example_kwargs,
                                                   declining=not strict)
            # Data-dependent sizes: results cut to counts (kiln/_data_dependent.py).
            bounds = None if dynamic else _data_dependent.bound(traced[0], traced[3])
            if not strict and _partition.refused_nodes(traced[0]):
                return _partitioned(fn, inputs, layout, name, dynamic, relations, target,
                                    on_stride_miss)
            graph, lifted, structure, writes, layout = _trace(fn, example_inputs, example_kwargs,
                                                              name, dynamic, relations, traced)
        # `writes`: the inputs fn changes in place, which native copies
        # their new values (the graph's last outputs) into.
        native = _native().CompiledGraph(_default_client(), graph.SerializeToString(), target,
                                         on_stride_miss, writes)
        native.set_given_sizes_only(exported)
        try:
            native.prepare()  # compile errors surface here, not at the first call
        except UnsupportedOpError as error:
            if not strict and exported:
                return _exported_partitioned(program, error, name, target, on_stride_miss)
            if strict or not error.ops:
                raise
            _partition.refuse(traced[0], error.ops, str(error))  # refused for these arguments
            if not _partition.refused_nodes(traced[0]):
                raise
            return _partitioned(fn, inputs, layout, name, dynamic, relations, target,
                                on_stride_miss)
    except (_tracing.TraceError, _arguments.ArgumentError, KilnError) as error:
        if fallback == "eager":
            return _Eager(fn, error)
        if isinstance(error, _tracing.TraceError):
            if not strict and exported:
                return _exported_partitioned(program, error, name, target, on_stride_miss)
            if not strict and not _dynamo.compiling():
                return _split(fn, error, name, target, on_stride_miss)
            raise UnsupportedOpError(str(error)) from error
        raise
    compiled = Compiled(native, lifted, structure, writes, fn, fallback, graph, layout, options,
                        bounds)
    if buckets is not None:
        compiled.warmup(buckets)
    return compiled


def backend(gm, example_inputs, **kwargs):
    """A torch.compile backend: `torch.compile(model, backend=kiln.backend,
    options={...})`, or backend="kiln" through the torch_dynamo_backends entry
    point. Each graph Dynamo captures is compiled with Kiln, its symbolic
    dims as Kiln symbols; training goes through AOTAutograd, Kiln compiling
    the forward and the backward graph (kiln._dynamo, docs/PYTHON.md)."""
    from . import _dynamo
    return _dynamo.backend(gm, example_inputs, **kwargs)


def _trace_module(fn, example_inputs, example_kwargs, declining=False):
    """(_tracing.trace_module's result, the graph's inputs, their layout) of
    fn called with the example arguments, whose tensors are the inputs."""
    import torch
    from . import _arguments, _tracing
    inputs, layout = _arguments.flatten(_arguments.signature_of(fn), example_inputs,
                                        example_kwargs or {})
    for position, tensor in enumerate(inputs):
        if tensor.layout is not torch.strided:
            raise _tracing.TraceError(f"input {position} is a {tensor.layout} tensor: Kiln "
                                      f"compiles dense (strided) tensors; pass x.to_dense()")
    traced = _tracing.trace_module(fn, inputs, None if layout.plain else layout, write_back=True,
                                   declining=declining)
    return traced, inputs, layout


def _trace(fn, example_inputs, example_kwargs, name, dynamic, relations, traced=None):
    """(graph, lifted, structure, writes, layout): _tracing.trace_graph of fn
    called with the example arguments, whose tensors are the graph's inputs
    (`traced`: what _trace_module gave for them)."""
    from . import _arguments, _graph, _tracing
    parsed = [_graph.parse_relation(text) for text in relations or []]
    inputs, layout = _arguments.flatten(_arguments.signature_of(fn), example_inputs,
                                        example_kwargs or {})
    graph, lifted, structure, writes = _tracing.trace_graph(
        fn, inputs, name, _symbolic(dynamic), parsed,
        arguments=None if layout.plain else layout, traced=traced)
    return graph, lifted, structure, writes, layout


def _partitioned(fn, inputs, layout, name, dynamic, relations, target, on_stride_miss):
    """fn compiled in segments around the ops Kiln does not compile, which
    run through torch (kiln/_partition.py); warns once, naming them."""
    from . import _partition
    partitioned = _partition.compile(fn, inputs, layout, name, dynamic=_symbolic(dynamic),
                                     relations=relations, target=target,
                                     on_stride_miss=on_stride_miss)
    ops = sorted({op for _, op, _ in partitioned.torch_ops})
    if ops:
        warnings.warn(f"kiln: {name} runs {', '.join(ops)} through torch (kiln.explain says why) "
                      f"and compiles the rest in segments; kiln.compile(..., strict=True) "
                      f"refuses it instead", RuntimeWarning, stacklevel=3)
    return partitioned


def _exported_partitioned(program, error, name, target, on_stride_miss):
    """An ExportedProgram Kiln refused whole (`error`), partitioned: its
    module compiled as a function is, without strict (kiln/_export.py)."""
    from . import _export
    args, kwargs = program.example_inputs
    dynamic, relations = _export.dims_and_ranges(program)
    return compile(program.module(), args, example_kwargs=kwargs, dynamic=dynamic or None,
                   relations=relations or None, name=name, target=target,
                   on_stride_miss=on_stride_miss)


def _split(fn, error, name, target, on_stride_miss):
    """fn, which make_fx cannot trace whole (`error`), run by
    torch.compile(backend="kiln") (kiln._dynamo.Split); warns once."""
    from . import _dynamo
    warnings.warn(f"kiln: {name} runs through torch.compile(backend='kiln'), split where make_fx "
                  f"cannot trace it ({str(error).splitlines()[0]}); kiln.compile(..., "
                  f"strict=True) refuses it instead", RuntimeWarning, stacklevel=3)
    return _dynamo.Split(fn, str(error), {"target": target, "on_stride_miss": on_stride_miss,
                                          "name": name})


def save(fn, example_inputs=None, path=None, *, example_kwargs=None, dynamic=None,
         relations=None, buckets=None, name=None):
    """Traces `fn` and writes a package for kiln.load: a directory with

        graph.json    the graph (kiln.v1.Graph; symbolic dims, relations): what
                      `kiln compile` and warmup plans read too
        graph.pb      the same graph in protobuf's binary form, for kiln.load
        weights.bin   its weights' bytes
        package.json  the weights' dtypes, sizes and offsets, which module
                      attribute each one is, how the function's result
                      holds the graph's outputs, which inputs it
                      changes in place ("writes"), and which results are
                      cut to a count the graph computes ("bounds")
        plan.json     with `buckets` (a plan entry, as in Compiled.warmup): a
                      warmup plan for the graph, for `kiln warmup` or load()

    kiln.save(exported_program, path) writes an ExportedProgram's (a
    torch.export.ExportedProgram) as kiln.compile(exported_program) compiles
    it; package.json then says "given_sizes_only": kiln.load's callable
    refuses sizes outside its Dims' ranges too.

    Nothing is compiled here. (`kiln export` is the admin CLI's cache
    bundle: another thing.)"""
    name = name or getattr(fn, "__name__", None) or type(fn).__name__
    exported = _exported(fn)
    if exported:
        if path is None and isinstance(example_inputs, (str, os.PathLike)):
            path, example_inputs = example_inputs, None
        _refuse_with_exported("kiln.save", example_inputs=example_inputs,
                              example_kwargs=example_kwargs, dynamic=dynamic, relations=relations)
    if path is None or isinstance(example_inputs, (str, os.PathLike)):
        raise TypeError("kiln.save takes (fn, example_inputs, path), or (exported_program, path) "
                        "for a torch.export.ExportedProgram")
    from . import _data_dependent, _graph, _random, _tracing
    bounds = None
    try:
        if exported:
            from . import _export
            graph, lifted, names, structure, writes, layout = _export.trace(fn, name)
        else:
            traced, _, _ = _trace_module(fn, example_inputs, example_kwargs)
            bounds = None if dynamic else _data_dependent.bound(traced[0], traced[3])
            graph, lifted, structure, writes, layout = _trace(fn, example_inputs, example_kwargs,
                                                              name, dynamic, relations, traced)
            names = _weight_names(fn, lifted)
    except _tracing.TraceError as error:
        raise UnsupportedOpError(str(error)) from error
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "graph.json"), "w") as out:
        out.write(_graph.to_json(graph))
    with open(os.path.join(path, "graph.pb"), "wb") as out:
        out.write(graph.SerializeToString())
    layouts = _write_weights(lifted, os.path.join(path, "weights.bin"))
    generator = _random.generator_index(lifted)  # the weight that is torch's generator state
    with open(os.path.join(path, "package.json"), "w") as out:
        json.dump({"format": _PACKAGE_FORMAT,
                   "arguments": layout.to_json(),
                   "outputs": structure,
                   "writes": writes,
                   **({"bounds": bounds} if bounds else {}),
                   **({"given_sizes_only": True} if exported else {}),
                   **({"generator": generator} if generator is not None else {}),
                   "weights": [{"name": weight_name, **layout} for weight_name, layout
                               in zip(names, layouts)]}, out, indent=1)
    plan = os.path.join(path, "plan.json")
    if buckets is not None:
        with open(plan, "w") as out:
            json.dump({"graphs": [{**buckets, "graph": "graph.json"}]}, out, indent=1)
    elif os.path.exists(plan):
        os.remove(plan)


def load(path, module=None, *, fallback="raise", target="native", warmup=False,
         on_stride_miss="specialize"):
    """A package written by kiln.save, ready to call, without tracing: a
    fresh process pays a cache hit (no round trip when kilnd compiled it
    before), not a trace or a compile. With `module`, its current parameters
    and buffers are the weights (in-place updates are seen); else the saved
    ones. With `warmup`, the buckets of the package's plan are warmed too.
    `on_stride_miss` is as for compile."""
    _check_on_stride_miss(on_stride_miss)
    if fallback == "eager" and module is None:
        raise ValueError('fallback="eager" needs the module to run eagerly: kiln.load(path, module)')
    try:
        with open(os.path.join(path, "package.json")) as package_file:
            package = json.load(package_file)
        with open(os.path.join(path, "graph.pb"), "rb") as graph_file:
            graph = graph_file.read()
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not a Kiln package (kiln.save writes them): {error}") \
            from error
    if not isinstance(package, dict) or package.get("format") not in _PACKAGE_FORMATS:
        raise ValueError(f"{path} is not a package of this Kiln (format "
                         f"{package.get('format') if isinstance(package, dict) else None!r}, "
                         f"not {_PACKAGE_FORMAT!r}): save it again with kiln.save")
    missing = [key for key in ("arguments", "weights", "outputs") if key not in package]
    if missing:
        raise ValueError(f"{path}/package.json lacks {', '.join(map(repr, missing))}: the package "
                         f"is damaged; save it again with kiln.save")
    layouts = package["weights"]
    if module is not None and all(layout["name"] for layout in layouts):
        weights = [_module_tensor(module, layout["name"]) for layout in layouts]
    else:
        saved = _read_weights(os.path.join(path, "weights.bin"), layouts)
        weights = [_module_tensor(module, layout["name"]) if module is not None and layout["name"]
                   else tensor for layout, tensor in zip(layouts, saved)]
    if "generator" in package:  # torch's generator state: shared with torch at each call
        from . import _random
        _random.mark_generator(weights[package["generator"]])
    try:
        native = _native().CompiledGraph(_default_client(), graph, target, on_stride_miss,
                                         package.get("writes", []))
        native.set_given_sizes_only(package.get("given_sizes_only", False))
        native.prepare()
    except KilnError as error:
        if fallback == "eager":
            return _Eager(module, error)
        raise
    from . import _arguments
    compiled = Compiled(native, weights, package["outputs"], package.get("writes", []), module,
                        fallback, graph, _arguments.Layout.from_json(package["arguments"]),
                        bounds=package.get("bounds"))
    plan = os.path.join(path, "plan.json")
    if warmup and os.path.exists(plan):
        with open(plan) as plan_file:
            compiled.warmup(json.load(plan_file)["graphs"][0])
    return compiled


def _numbers(message):
    """A message from the extension (protobuf JSON, int64s as strings) with
    its integers as ints, nested ones too."""
    if isinstance(message, dict):
        return {key: _numbers(value) for key, value in message.items()}
    if isinstance(message, list):
        return [_numbers(value) for value in message]
    if isinstance(message, str) and message.lstrip("-").isdigit():
        return int(message)
    return message


def explain(compiled):
    """What Kiln made of a compiled function, as text: its artifact (key,
    guards, target) and every codegen stage — graph, loop IR, kernels,
    buffers, generated C++ — from `kiln explain` (the CLI in this checkout,
    or $KILN_CLI)."""
    import tempfile
    if isinstance(compiled, _Eager):
        return f"running eagerly: {compiled._error}"
    from . import _partition
    from . import _dynamo
    if isinstance(compiled, (_partition.Partitioned, _dynamo.Split)):
        return compiled.explain()
    artifact = compiled.artifact()
    lines = [f"artifact {artifact.get('key', '')}",
             f"guards   {json.dumps(artifact.get('guards', {}), sort_keys=True)}"]
    cli = os.environ.get("KILN_CLI") or _tool_path("kiln", "tools", "kiln", "kiln")
    if not cli:
        return "\n".join(lines + ["(no kiln CLI found: build //tools/kiln or set KILN_CLI)"])
    import subprocess
    from . import _graph
    with tempfile.NamedTemporaryFile("w", suffix=".json") as graph_file:
        graph_file.write(_graph.to_json(compiled._graph))
        graph_file.flush()
        out = subprocess.run([cli, "explain", graph_file.name], capture_output=True, text=True)
    if out.returncode != 0:
        raise KilnError(f"kiln explain failed: {out.stderr.strip()}")
    return "\n".join(lines) + "\n\n" + out.stdout


def stats():
    """kilnd's counters (when it answers) and this process's own."""
    result = {"process": dict(_counters)}
    if _native_module is not None or _client is not None:
        try:
            result["daemon"] = _numbers(_default_client().stats())
        except KilnError as error:
            result["daemon_error"] = str(error)
    return result


# Last: kiln.Compiled calls compile, and raises the exceptions, above.
from ._compiled import Compiled, _Eager, _result_type, _type_name, unflatten  # noqa: E402,F401
