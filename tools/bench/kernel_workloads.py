"""Workloads that //tools/bench:kernels needs beyond the public ones.

Traced at build time by the genrule //tools/bench:traced
(`kiln_trace.py --module kernel_workloads:f_1024`), and called by
eager_kernels.py for the eager side, so both sides run the same function on
the same inputs. Same conventions as tests/workloads/workloads.py:
FACTORY() returns (fn, example_inputs).
"""
import torch


def _seeded(*shapes):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(*s, generator=g) for s in shapes]


def f_1024():
    """The seed graph f = relu(x @ x.T + 1) at 1024x1024: GEMM-bound."""
    return (lambda x: torch.relu(x @ x.T + 1.0)), _seeded((1024, 1024))


WORKLOADS = {"f_1024": f_1024}
