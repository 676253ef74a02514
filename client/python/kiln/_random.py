"""Random numbers under kiln.compile: ops that draw them run through torch
(kiln/_partition.py), drawing from torch's generator as eager does, one draw
per op in program order. A trace records ops, not Python calls, so a function
that seeds or sets the generator while it is traced (torch.manual_seed,
torch.set_rng_state) cannot be replayed by its graph: such a call raises
TraceError while tracing, and kiln.compile runs the function through
torch.compile(backend="kiln") instead, which keeps those calls in Python."""
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
    """Whether FX `node` draws random numbers."""
    return torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())


def _refusing(name, setter):
    def refusing_setter(*args, **kwargs):
        if getattr(_tracing, "active", False):
            raise TraceError(f"the function calls torch.{name} while tracing: a Kiln graph "
                             f"records ops, not changes of torch's generator")
        return setter(*args, **kwargs)
    refusing_setter.__wrapped__ = setter
    return refusing_setter


@contextlib.contextmanager
def setters_refused():
    """Within (on this thread): the generator's setters raise TraceError."""
    global _installed
    with _install_lock:
        if not _installed:
            for module, name in _SETTERS:
                setattr(module, name, _refusing(name, getattr(module, name)))
            _installed = True
    outer = getattr(_tracing, "active", False)
    _tracing.active = True
    try:
        yield
    finally:
        _tracing.active = outer
