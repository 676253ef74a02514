"""The tracer's error, and the calls Kiln's forms decline."""
import contextlib
import threading


class TraceError(Exception):
    """A graph Kiln cannot take, with a message naming the node."""


_declining = threading.local()


@contextlib.contextmanager
def declining():
    """Within (on this thread), a call that one of Kiln's forms cannot take
    keeps its op whole, for torch to run (kiln/_partition.py), and the dict
    yielded gets {op: why}; outside, such a call raises TraceError."""
    outer = getattr(_declining, "reasons", None)
    _declining.reasons = reasons = {}
    try:
        yield reasons
    finally:
        _declining.reasons = outer


def decline(op, message):
    """NotImplemented (the op traced whole) for a call of `op` Kiln's form
    cannot take, within declining(); else TraceError(message)."""
    reasons = getattr(_declining, "reasons", None)
    if reasons is None:
        raise TraceError(message)
    reasons[str(op)] = message
    return NotImplemented
