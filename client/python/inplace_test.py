"""Outputs that are inputs (docs/ARCHITECTURE.md): a module that changes its
buffers in place runs through a real kilnd (conftest.py starts it) with the
new values written in the buffers' own storage, nothing copied back.

Runs under pytest (the checkout's .venv); each test case is counted by
the test command through the JUnit XML written to $XML_OUTPUT_FILE.
"""
import copy
import os
import re
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402
from conftest import assert_matches  # noqa: E402


class DecoderStep(torch.nn.Module):
    """One token's attention over a preallocated k/v cache, written at a
    position tensor (self.k[:, :, pos] = k)."""

    def __init__(self, heads=2, length=16, width=8):
        super().__init__()
        self.qkv = torch.nn.Linear(heads * width, 3 * heads * width)
        self.heads, self.width = heads, width
        self.register_buffer("k", torch.zeros(1, heads, length, width))
        self.register_buffer("v", torch.zeros(1, heads, length, width))

    def forward(self, x, pos):
        q, k, v = self.qkv(x).view(1, 1, 3, self.heads, self.width).unbind(2)
        self.k[:, :, pos] = k.transpose(1, 2)
        self.v[:, :, pos] = v.transpose(1, 2)
        scores = (q.transpose(1, 2) @ self.k.transpose(2, 3)) / self.width ** 0.5
        return (scores.softmax(-1) @ self.v).flatten(1)


class Accumulator(torch.nn.Module):
    """A running average kept in a buffer, changed in place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(32, 64))

    def forward(self, x):
        self.mean.mul_(0.5).add_(x, alpha=0.5)
        return self.mean * 2


def copies_in(call):
    """How many aten copy_ calls `call` makes (the profiler sees the
    extension's, which go through the dispatcher too)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        call()
    return sum(event.count for event in profile.key_averages() if event.key == "aten::copy_")


def aliases(compiled):
    return compiled.artifact()["signature"]["output_aliases"]


def test_a_buffer_changed_in_place_is_written_in_its_own_storage_and_not_copied():
    torch.manual_seed(0)
    module, eager = Accumulator(), Accumulator()
    compiled = kiln.compile(module, (torch.randn(32, 64),))
    storage = module.mean.data_ptr()
    for _ in range(4):
        x = torch.randn(32, 64)
        with torch.no_grad():
            assert_matches(compiled(x), eager(x))
        assert_matches(module.mean, eager.mean)
    assert module.mean.data_ptr() == storage
    assert aliases(compiled) == [{"output": 1, "input": 1}], kiln.explain(compiled)
    assert copies_in(lambda: compiled(torch.randn(32, 64))) == 0


def test_a_decoder_step_writes_its_cache_at_a_position_in_place_and_matches_eager():
    torch.manual_seed(0)
    module = DecoderStep().eval()
    eager = copy.deepcopy(module)
    with torch.no_grad():
        compiled = kiln.compile(module, (torch.randn(1, 1, 16), torch.tensor([0])))
        module.k.zero_()
        module.v.zero_()
        for step in range(6):
            x, pos = torch.randn(1, 1, 16), torch.tensor([step])
            assert_matches(compiled(x, pos), eager(x, pos))
        assert_matches(module.k, eager.k)
        assert_matches(module.v, eager.v)
        assert sorted(alias["output"] for alias in aliases(compiled)) == [1, 2], \
            kiln.explain(compiled)
        assert copies_in(lambda: compiled(torch.randn(1, 1, 16), torch.tensor([6]))) == 0


class Transposing(torch.nn.Module):
    """Writes the buffer's transpose into it: the kernel reads another
    element than it writes, so the new value cannot be computed in the
    buffer's storage (the planner's proof fails) and is copied back."""

    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.arange(64.0).view(8, 8))

    def forward(self, x):
        total = self.state.sum(0)
        self.state.copy_(self.state.t() + x)
        return total


def test_a_write_the_planner_cannot_prove_safe_is_copied_back_and_explained():
    module, eager = Transposing(), Transposing()
    compiled = kiln.compile(module, (torch.ones(8, 8),))
    module.state.copy_(eager.state)
    for _ in range(3):
        x = torch.randn(8, 8)
        with torch.no_grad():
            assert_matches(compiled(x), eager(x))
        assert_matches(module.state, eager.state)
    assert aliases(compiled) == []
    assert copies_in(lambda: compiled(torch.ones(8, 8))) == 1
    explained = kiln.explain(compiled)
    assert re.search(r"note: output 1 is not input 1's storage: kernel \d+ reads input 1 at "
                     r"another element than the one it writes", explained), explained

if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
