"""Shapes for Kiln's tracing where torch's fake tensors have none.

linalg.lstsq has no meta kernel: its tag says its output shape depends on
values, which is so for one case only (gelsd's and gelss's residuals exist
when every matrix has full rank). Kiln lowers every other case natively
(codegen/ops/lstsq.cc), and these shapes are eager's for them; the one
data-dependent case still raises DynamicOutputShapeException. The kernel is
registered while Kiln traces and removed after, so torch's own tracing
elsewhere in the process is unchanged.
"""
import contextlib

import torch
from torch._subclasses.fake_tensor import DynamicOutputShapeException

LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lstsq(a, b, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) shaped as eager's."""
    driver = driver or "gelsy"
    if driver not in LSTSQ_DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of "
                           "(gels, gelsy, gelsd, gelss)")
    vector = a.dim() - b.dim() == 1
    other = b.unsqueeze(-1) if vector else b
    m, n, k = a.shape[-2], a.shape[-1], other.shape[-1]
    tall = m > n
    if tall and driver in ("gelsd", "gelss"):
        raise DynamicOutputShapeException(torch.ops.aten.linalg_lstsq.default)
    batch = torch.broadcast_shapes(a.shape[:-2], other.shape[:-2])
    solution = a.new_empty((*batch, n) if vector else (*batch, n, k))
    residuals = a.new_empty((*batch, k) if tall and driver == "gels" else (0,))
    rank = a.new_empty((0,) if driver == "gels" else batch, dtype=torch.int64)
    singular_values = a.new_empty(
        (*batch, min(m, n)) if driver in ("gelsd", "gelss") else (0,))
    return solution, residuals, rank, singular_values


@contextlib.contextmanager
def fake_shapes():
    """The fake kernels above registered for the duration."""
    library = torch.library.Library("aten", "FRAGMENT")
    try:
        torch.library.register_fake("aten::linalg_lstsq", _lstsq, lib=library)
        yield
    finally:
        library._destroy()
