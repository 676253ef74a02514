"""kiln_check.check(ok, error, message): a check eager makes on values
(a negative weight, a negative variance) as one op of the graph, for the
tracer's forms of the ops that make one. Eager's form raises `error`
(RuntimeError, ValueError or IndexError) with `message` unless every
element of the bool tensor `ok` is true; Kiln's stops the run the same way
(codegen/ops/check.cc). The op returns nothing: dead-code elimination keeps
it (_graph.CHECKS)."""
import torch

_ERRORS = {"RuntimeError": RuntimeError, "ValueError": ValueError, "IndexError": IndexError}

_LIBRARY = torch.library.Library("kiln_check", "DEF")
_LIBRARY.define("check(Tensor ok, str error, str message) -> ()")


def _check(ok, error, message):
    if not bool(ok.all()):
        raise _ERRORS[error](message)


_LIBRARY.impl("check", _check, "CompositeExplicitAutograd")
torch.library.register_fake("kiln_check::check", lambda ok, error, message: None, lib=_LIBRARY)


def check(ok, error, message):
    """Raises `error` (its name) with `message` where any element of `ok` is
    false, in eager and in a compiled graph alike."""
    torch.ops.kiln_check.check.default(ok, error, message)
