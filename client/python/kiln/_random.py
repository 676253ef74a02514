"""Random numbers under kiln.compile: ops that draw them run through torch
(kiln/_partition.py), drawing from torch's generator as eager does, one draw
per op in program order. A trace records ops, not Python calls, so a function
that seeds or sets the generator (torch.manual_seed, torch.set_rng_state) and
draws cannot be replayed by its graph: its trace raises TraceError, and
kiln.compile runs it through torch.compile(backend="kiln") instead, which
keeps those calls in Python. (One that seeds and draws nothing traces as
before.)"""
import contextlib
import threading

import torch

from ._decompositions import TraceError

_tracing = threading.local()
_installed = False
_install_lock = threading.Lock()
# The generator's setters, where the function may call them.
_SETTERS = [(torch, "manual_seed"), (torch, "seed"), (torch, "set_rng_state"),
            (torch.random, "manual_seed"), (torch.random, "seed"),
            (torch.random, "set_rng_state")]


def draws(node):
    """Whether FX `node` draws random numbers. Attention's schema may draw
    (dropout); without dropout it does not (the form Kiln lowers natively)."""
    if node.target == torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default:
        return bool(node.kwargs.get("dropout_p", node.args[3] if len(node.args) > 3 else 0.0))
    return torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())


def _recording(name, setter):
    def recording_setter(*args, **kwargs):
        calls = getattr(_tracing, "calls", None)
        if calls is not None:
            calls.append(name)
        return setter(*args, **kwargs)
    recording_setter.__wrapped__ = setter
    return recording_setter


@contextlib.contextmanager
def setters_recorded():
    """Within (on this thread), the generator's setters called are listed
    in the list yielded."""
    global _installed
    with _install_lock:
        if not _installed:
            for module, name in _SETTERS:
                setattr(module, name, _recording(name, getattr(module, name)))
            _installed = True
    outer = getattr(_tracing, "calls", None)
    _tracing.calls = calls = []
    try:
        yield calls
    finally:
        _tracing.calls = outer


def check_replayable(gm, calls):
    """TraceError when the traced `gm` draws random numbers and the
    function set the generator while traced (`calls`: setters_recorded's)."""
    if calls and any(draws(node) for node in gm.graph.nodes):
        raise TraceError(f"the function calls torch.{calls[0]} while tracing and draws random "
                         f"numbers: a Kiln graph records ops, not changes of torch's generator")
