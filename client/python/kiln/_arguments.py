"""How a call's arguments hold a graph's input tensors.

A compiled function is called as the original: positional and keyword
arguments, tensors nested in tuples, lists and dicts, and plain values
(None, bools, numbers, strings, dtypes). The tensors, in the order the
function's parameters list them, are the graph's inputs; everything else
is the call's layout, which the trace compiled in as constants. A call
with another layout is another graph (kiln.Compiled keeps one per layout).

Light on purpose: a package loaded by kiln.load calls through this module
without importing the tracer.
"""
import inspect
import json
import keyword
import re

import torch

from . import unflatten

_OMITTED = object()  # a parameter's default here: a call binds only what it passes
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
_ANYTHING = inspect.Signature([
    inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
    inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])


class ArgumentError(TypeError):
    """An argument Kiln cannot take, or a call that does not fit the
    function's parameters."""


def signature_of(fn):
    """fn's parameters, each one optional (*args, **kwargs when Python
    cannot read them, as for builtins)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except Exception:  # noqa: BLE001  (builtins; TorchScript modules with overloaded forwards)
        return _ANYTHING
    return inspect.Signature([
        p.replace(annotation=inspect.Parameter.empty,
                  default=inspect.Parameter.empty if p.kind in _VARIADIC else _OMITTED)
        for p in parameters])


def signature_to_json(signature):
    return [[p.name, p.kind.name] for p in signature.parameters.values()]


def signature_from_json(parameters):
    return inspect.Signature([
        inspect.Parameter(name, getattr(inspect.Parameter, kind),
                          default=inspect.Parameter.empty if kind.startswith("VAR_")
                          else _OMITTED) for name, kind in parameters])


class Layout:
    """One call's layout: for each argument it passed (by parameter name),
    where its tensors are ("tensor"; {"tuple" | "list": [...]}; {"dict":
    [[key, ...], ...]}) and its plain values ({"value": ...}; {"dtype":
    name}), as JSON; and a name for each tensor (its argument's path)."""

    def __init__(self, signature, parts, names):
        self.signature = signature
        self.parts = parts
        self.names = names
        self.key = json.dumps(parts)
        # Whether the call passed its tensors positionally and nothing else:
        # then a call's arguments are the graph's inputs as they are.
        marks = [object() for _ in names]
        args, kwargs = self.rebuild(marks)
        self.plain = not kwargs and len(args) == len(marks) and all(
            a is m for a, m in zip(args, marks))

    def to_json(self):
        return {"parameters": signature_to_json(self.signature), "parts": self.parts,
                "names": self.names}

    @classmethod
    def from_json(cls, saved):
        return cls(signature_from_json(saved["parameters"]), saved["parts"], saved["names"])

    def rebuild(self, tensors):
        """(args, kwargs) of the call this layout came from, with `tensors`
        in its tensors' places."""
        remaining = iter(tensors)
        bound = self.signature.bind_partial()
        bound.arguments = {name: unflatten(remaining, part) for name, part in self.parts}
        return bound.args, bound.kwargs

    def input_names(self):
        """The names of the tensors as graph inputs (the trace adds "_1")."""
        names, taken = [], set()
        for path in self.names:
            name = _identifier(path)
            while name in taken:
                name += "_"
            taken.add(name)
            names.append(name)
        return names

    def named(self, call, extra=0):
        """call(*tensors) as a function whose parameters are named after the
        tensors (and `extra` more): what the trace names the graph's inputs."""
        listed = ", ".join(self.input_names() + [f"state_{i}" for i in range(extra)])
        namespace = {"call": call}
        exec(f"def traced({listed}):\n    return call({listed})\n", namespace)  # noqa: S102
        return namespace["traced"]

    def difference(self, other):
        """What a call with layout `other` passes that this one did not."""
        mine, theirs = dict(self.parts), dict(other.parts)
        for name in list(mine) + [n for n in theirs if n not in mine]:
            if name not in theirs:
                return f"argument '{name}' is not passed; it was traced as {_show(mine[name])}"
            if name not in mine:
                return f"argument '{name}' is passed; the trace did not pass it"
            if mine[name] != theirs[name]:
                return (f"argument '{name}' is {_show(theirs[name])}; it was traced as "
                        f"{_show(mine[name])}")
        return "the arguments differ"


def flatten(signature, args, kwargs):
    """(the call's tensors, its Layout)."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as error:
        raise ArgumentError(f"the call does not fit the function's parameters: {error}") from None
    tensors, names, parts = [], [], []
    for name, value in bound.arguments.items():
        keyed = signature.parameters[name].kind == inspect.Parameter.VAR_KEYWORD
        parts.append([name, _flatten(value, name, tensors, names, keyed)])
    return tensors, Layout(signature, parts, names)


def _flatten(value, path, tensors, names, keyed=False):
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        names.append(path)
        return "tensor"
    if type(value) in (tuple, list):
        kind = type(value).__name__
        return {kind: [_flatten(v, f"{path}[{i}]", tensors, names) for i, v in enumerate(value)]}
    if type(value) is dict and all(isinstance(key, (str, int)) for key in value):
        return {"dict": [[key, _flatten(v, key if keyed else f"{path}[{key!r}]", tensors, names)]
                         for key, v in value.items()]}
    if value is None or type(value) in (bool, int, float, str):
        return {"value": value}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    raise ArgumentError(f"argument '{path}' has type {type(value).__name__}: Kiln takes tensors, tuples, "
                        f"lists and dicts (str or int keys) of them, and None, bools, numbers, "
                        f"strings and dtypes, which the graph takes as constants")


def _show(part):
    if part == "tensor":
        return "a tensor"
    (kind, inner), = part.items()
    if kind == "value":
        return repr(inner)
    if kind == "dtype":
        return f"torch.{inner}"
    if kind == "dict":
        return "{" + ", ".join(f"{key!r}: {_show(p)}" for key, p in inner) + "}"
    shown = ", ".join(_show(p) for p in inner)
    return f"[{shown}]" if kind == "list" else f"({shown}{',' if len(inner) == 1 else ''})"


def _identifier(path):
    name = re.sub(r"\W+", "_", path).strip("_") or "input"
    return f"_{name}" if name[0].isdigit() or keyword.iskeyword(name) else name
