"""Partitioned graphs (kiln/_partition.py): ops Kiln does not compile run
through torch, and Kiln compiles the regions between them (conftest.py
starts the kilnd)."""
import os
import sys
import warnings

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402
from conftest import assert_matches, compiles, fresh_process_result  # noqa: E402


class FourierLayer(torch.nn.Module):
    """A transformer-ish layer whose token mixer is an FFT (FNet): complex
    tensors between a norm and an MLP, all compiled natively."""

    def __init__(self, width=32, hidden=64):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(width)
        self.norm2 = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, hidden)
        self.down = torch.nn.Linear(hidden, width)

    def forward(self, x):
        x = x + torch.fft.fft2(self.norm1(x)).real
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))


class DetectionHead(torch.nn.Module):
    """Scores and boxes for each anchor, then the boxes whose score passes a
    threshold (nonzero: a count that depends on the data), decoded."""

    def __init__(self, width=16):
        super().__init__()
        self.score = torch.nn.Linear(width, 1)
        self.box = torch.nn.Linear(width, 4)

    def forward(self, features):
        scores = self.score(features).squeeze(-1).sigmoid()
        keep = torch.nonzero(scores > 0.5).squeeze(1)
        boxes = self.box(features)[keep]
        centers, sizes = boxes[:, :2], boxes[:, 2:].exp()
        return torch.cat([centers - sizes / 2, centers + sizes / 2], 1) * 8.0, scores[keep]


def solved(a, b, w):
    """A linear solve between two regions Kiln compiles."""
    system = a @ a.transpose(-1, -2) + 4.0 * torch.eye(a.shape[-1])
    x = torch.linalg.solve(system, torch.tanh(b @ w))
    return torch.relu(x @ w.T) + 1.0


def compiled_quietly(fn, inputs, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return kiln.compile(fn, inputs, **options)


def test_a_layer_with_an_fft_mixer_compiles_whole_and_matches_eager():
    torch.manual_seed(0)
    layer = FourierLayer().eval()
    x = torch.randn(2, 8, 32)
    with torch.no_grad():
        compiled = kiln.compile(layer, [x], strict=True)
        for _ in range(2):
            assert_matches(compiled(x), layer(x))
        y = torch.randn(2, 8, 32)
        assert_matches(compiled(y), layer(y))


def test_a_detection_head_with_nonzero_compiles_once_for_every_count():
    torch.manual_seed(0)
    head = DetectionHead().eval()
    with torch.no_grad():
        compiled = compiled_quietly(head, [torch.randn(64, 16)])
        before = compiles()
        counts = set()
        for seed in range(4):
            features = torch.randn(64, 16, generator=torch.Generator().manual_seed(seed))
            got, want = compiled(features), head(features)
            counts.add(want[0].shape[0])
            assert_matches(got, want)
    assert len(counts) > 1, counts
    assert compiles() == before, "one artifact per segment serves every count"


def test_a_linear_solve_in_the_middle_matches_eager():
    torch.manual_seed(0)
    a, b, w = torch.randn(8, 8), torch.randn(8, 6), torch.randn(6, 6)
    compiled = compiled_quietly(solved, [a, b, w])
    assert_matches(compiled(a, b, w), solved(a, b, w))
    a2 = torch.randn(8, 8)
    assert_matches(compiled(a2, b, w), solved(a2, b, w))


@pytest.mark.parametrize("fn, inputs, refused, op", [
    (DetectionHead().eval(), [torch.randn(64, 16)], "aten.nonzero.default", "aten.nonzero.default"),
    (solved, [torch.randn(8, 8), torch.randn(8, 6), torch.randn(6, 6)],
     "aten._linalg_solve_ex.default", "aten._linalg_solve_ex.default"),
], ids=["nonzero", "solve"])
def test_strict_refuses_naming_the_op_and_explain_names_why_it_ran_through_torch(fn, inputs,
                                                                                 refused, op):
    with torch.no_grad():
        with pytest.raises(kiln.UnsupportedOpError) as error:
            kiln.compile(fn, inputs, strict=True)
        assert refused in str(error.value)
        compiled = compiled_quietly(fn, inputs)
    explained = kiln.explain(compiled)
    assert f"({op}): " in explained, explained
    assert "through torch" in explained


def test_the_warning_names_the_ops_and_strict_and_is_raised_once():
    torch.manual_seed(0)
    a, b, w = torch.randn(8, 8), torch.randn(8, 6), torch.randn(6, 6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = kiln.compile(solved, [a, b, w])
        for _ in range(3):
            compiled(a, b, w)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    assert "aten._linalg_solve_ex.default" in messages[0]
    assert "strict=True" in messages[0]


def test_torch_compile_partitions_a_graph_and_strict_refuses_it():
    torch._dynamo.reset()
    a, b, w = torch.randn(8, 8), torch.randn(8, 6), torch.randn(6, 6)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_matches(torch.compile(solved, backend=kiln.backend)(a, b, w), solved(a, b, w))
        torch._dynamo.reset()
        strict = torch.compile(solved, backend=kiln.backend, options={"strict": True})
        with pytest.raises(kiln.UnsupportedOpError, match=r"aten\._linalg_solve_ex\.default"):
            strict(a, b, w)
    torch._dynamo.reset()


FRESH = """
import json, sys, warnings
import torch
sys.path.insert(0, sys.argv[1])
import kiln
from partition_test import DetectionHead, solved
torch.manual_seed(0)
warnings.simplefilter("ignore", RuntimeWarning)
keys = []
with torch.no_grad():
    for fn, inputs in [(DetectionHead().eval(), [torch.randn(64, 16)]),
                       (solved, [torch.randn(8, 8), torch.randn(8, 6), torch.randn(6, 6)])]:
        compiled = kiln.compile(fn, inputs)
        keys += [segment.compiled.artifact()["key"] for segment in compiled.segments]
print(json.dumps(keys))
"""


def test_a_fresh_process_hits_every_segment():
    keys = fresh_process_result(FRESH, HERE)
    assert len(keys) >= 4 and len(set(keys)) == len(keys), keys
    before = compiles()
    assert fresh_process_result(FRESH, HERE) == keys
    assert compiles() == before, "the fresh process hit every segment"


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
