"""torch.compile(backend=kiln.backend) through a real kilnd (conftest.py
starts it): Dynamo's symbolic dims, graph breaks cached across processes,
options, and training through AOTAutograd against eager's gradients.

Runs under pytest (the checkout's .venv), as kiln_test does.
"""
import copy
import os
import sys

import pytest
import torch
import torch._dynamo

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402
from kiln.graph_pb2 import Dim, SymbolRelation  # noqa: E402
from conftest import assert_matches, compiles, fresh_process_result  # noqa: E402


class Graphs:
    """A backend that compiles with kiln.backend and keeps what it made."""

    def __init__(self):
        self.made = []

    def __call__(self, gm, example_inputs, **kwargs):
        self.made.append(kiln.backend(gm, example_inputs, **kwargs))
        return self.made[-1]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                               torch.nn.Linear(16, 4))


def test_one_artifact_serves_three_batch_sizes_without_recompiling():
    model = mlp().eval()
    graphs = Graphs()
    compiled = torch.compile(model, backend=graphs, dynamic=True)
    before = compiles()
    with torch.no_grad():
        for batch in (3, 5, 8):
            x = torch.randn(batch, 8)
            assert_matches(compiled(x), model(x))
    assert len(graphs.made) == 1, "Dynamo compiled the graph once"
    assert compiles() == before + 1, "kilnd compiled one graph for the three sizes"
    (dims,) = graphs.made[0].dynamic.values()
    symbol = dims[0]
    inputs = graphs.made[0].compiled._graph.inputs
    assert [i.type.sizes[0] for i in inputs if "args_0" in i.name] == [Dim(symbol=symbol)]


def test_mark_dynamic_bounds_become_kiln_relations():
    def f(x):
        return torch.tanh(x) * 2.0

    graphs = Graphs()
    compiled = torch.compile(f, backend=graphs)
    x = torch.randn(6, 3)
    torch._dynamo.mark_dynamic(x, 0, min=2, max=64)
    before = compiles()
    assert_matches(compiled(x), f(x))
    for batch in (9, 64):
        x = torch.randn(batch, 3)
        assert_matches(compiled(x), f(x))
    assert len(graphs.made) == 1 and compiles() == before + 1
    symbol = graphs.made[0].dynamic[0][0]
    assert list(graphs.made[0].compiled._graph.relations) == [
        SymbolRelation(range=SymbolRelation.Range(symbol=symbol, min=2, max=64))]


def test_symint_inputs_and_results_follow_the_call_sizes():
    def f(x, y):
        z = x @ y.T
        return torch.relu(z.view(z.size(0), -1) + 1.0), z.size(0) * 2

    graphs = Graphs()
    compiled = torch.compile(f, backend=graphs, dynamic=True)
    before = compiles()
    for batch in (3, 5, 8):
        x, y = torch.randn(batch, 8), torch.randn(6, 8)
        got, size = compiled(x, y)
        assert_matches(got, f(x, y)[0])
        assert size == 2 * batch
    assert len(graphs.made) == 1 and compiles() == before + 1


def test_a_dim_dynamo_guards_divisible_by_8_is_8_times_a_kiln_symbol():
    def f(x, w):
        if x.size(0) % 8 == 0:
            return torch.relu(x.view(-1, 8) @ w + 1.0).sum(1)
        return x * 3.0

    graphs = Graphs()
    compiled = torch.compile(f, backend=graphs, dynamic=True)
    w = torch.randn(8, 4)
    before = compiles()
    with torch.no_grad():
        for size in (16, 24, 40):
            x = torch.randn(size)
            assert_matches(compiled(x, w), f(x, w))
        assert len(graphs.made) == 1 and compiles() == before + 1
        (symbol,) = graphs.made[0].dynamic[0].values()
        assert symbol.endswith("_div8")
        inputs = graphs.made[0].compiled._graph.inputs
        assert list(inputs[0].type.sizes) == [Dim(symbol=symbol), Dim(constant=8)]
        # 12 fails Dynamo's guard s % 8 == 0: Dynamo traces the other branch.
        x = torch.randn(12)
        assert_matches(compiled(x, w), f(x, w))
    assert len(graphs.made) == 2


def test_unknown_options_and_modes_are_refused_naming_the_known_ones():
    def f(x):
        return x + 1.0

    known = "target, fallback, on_stride_miss, relations, name"
    with pytest.raises(Exception, match=f"unknown option 'targte'; it takes {known}"):
        torch.compile(f, backend=kiln.backend, options={"targte": "native"})(torch.randn(3))
    torch._dynamo.reset()
    with pytest.raises(Exception, match="option fallback is 'raise' or 'eager', not 'never'"):
        torch.compile(f, backend=kiln.backend, options={"fallback": "never"})(torch.randn(3))
    torch._dynamo.reset()
    with pytest.raises(Exception, match="takes no mode"):
        torch.compile(f, backend=kiln.backend, mode="max-autotune")(torch.randn(3))


def test_options_reach_kiln():
    def f(x):
        return torch.sigmoid(x) * x

    graphs = Graphs()
    compiled = torch.compile(f, backend=graphs, dynamic=True,
                             options={"name": "swish", "target": "x86-64-v3",
                                      "on_stride_miss": "copy"})
    x = torch.randn(4, 6)
    assert_matches(compiled(x), f(x))
    made = graphs.made[0].compiled
    assert made._graph.name == "swish"
    assert made.artifact()["target"] == "TARGET_X86_64_V3"
    assert_matches(compiled(x.T.contiguous().T), f(x))


BREAKS = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch, kiln

def f(x):
    y = torch.relu(x @ x.T)
    print("a graph break")
    total = y.sum().item()
    z = torch.tanh(y) * 2.0
    if total > 0:
        z = z + x.mean()
    return z.softmax(dim=1)

made = []
def backend(gm, example_inputs, **kwargs):
    made.append(kiln.backend(gm, example_inputs, **kwargs))
    return made[-1]

torch.manual_seed(0)
x = torch.randn(6, 6)
got = torch.compile(f, backend=backend)(x)
torch.testing.assert_close(got, f(x), rtol=1e-4, atol=1e-4)
print(json.dumps([graph.compiled.artifact()["key"] for graph in made if graph.compiled]))
"""


def test_each_graph_of_a_broken_function_is_cached_and_a_fresh_process_hits_them_all():
    before = compiles()
    keys = fresh_process_result(BREAKS, HERE)
    assert len(keys) >= 3 and len(set(keys)) == len(keys), keys
    assert compiles() == before + len(keys), "each graph compiled on its own"
    assert fresh_process_result(BREAKS, HERE) == keys
    assert compiles() == before + len(keys), "the fresh process hit every graph"


def train_and_compare(model, batches, dynamic):
    """Trains a copy of `model` compiled with Kiln and `model` eagerly on the
    same batches; each step's output, every parameter's gradient and every
    buffer (batch norm's running statistics) must match."""
    eager = copy.deepcopy(model)
    graphs = Graphs()
    compiled = torch.compile(model, backend=graphs, dynamic=dynamic)
    for x in batches:
        model.zero_grad()
        eager.zero_grad()
        got = compiled(x)
        (got * got).sum().backward()
        want = eager(x)
        (want * want).sum().backward()
        assert_matches(got, want)
        for (name, p), q in zip(model.named_parameters(), eager.parameters()):
            assert p.grad is not None, name
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=name)
        for (name, b), c in zip(model.named_buffers(), eager.buffers()):
            torch.testing.assert_close(b, c, rtol=1e-4, atol=1e-4, msg=name)
    return graphs


def test_training_an_mlp_through_aot_autograd_gives_eagers_gradients():
    before = compiles()
    graphs = train_and_compare(mlp(), [torch.randn(5, 8), torch.randn(7, 8), torch.randn(3, 8)],
                               dynamic=True)
    assert len(graphs.made) == 1
    assert compiles() == before + 2, "one forward and one backward graph for every batch size"


def test_training_a_cnn_with_batch_norm_gives_eagers_gradients_and_statistics():
    torch.manual_seed(0)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                              torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 3, stride=2))
    train_and_compare(cnn.train(), [torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8)],
                      dynamic=False)


def test_inference_compiles_no_backward_graph():
    model = mlp()
    graphs = Graphs()
    compiled = torch.compile(model, backend=graphs)
    before = compiles()
    with torch.no_grad():
        x = torch.randn(4, 8)
        assert_matches(compiled(x), model(x))
    assert compiles() == before + 1
    assert not graphs.made[0].compiled._graph.name.endswith(("_forward", "_backward"))


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
