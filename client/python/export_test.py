"""kiln.compile, kiln.save and kiln.load of torch.export's ExportedPrograms
through a real kilnd (conftest.py starts it).

Runs under pytest (the checkout's .venv); each test case is counted by
the test command through the JUnit XML written to $XML_OUTPUT_FILE.
"""
import os
import re
import subprocess
import sys

import pytest
import torch
from torch.export import Dim

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402
from kiln import graph_pb2  # noqa: E402
from conftest import assert_matches, compiles  # noqa: E402


class Block(torch.nn.Module):
    """Parameters (Linear, LayerNorm), a buffer, a lifted constant, and a
    second input whose batch is twice x's."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 16))

    def forward(self, x, pairs):
        h = self.norm(self.linear(x)) * self.scale
        summed = pairs.view(-1, 2, 16).sum(1)
        return {"h": h, "both": torch.cat([h, summed], 1) + torch.tensor(0.25)}


def exported():
    """Block exported with x's batch a Dim in [2, 64] and pairs' twice it."""
    torch.manual_seed(0)
    model = Block().eval()
    batch = Dim("batch", min=2, max=64)
    program = torch.export.export(model, (torch.randn(4, 8), torch.randn(8, 16)),
                                  dynamic_shapes={"x": {0: batch}, "pairs": {0: 2 * batch}})
    return model, program


def batch_symbol(program):
    """The symbol torch.export gave x's batch (s77, say): the Kiln graph's too."""
    x = next(node for node in program.graph.nodes if node.op == "placeholder" and node.name == "x")
    return str(x.meta["val"].shape[0])


def inputs(batch):
    return torch.randn(batch, 8), torch.randn(2 * batch, 16)


def test_an_exported_module_compiles_once_for_every_batch_its_dim_allows():
    model, program = exported()
    before = compiles()
    compiled = kiln.compile(program)
    assert compiles() == before + 1
    with torch.no_grad():
        for batch in (2, 3, 17, 64):
            x, pairs = inputs(batch)
            got = compiled(x, pairs)
            assert list(got) == ["h", "both"]
            assert_matches(got, model(x, pairs))
            assert_matches(compiled(x=x, pairs=pairs), program.module()(x, pairs))
    assert compiles() == before + 1  # one artifact for every batch


def test_the_dims_become_symbols_and_their_range_a_relation():
    _, program = exported()
    graph = kiln.compile(program)._graph
    symbol = batch_symbol(program)
    # x, pairs, then the parameters, the buffer and the lifted constant.
    assert [entry.name for entry in graph.inputs] == [
        "x", "pairs", "p_linear_weight", "p_linear_bias", "p_norm_weight", "p_norm_bias",
        "b_scale", "c_lifted_tensor_0"]
    assert list(graph.inputs[0].type.sizes) == [graph_pb2.Dim(symbol=symbol),
                                                graph_pb2.Dim(constant=8)]
    assert list(graph.inputs[1].type.sizes) == [graph_pb2.Dim(symbol=symbol, multiplier=2),
                                                graph_pb2.Dim(constant=16)]
    assert list(graph.relations) == [graph_pb2.SymbolRelation(
        range=graph_pb2.SymbolRelation.Range(symbol=symbol, min=2, max=64))]


def test_sizes_outside_what_the_program_takes_are_guard_errors_and_compile_nothing():
    _, program = exported()
    compiled = kiln.compile(program)
    symbol = batch_symbol(program)
    before = compiles()
    refused = [
        (inputs(65), f"input 0 'x' dim 0 makes {symbol} = 65; the graph states "
                     f"2 <= {symbol} <= 64"),
        (inputs(1), f"input 0 'x' dim 0 makes {symbol} = 1; the graph states "
                    f"2 <= {symbol} <= 64"),
        ((torch.randn(4, 8), torch.randn(6, 16)),
         f"input 1 'pairs' dim 0 makes {symbol} = 3; input 0 'x' dim 0 made it 4"),
        ((torch.randn(4, 9), torch.randn(8, 16)), "input 0 'x' dim 1 is 9; the graph has 8"),
    ]
    with torch.no_grad():
        for (x, pairs), message in refused:
            with pytest.raises(kiln.GuardError, match=f"^{re.escape(message)}$"):
                compiled(x, pairs)
        # Other strides at sizes it takes are served (compiled once for them).
        x, pairs = torch.randn(8, 5).t(), torch.randn(10, 16)
        assert_matches(compiled(x, pairs), program.module()(x, pairs))
    assert compiles() == before + 1


class Counter(torch.nn.Module):
    """Buffers changed in place: torch.export's BUFFER_MUTATION outputs."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(1))
        self.register_buffer("total", torch.zeros(4))

    def forward(self, x):
        self.calls.add_(1)
        self.total.add_(x.sum(0))
        return x * self.calls


def test_buffers_the_program_mutates_are_written_back_after_each_call():
    eager = Counter()
    program = torch.export.export(Counter(), (torch.randn(3, 4),),
                                  dynamic_shapes={"x": {0: Dim("batch")}})
    compiled = kiln.compile(program)
    # A Dim with no min takes 0 and 1 too (each gets a static specialization).
    for batch in (2, 1, 5, 0):
        x = torch.randn(batch, 4)
        assert_matches(compiled(x), eager(x))
        assert_matches(program.state_dict["calls"], eager.calls)
        assert_matches(program.state_dict["total"], eager.total)
    assert eager.calls.item() == 4


class Masked(torch.nn.Module):
    """A padding mask in the activations' dtype (mask.to(x.dtype)): torch.export
    checks the mask's dtype first with _assert_tensor_metadata, an op that
    returns nothing."""

    def forward(self, x, mask):
        return x.softmax(-1) * mask.to(x.dtype)


def test_a_dtype_conversion_and_the_check_export_puts_before_it_compile():
    mask = torch.ones(2, 6, dtype=torch.int64)
    mask[1, 4:] = 0
    x = torch.randn(2, 6)
    compiled = kiln.compile(torch.export.export(Masked(), (x, mask)))
    assert_matches(compiled(x, mask), Masked()(x, mask))


class NumbersFirst(torch.nn.Module):
    """Arithmetic whose first operand is a number, which Kiln rewrites with
    the tensor first: a full_like for the division, a mul for the alpha."""

    def forward(self, x):
        return torch.div(2.0, x) + torch.add(0.5, x, alpha=3)


def test_arithmetic_with_a_number_first_compiles():
    x = torch.rand(3, 4) + 0.5
    compiled = kiln.compile(torch.export.export(NumbersFirst(), (x,)))
    torch.testing.assert_close(compiled(x), 2.0 / x + (0.5 + 3 * x), rtol=1e-6, atol=1e-6)


class Attention(torch.nn.Module):
    """GPT-2's attention: query, key and value split from one projection
    into heads, attended with F.scaled_dot_product_attention, and merged
    back with a view, which the CPU kernel's output (laid out as its query)
    allows."""

    def forward(self, qkv):
        batch, length, _ = qkv.shape
        q, k, v = (t.view(batch, length, 4, 8).transpose(1, 2) for t in qkv.split(32, 2))
        heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return heads.transpose(1, 2).reshape(batch, length, 32).view(-1, 32)


def test_attention_heads_merged_with_a_view_compile_for_every_length():
    qkv = torch.randn(2, 12, 96)
    program = torch.export.export(Attention(), (qkv,),
                                  dynamic_shapes={"qkv": {1: Dim("length", max=64)}})
    compiled = kiln.compile(program)
    for length in (12, 5, 64):
        qkv = torch.randn(2, length, 96)
        assert_matches(compiled(qkv), Attention()(qkv))
    assert_matches(kiln.compile(Attention(), [qkv])(qkv), Attention()(qkv))


def test_wrong_combinations_of_arguments_are_refused(tmp_path):
    model, program = exported()
    x, pairs = inputs(4)
    takes_none = ("takes no example_inputs with an ExportedProgram: its example inputs are the "
                  "ones it was exported with, and its Dims say which sizes vary and within what "
                  "range")
    with pytest.raises(TypeError, match=f"^kiln.compile {re.escape(takes_none)}$"):
        kiln.compile(program, [x, pairs])
    with pytest.raises(TypeError, match="^kiln.save takes no example_inputs, dynamic with"):
        kiln.save(program, [x, pairs], str(tmp_path / "p"), dynamic={0: 0})
    with pytest.raises(TypeError, match=re.escape(
            "kiln.save takes (fn, example_inputs, path), or (exported_program, path) for a "
            "torch.export.ExportedProgram")):
        kiln.save(model, str(tmp_path / "p"))
    with pytest.raises(TypeError, match=re.escape(
            "kiln.compile(fn, example_inputs) needs the inputs to trace fn with")):
        kiln.compile(model)
    assert not os.path.exists(tmp_path / "p")


def test_a_saved_program_loads_in_a_fresh_process_with_no_tracing(tmp_path):
    model, program = exported()
    package = str(tmp_path / "block.kiln")
    kiln.save(program, package)
    with open(os.path.join(package, "package.json")) as package_json:
        assert '"given_sizes_only": true' in package_json.read()
    sizes = (2, 9, 64)
    calls = [inputs(batch) for batch in sizes]
    torch.save(calls, str(tmp_path / "calls.pt"))
    code = f"""
import sys
import torch, torch.export, torch.fx.experimental.proxy_tensor as proxy_tensor
def traced(*args, **kwargs):
    raise AssertionError("traced")
torch.export.export = torch.export.load = proxy_tensor.make_fx = traced
torch.export.ExportedProgram.module = torch.export.ExportedProgram.run_decompositions = traced
sys.path.insert(0, {HERE!r})
import kiln
compiled = kiln.load({package!r})
with torch.no_grad():
    results = [compiled(*call) for call in torch.load({str(tmp_path / "calls.pt")!r})]
    try:
        compiled(torch.randn(65, 8), torch.randn(130, 16))
    except kiln.GuardError as error:
        print(error)
torch.save(results, {str(tmp_path / "results.pt")!r})
print(sorted(name for name in sys.modules
             if name in ("kiln._tracing", "kiln._export", "kiln._decompositions",
                         "kiln._functionalize", "kiln._graph", "kiln._symbols", "sympy",
                         "torch._dynamo")))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    symbol = batch_symbol(program)
    assert out.stdout.splitlines() == [
        f"input 0 'x' dim 0 makes {symbol} = 65; the graph states 2 <= {symbol} <= 64", "[]"]
    with torch.no_grad():
        for call, got in zip(calls, torch.load(str(tmp_path / "results.pt"))):
            assert_matches(got, model(*call))


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
