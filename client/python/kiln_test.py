"""The Python package through a real kilnd: compile, call, errors, fallback
(conftest.py starts the kilnd).

Runs under pytest (the checkout's .venv); each test case is counted by
the test command through the JUnit XML written to $XML_OUTPUT_FILE.
"""
import collections
import copy
import dataclasses
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from kiln.graph_pb2 import Graph, SymbolRelation  # noqa: E402
from conftest import assert_matches, compiles  # noqa: E402


def f(x):
    return torch.relu(x @ x.T + 1.0)


def test_a_function_matches_eager():
    x = torch.randn(64, 64)
    compiled = kiln.compile(f, [x])
    for _ in range(3):
        assert_matches(compiled(x), f(x))
    y = torch.randn(64, 64)
    assert_matches(compiled(y), f(y))


def test_a_module_sees_in_place_weight_updates():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    x = torch.randn(5, 16)
    with torch.no_grad():
        compiled = kiln.compile(model, [x])
        assert_matches(compiled(x), model(x))
        model[0].weight.mul_(2.0)
        model[2].bias.add_(1.0)
        assert_matches(compiled(x), model(x))


class TiedEmbeddings(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(10, 4)
        self.output = torch.nn.Linear(4, 10, bias=False)
        self.output.weight = self.embedding.weight

    def forward(self, tokens):
        return self.output(self.embedding(tokens))


def test_a_float16_module_matches_float32_math_and_sees_weight_updates():
    # Traced with fake tensors (eager has almost no float16 CPU kernels):
    # the module's parameters and buffers are made inputs first.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8),
                                torch.nn.GELU(), torch.nn.Flatten(), torch.nn.Linear(8 * 36, 4),
                                torch.nn.LayerNorm(4)).eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        half = copy.deepcopy(model).half()
        compiled = kiln.compile(half, [x.half()])
        got = compiled(x.half())
        assert got.dtype == torch.float16
        torch.testing.assert_close(got.float(), model(x), rtol=1e-2, atol=1e-2)
        half[4].weight.mul_(2.0)
        model[4].weight.copy_(half[4].weight.float())
        torch.testing.assert_close(compiled(x.half()).float(), model(x), rtol=1e-2, atol=1e-2)
        # Tied weights (an embedding and its output layer), and a dynamic dim.
        tied = TiedEmbeddings().eval()
        tokens = torch.randint(0, 10, (3,))
        expected = tied(tokens)
        compiled = kiln.compile(tied.half(), [tokens], dynamic={0: 0})
        torch.testing.assert_close(compiled(tokens).float(), expected, rtol=1e-2, atol=1e-2)
        more = torch.randint(0, 10, (5,))
        torch.testing.assert_close(compiled(more).float(), tied.float()(more),
                                   rtol=1e-2, atol=1e-2)


def test_tuple_outputs_come_back_as_a_tuple():
    def two(x):
        return x + 1, x * 2
    x = torch.randn(3, 4)
    plus, times = kiln.compile(two, [x])(x)
    torch.testing.assert_close(plus, x + 1)
    torch.testing.assert_close(times, x * 2)


def test_results_keep_their_structure_through_compile_and_load(tmp_path):
    def nested(x):
        return {"out": x + 1, "parts": [x * 2, (x - 1, None)], 3: x.sum()}
    x = torch.randn(3, 4)
    for compiled in (kiln.compile(nested, [x]),
                     (kiln.save(nested, [x], str(tmp_path / "nested")),
                      kiln.load(str(tmp_path / "nested")))[1]):
        result = compiled(x)
        assert list(result) == ["out", "parts", 3]
        torch.testing.assert_close(result["out"], x + 1)
        assert isinstance(result["parts"], list) and result["parts"][1][1] is None
        torch.testing.assert_close(result["parts"][1][0], x - 1)
        torch.testing.assert_close(result[3], x.sum())
    with pytest.raises(kiln.UnsupportedOpError, match="returns a set"):
        kiln.compile(lambda t: {t + 1}, [x], strict=True)


Halves = collections.namedtuple("Halves", "low high")


@dataclasses.dataclass
class ModelOutput:
    logits: torch.Tensor
    loss: torch.Tensor = None


class OutputDict(collections.OrderedDict):
    pass


def test_results_keep_their_types(tmp_path):
    local = collections.namedtuple("Local", "value")  # importable nowhere else

    def typed(x):
        return (torch.max(x, 1), Halves(x[:2], x[2:]), ModelOutput(x * 2),
                OutputDict(logits=x + 1), local(x - 1))
    x = torch.randn(3, 4)
    maximum, halves, output, mapping, mine = kiln.compile(typed, [x])(x)
    assert type(maximum) is torch.return_types.max
    torch.testing.assert_close(maximum.indices, x.max(1).indices)
    assert type(halves) is Halves
    torch.testing.assert_close(halves.high, x[2:])
    assert type(output) is ModelOutput and output.loss is None
    torch.testing.assert_close(output.logits, x * 2)
    assert type(mapping) is OutputDict
    torch.testing.assert_close(mapping["logits"], x + 1)
    assert type(mine) is local  # this process remembers it
    # A package in a fresh process: what imports there is rebuilt; the
    # local class comes back a plain tuple, saying so.
    kiln.save(typed, [x], str(tmp_path / "typed"))
    torch.save(x, str(tmp_path / "x.pt"))
    out = run_python(f"""
import warnings, torch, kiln
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    result = kiln.load({str(tmp_path / "typed")!r})(torch.load({str(tmp_path / "x.pt")!r}))
print(float(result[0].values.sum()), [type(r).__name__ for r in result])
print([str(w.message) for w in caught])
""")
    assert out.splitlines() == [
        f"{float(x.max(1).values.sum())} ['max', 'Halves', 'ModelOutput', 'OutputDict', 'tuple']",
        f"['kiln: results of type {__name__}:Local come "
        "back as plain tuples, lists and dicts: it cannot be imported in this process']"]


def test_arguments_are_taken_as_the_function_takes_them(tmp_path):
    def step(x, k, *, scale=2.0, mask=None, pair=(None, None), dtype=torch.float32):
        y = (x * k * scale).to(dtype)
        if mask is not None:
            y = y.masked_fill(mask, 0.0)
        if pair[0] is not None:
            y = y + pair[0] - pair[1]
        return y
    x = torch.randn(3, 4)
    mask, a, b = x > 0, torch.randn(3, 4), torch.randn(3, 4)
    compiled = kiln.compile(step, [x, 3], example_kwargs={"mask": mask, "pair": (a, b)},
                            dynamic={0: {0: "B"}, "mask": {0: "B"}, "pair_0": {0: "B"},
                                     "pair_1": {0: "B"}})
    assert [i.name for i in compiled._graph.inputs][:4] == ["x_1", "mask_1", "pair_0_1",
                                                            "pair_1_1"]
    before = compiles()
    torch.testing.assert_close(compiled(x, k=3, pair=(a, b), mask=mask),
                               step(x, 3, mask=mask, pair=(a, b)))
    y = torch.randn(7, 4)
    torch.testing.assert_close(compiled(y, 3, mask=y > 0, pair=(y, y * 2)),
                               step(y, 3, mask=y > 0, pair=(y, y * 2)))
    assert compiles() == before, "the traced layout, spelled otherwise, at another batch"
    # Other plain values or structures are other graphs, each compiled once.
    for _ in range(2):
        torch.testing.assert_close(compiled(x, 5, mask=mask, pair=(a, b)),
                                   step(x, 5, mask=mask, pair=(a, b)))
        torch.testing.assert_close(compiled(x, 3), step(x, 3))
        got = compiled(x, 3, dtype=torch.float64)
        assert got.dtype == torch.float64
        torch.testing.assert_close(got, step(x, 3, dtype=torch.float64))
    assert compiles() == before + 3
    with pytest.raises(TypeError, match="argument 'k' has type object: Kiln takes tensors"):
        kiln.compile(step, [x, object()])
    with pytest.raises(TypeError, match="does not fit the function's parameters"):
        compiled(x, 3, 4)
    # A package runs the layout it was saved with, whichever way it is spelled.
    kiln.save(step, [x, 3], str(tmp_path / "step"), example_kwargs={"mask": mask})
    loaded = kiln.load(str(tmp_path / "step"))
    torch.testing.assert_close(loaded(x, k=3, mask=mask), step(x, 3, mask=mask))
    with pytest.raises(kiln.GuardError, match="argument 'k' is 4; it was traced as 3: a loaded "
                                              "package runs the arguments it was saved with"):
        loaded(x, 4, mask=mask)
    # A value that changes at every call is no constant: after 8 layouts,
    # an error that says so, or eager with fallback="eager".
    for fallback in ("raise", "eager"):
        scaled = kiln.compile(lambda t, factor: t * factor, [x, 1.0], fallback=fallback)
        for factor in range(2, 9):
            torch.testing.assert_close(scaled(x, float(factor)), x * factor)
        if fallback == "raise":
            with pytest.raises(kiln.GuardError, match="argument 'factor' is 9.0; it was traced "
                               "as 1.0, and <lambda> is compiled for 8 layouts of its arguments "
                               "already: pass what changes from call to call as a tensor"):
                scaled(x, 9.0)
        else:
            with pytest.warns(RuntimeWarning, match="running eagerly") as warned:
                for factor in (9.0, 10.0, 11.0):  # one warning for all of them
                    torch.testing.assert_close(scaled(x, factor), x * factor)
            assert len([w for w in warned if "running eagerly" in str(w.message)]) == 1


SCALE = torch.tensor(3)


def test_numbers_made_tensors_are_folded_and_tensors_the_function_holds_stay_inputs():
    def scaled(x):
        return x * (SCALE // 2) + x * (torch.tensor(x.shape[0] + 1) // 2)
    x = torch.randn(4)
    compiled = kiln.compile(scaled, [x])
    torch.testing.assert_close(compiled(x), x * 1 + x * 2)
    SCALE.fill_(7)  # a global the function holds: updated in place, seen
    torch.testing.assert_close(compiled(x), x * 3 + x * 2)
    SCALE.fill_(3)

    class Scaled(torch.nn.Module):  # a module's plain tensor attribute, and its forward's global
        def __init__(self):
            super().__init__()
            self.factor = torch.tensor(5)

        def forward(self, x):
            return x * (self.factor // 2) + x * (SCALE // 2)
    module = Scaled()
    compiled = kiln.compile(module, [x])
    torch.testing.assert_close(compiled(x), x * 2 + x * 1)
    module.factor.fill_(9)
    SCALE.fill_(5)
    torch.testing.assert_close(compiled(x), x * 4 + x * 2)
    SCALE.fill_(3)


def test_a_dynamic_batch_compiles_once_for_every_size():
    def layer(x):
        return torch.softmax(x * 3.0, dim=-1)
    compiled = kiln.compile(layer, [torch.randn(4, 32)], dynamic={0: {0: "B"}})
    before = compiles()
    for batch in (2, 7, 33, 4):
        x = torch.randn(batch, 32)
        torch.testing.assert_close(compiled(x), layer(x))
    assert compiles() == before, "one symbolic artifact serves every batch >= 2"


def test_buckets_are_warmed_by_compile():
    def layer(x):
        return torch.tanh(x) * 2.0
    compiled = kiln.compile(layer, [torch.randn(4, 16)], dynamic={0: {0: "B"}},
                            buckets={"symbols": [{"symbol": "B", "sizes": [1, 3, 5]}]})
    before = compiles()
    for batch in (1, 3, 5):
        x = torch.randn(batch, 16)
        torch.testing.assert_close(compiled(x), layer(x))
    assert compiles() == before, "every bucket was compiled and loaded by compile()"
    # Loaded already; no GEMM or convolution to time: one run.
    assert compiled.warmup({"symbols": [{"symbol": "B", "sizes": [3]}]}) == {
        "buckets": 1, "runs": 1, "entries": 0, "local": 0, "padded_symbols": []}


def test_explain_shows_the_artifact_and_the_generated_code():
    compiled = kiln.compile(f, [torch.randn(16, 16)])
    text = kiln.explain(compiled)
    assert text.startswith("artifact " + compiled.artifact()["key"])
    assert "aten.mm.default" in text
    assert "kiln_run" in text, "the generated C++"


def test_a_wrong_shape_is_a_guard_error_naming_the_input_and_dim():
    compiled = kiln.compile(f, [torch.randn(8, 8)])
    compiled.artifact()  # loaded
    with pytest.raises(kiln.GuardError) as raised:
        compiled(torch.randn(8, 8, dtype=torch.float64))
    assert "input 0" in str(raised.value)


def test_strided_views_compile_once_per_layout_and_then_hit():
    compiled = kiln.compile(f, [torch.randn(16, 16)])
    base = torch.randn(16, 32)
    views = (base[:, :16], base[:, ::2], base.T[:16])
    before = compiles()
    for view in views:
        assert not view.is_contiguous()
        assert_matches(compiled(view), f(view))
    assert compiles() == before + 3, "one entry per stride pattern"
    for view in views:
        assert_matches(compiled(view), f(view))
    assert compiles() == before + 3, "each pattern hits its own entry"


def g(x):
    return torch.tanh(x) * 3.0 + x.sum(0)


def test_a_graph_traced_with_a_transposed_input_takes_contiguous_ones():
    x = torch.randn(12, 20, dtype=torch.float64)
    compiled = kiln.compile(g, [x.t()])
    before = compiles()
    for _ in range(3):
        y = torch.randn(20, 12, dtype=torch.float64)
        torch.testing.assert_close(compiled(y), g(y))
    assert compiles() == before + 1, "the contiguous layout compiles once"


def test_on_stride_miss_copy_runs_other_strides_on_the_traced_artifact():
    x = torch.randn(12, 20, dtype=torch.float64)
    compiled = kiln.compile(g, [x.t()], on_stride_miss="copy")
    before = compiles()
    base = torch.randn(20, 30, dtype=torch.float64)
    for view in (torch.randn(20, 12, dtype=torch.float64), base[:, 5:17],
                 torch.randn(12, dtype=torch.float64).expand(20, 12), x.t()):
        torch.testing.assert_close(compiled(view), g(view))
    assert compiles() == before, "copied into the traced layout: no compile"
    with pytest.raises(ValueError, match="on_stride_miss is 'specialize' or 'copy'"):
        kiln.compile(g, [x], on_stride_miss="copies")


def test_inputs_that_require_grad_need_no_grad():
    x = torch.randn(4, 4, requires_grad=True)
    compiled = kiln.compile(lambda t: t * 2, [x.detach()])
    with pytest.raises(kiln.KilnError, match="requires grad.*torch.no_grad"):
        compiled(x)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), x * 2)


def test_arguments_the_function_cannot_take_fail_as_the_function_does():
    compiled = kiln.compile(lambda t: t + 1, [torch.randn(3)])
    with pytest.raises(TypeError, match=r'can only concatenate list \(not "int"\) to list'):
        compiled([1.0, 2.0, 3.0])
    assert compiled(2.0) == 3.0  # no tensors: nothing to compile, the function's result
    with pytest.raises(TypeError, match="input 0 is a CPUComplexHalfType: Kiln runs dense CPU "
                                        "tensors of float32"):
        compiled(torch.zeros(3, dtype=torch.complex32))


def test_a_padded_batch_through_an_encoder_matches_eagers_plain_path():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2).eval()
    x, padding = torch.randn(2, 10, 32), torch.zeros(2, 10, dtype=torch.bool)
    padding[0, 7:], padding[1, 9:] = True, True
    with torch.no_grad():
        compiled = kiln.compile(lambda a, m: encoder(a, src_key_padding_mask=m), [x, padding])
        got = compiled(x, padding)
        nested = encoder(x, src_key_padding_mask=padding)  # eager's fast path, zero-padded
        encoder.use_nested_tensor = False  # what enable_nested_tensor set at construction
        plain = encoder(x, src_key_padding_mask=padding)
    torch.testing.assert_close(got, plain, rtol=1e-4, atol=1e-5)
    assert nested[0, 7:].count_nonzero() == 0 and nested[1, 9:].count_nonzero() == 0
    torch.testing.assert_close(got[0, :7], nested[0, :7], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got[1, :9], nested[1, :9], rtol=1e-4, atol=1e-5)


def test_writes_into_slices_of_an_intermediate_match_eager():
    def masks(x, row):
        m = x.new_zeros((6, 6))
        m[1:5:2, 2:4] = 3.0
        m[0] = row
        m[:, -1] += 1
        m[-2, 1:] *= 2
        return x + m

    def strided(x):
        y = x * 2
        y[:, ::3] = 0
        return y.relu()
    x, row = torch.randn(6, 6), torch.randn(6)
    torch.testing.assert_close(kiln.compile(masks, [x, row])(x, row), masks(x, row))
    torch.testing.assert_close(kiln.compile(strided, [x])(x), strided(x))

    def columns(t):
        y = t * 1
        y[:, 0:2] = 0.0
        y[:, -1] += 1
        return y
    batched = kiln.compile(columns, [torch.randn(3, 8)], dynamic={0: 0})
    for rows in (3, 7):
        x = torch.randn(rows, 8)
        torch.testing.assert_close(batched(x), columns(x))


def test_writes_at_index_tensors_and_masks_match_eager():
    def masked(x):
        y = x * 2
        y[y > 1] = 0.0
        return y

    def rows(x, i):
        y = x * 2
        y[i] = torch.ones(2, 6)
        return y

    def columns(x, i):
        y = x.clone()
        y[:, i] = -1.0
        return y

    def copied(x, z):
        y = x * 1
        y.copy_(z[0].int())
        return y + 1
    x = torch.randn(6, 6)
    torch.testing.assert_close(kiln.compile(masked, [x])(x), masked(x))
    for fn, i in ((rows, torch.tensor([0, -2])), (columns, torch.tensor([[1, 2], [5, 1]]))):
        torch.testing.assert_close(kiln.compile(fn, [x, i])(x, i), fn(x, i))
    z = torch.randn(1, 6) * 5
    torch.testing.assert_close(kiln.compile(copied, [x, z])(x, z), copied(x, z))

    def accumulated(x, i):
        y = x * 1
        y.index_put_((i,), torch.ones(2, 6), accumulate=True)
        return y
    i = torch.tensor([1, 3])
    torch.testing.assert_close(kiln.compile(accumulated, [x, i])(x, i), accumulated(x, i))


def test_batch_first_attention_compiles_without_pytorchs_fused_fast_paths():
    torch.manual_seed(0)
    attention = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    x = torch.randn(2, 10, 32)
    with torch.no_grad():
        compiled = kiln.compile(lambda q: attention(q, q, q, need_weights=False)[0], [x])
        torch.testing.assert_close(compiled(x), attention(x, x, x, need_weights=False)[0],
                                   rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(kiln.compile(layer, [x])(x), layer(x), rtol=1e-4, atol=1e-5)


def test_indexing_padding_and_rolling_match_eager():
    x = torch.randn(5, 6, 7, 3)
    i, j = torch.tensor([[0, 4], [-1, 2]]), torch.tensor([1, -2])
    table, positions = torch.randn(49, 3), torch.randint(0, 49, (16,))
    cases = [
        (lambda t, a: t[a], [x, i]),
        (lambda t, a: t[:, a], [x, i]),
        (lambda t, a, b: t[:, a, b], [x, i, j]),
        (lambda t, a, b: t[a, :, b], [x, i, j]),  # apart: the index's dims come first
        (lambda t, a: t[a.view(-1)].view(4, 4, -1), [table, positions]),
        (lambda t, a, b: t[a, b], [x[..., 0] > 0, i, j]),  # bools (transformers' padding masks)
        (lambda t: torch.nn.functional.pad(t, (1, 2, -1, 3), value=0.5), [x]),
        (lambda t: torch.roll(t, (2, -1), (0, 1)), [x]),
        # Reflected and replicated edges, 1-d to 3-d, a crop among them.
        (lambda t: torch.nn.functional.pad(t, (1, 2, 2, 1), mode="reflect"), [x]),
        (lambda t: torch.nn.functional.pad(t[0], (2, 1), mode="reflect"), [x]),
        (lambda t: torch.nn.functional.pad(t, (1, 2, 0, 1, 2, 1), mode="reflect"), [x[None]]),
        (lambda t: torch.nn.functional.pad(t, (1, 1, 2, 2, 1, 1), mode="replicate"), [x[None]]),
        (lambda t: torch.nn.functional.pad(t[0], (4, 0), mode="replicate"), [x]),
        (lambda t: torch.nn.functional.pad(t, (-1, 2, 0, 3), mode="replicate"), [x]),
    ]
    for fn, args in cases:
        torch.testing.assert_close(kiln.compile(fn, args)(*args), fn(*args))
    with pytest.raises(kiln.UnsupportedOpError, match=r"reflection padding \(3, 0\) of dim 1"):
        kiln.compile(lambda t: torch.nn.functional.pad(t, (0, 0, 3, 0), mode="reflect"),
                     [torch.randn(1, 3, 2)], strict=True)


def test_interpolation_matches_eager():
    interpolate = torch.nn.functional.interpolate
    image, volume, line = torch.randn(1, 3, 7, 9), torch.randn(2, 3, 4, 5, 6), torch.randn(2, 3, 10)
    cases = [
        (lambda t: interpolate(t, size=(13, 16), mode="bilinear"), image),
        (lambda t: interpolate(t, size=(12, 12), mode="bilinear", align_corners=True), image),
        (lambda t: interpolate(t, scale_factor=2, mode="bilinear"), image),
        (lambda t: interpolate(t, scale_factor=2, mode="nearest"), image),
        (lambda t: interpolate(t, size=(5, 17), mode="nearest"), image),
        (lambda t: interpolate(t, scale_factor=1.7, mode="nearest"), image),
        (lambda t: interpolate(t, scale_factor=(2, 1.5, 3), mode="nearest"), volume),
        (lambda t: interpolate(t, size=23, mode="nearest"), line),
    ]
    for fn, x in cases:
        torch.testing.assert_close(kiln.compile(fn, [x])(x), fn(x))


def test_recurrent_nets_match_eager():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(16, 32, num_layers=2, batch_first=True).eval()
    gru = torch.nn.GRU(16, 32, batch_first=True, bidirectional=True).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        output, (hidden, cell) = kiln.compile(lstm, [x])(x)
        expected, (expected_hidden, expected_cell) = lstm(x)
        for got, want in ((output, expected), (hidden, expected_hidden), (cell, expected_cell)):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(kiln.compile(gru, [x])(x)[0], gru(x)[0], rtol=1e-4, atol=1e-5)


def test_adaptive_max_pooling_matches_eager_or_names_the_sizes():
    x = torch.randn(2, 4, 8, 9)
    for fn in (torch.nn.AdaptiveMaxPool2d((2, 3)),
               lambda t: torch.nn.functional.adaptive_max_pool2d(t, 1, return_indices=True),
               lambda t: torch.nn.functional.adaptive_max_pool1d(t.flatten(2), 1),
               lambda t: torch.nn.functional.adaptive_max_pool2d(t, (3, 5), return_indices=True)):
        torch.testing.assert_close(kiln.compile(fn, [x], strict=True)(x), fn(x))


def test_ops_kiln_takes_decomposed_match_eager():
    functional = torch.nn.functional
    torch.manual_seed(0)
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    targets, classes, image = (torch.rand(4, 6) > 0.5).float(), torch.tensor([0, 5, 2, 3]), \
        torch.randn(2, 3, 6, 6)
    cases = [
        functional.celu, functional.glu, functional.mish, functional.logsigmoid,
        lambda a: functional.softplus(a, beta=2, threshold=5),
        lambda a: functional.threshold(a, 0.1, 20.0),
        lambda a: functional.binary_cross_entropy(a.sigmoid(), targets),
        lambda a: functional.binary_cross_entropy_with_logits(a, targets),
        lambda a: functional.soft_margin_loss(a, targets * 2 - 1),
        lambda a: functional.cross_entropy(a, classes),
        lambda a: functional.nll_loss(functional.log_softmax(a, 1), classes, reduction="sum"),
        lambda a: torch.addcdiv(a, y, targets + 1, value=0.5),
        lambda a: torch.addcmul(a, y, targets, value=0.5),
        lambda a: torch.addr(a, a[:, 0], a[0]),
        lambda a: torch.dot(a[0], a[1]), lambda a: torch.mv(a, a[0]),
        torch.diag_embed, lambda a: a[:, :4].diagonal(), torch.rot90,
        lambda a: a[:, :4] + torch.eye(4),
        lambda a: functional.unfold(image * a.sum(), 3, padding=1),
        lambda a: functional.fold(a.reshape(1, 4, 6), (3, 4), 2),  # overlap-add
        lambda a: functional.fold(a, (2, 6), (1, 2), stride=(1, 2)),  # unbatched, strided
        lambda a: functional.fold(functional.unfold(image * a.sum(), 3, padding=1), (6, 6), 3,
                                  padding=1),
        lambda a: functional.interpolate(image * a.sum(), scale_factor=2, mode="bicubic"),
        lambda a: a.logsumexp(1), torch.sinc,
        lambda a: functional.normalize(a, dim=1), lambda a: a.norm(dim=1), lambda a: a.norm(),
        lambda a: torch.linalg.vector_norm(a, 1, dim=(0, 1)),
        lambda a: torch.linalg.vector_norm(a, float("inf"), dim=1, keepdim=True),
        lambda a: functional.pairwise_distance(a, y),
        lambda a: torch.logit(a.sigmoid(), 1e-6),
        # A number first: as torch.sub(1, x) is written, and as some of
        # PyTorch's decompositions write it.
        lambda a: torch.sub(1.0, a), lambda a: torch.sub(1.0, a, alpha=2),
        lambda a: torch.add(2.0, a, alpha=3), lambda a: torch.mul(2.0, a),
        lambda a: torch.div(2.0, a), lambda a: torch.div(3, (a * 10).long() + 100),
        # A number to a tensor's power; factories of windows and ranges.
        lambda a: 2 ** a, lambda a: 1 ** a, lambda a: 10 ** a.round(),
        lambda a: torch.nn.functional.rrelu(a, training=False),
        lambda a: a.unfold(1, 4, 1) * torch.hann_window(4),
        lambda a: a * torch.hann_window(6, periodic=False) + torch.hamming_window(1),
        lambda a: a * torch.hamming_window(6, True, 0.6, 0.4),
        lambda a: a + torch.linspace(-3, 5, 6), lambda a: a + torch.linspace(0, 1, 7)[1:],
        lambda a: a + torch.linspace(2, 5, 1),
        lambda a: a * torch.logspace(-2, 2, 6), lambda a: a * torch.logspace(0, 3, 6, base=2),
    ]
    with torch.no_grad():
        for fn in cases:
            torch.testing.assert_close(kiln.compile(fn, [x])(x), fn(x), rtol=1e-4, atol=1e-5)
    special = torch.tensor([[1.0, float("nan"), float("inf"), -2.0],
                            [float("-inf"), 0.0, -0.0, 3.0]])
    cases = [
        torch.isnan, torch.isinf, torch.isfinite, torch.isposinf, torch.isneginf, torch.nan_to_num,
        lambda a: torch.nan_to_num(a, 1.0, 100.0, -100.0),
        lambda a: (a > 0) & (a < 3), lambda a: (a > 0) | (a < -1), lambda a: (a > 0) ^ (a < 3),
        lambda a: ~(a > 0), lambda a: (a > -5).all(), lambda a: (a > 2).any(1),
        lambda a: (a > -5).all(1, keepdim=True), lambda a: torch.where(a.isfinite(), a, 0.0),
    ]
    for fn in cases:
        torch.testing.assert_close(kiln.compile(fn, [special])(special), fn(special),
                                   equal_nan=True)


def test_round_to_decimals_any_and_all_over_dims_and_the_copy_ops_compile_natively():
    x = torch.tensor([[1.2345, -2.5, 1250.0, 0.0], [-0.0049, 3.14159, -1234.5, float("nan")]])
    cases = [
        lambda a: torch.round(a, decimals=2), lambda a: torch.round(a, decimals=-2),
        lambda a: torch.any(a > 3, dim=(0, 1)), lambda a: torch.all(a > -2000, dim=(1,)),
        lambda a: torch.ops.aten.view_copy(a, [8]), lambda a: torch.ops.aten.permute_copy(a, [1, 0]),
        lambda a: torch.fmax(a, a.flip(0)), lambda a: torch.fmin(a, -a),
    ]
    for fn in cases:
        torch.testing.assert_close(kiln.compile(fn, [x], strict=True)(x), fn(x), rtol=0, atol=0,
                                   equal_nan=True)

def test_int8_uint8_and_int16_wrap_promote_and_take_bitwise_ops_as_eager():
    small = torch.tensor([[1, 2, 7, -8], [127, -128, 0, 5]], dtype=torch.int8)
    unsigned = torch.tensor([[255, 1, 128, 0], [3, 200, 17, 64]], dtype=torch.uint8)
    cases = [
        lambda a, u: a + a, lambda a, u: a * 3 - u, lambda a, u: (a * a).short() + u,
        lambda a, u: a & 6, lambda a, u: a | (u >> 1), lambda a, u: ~a ^ u, lambda a, u: u << 3,
        lambda a, u: a >> 9, lambda a, u: torch.fmax(a.float(), u.float() / 0),
        lambda a, u: (a.long() << 40) & u, lambda a, u: a.byte() + u, lambda a, u: u.char() - 1,
        lambda a, u: (a > 0) & (u > 100), lambda a, u: a.sum() + u.sum(1),
    ]
    for fn in cases:
        compiled = kiln.compile(fn, [small, unsigned], strict=True)
        torch.testing.assert_close(compiled(small, unsigned), fn(small, unsigned), rtol=0, atol=0,
                                   equal_nan=True)


def test_the_tracer_takes_torchs_core_table_and_leaves_the_ops_kiln_lowers():
    from torch._decomp import core_aten_decompositions
    from kiln._decompositions import DECOMPOSITIONS, KILN_OPS, PARTIAL
    with open(os.path.join(HERE, "..", "..", "docs", "OPS.md")) as doc:
        listed = {line.split("`")[1] for line in doc if line.startswith("| `aten.")
                  or line.startswith("| `prims.")}
    assert KILN_OPS == listed

    def lowered(op):
        namespace, name, overload = str(op).split(".")
        return f"{namespace}.{name.rstrip('_')}.{overload}" in KILN_OPS
    assert [str(op) for op in DECOMPOSITIONS if lowered(op)] == sorted(PARTIAL)
    # Ops that may draw random numbers keep torch's own forms: they run
    # through torch, drawing as eager does (kiln/_random.py).
    missing = [str(op) for op in core_aten_decompositions()
               if str(op).startswith("aten.") and not lowered(op) and op not in DECOMPOSITIONS
               and torch.Tag.nondeterministic_seeded not in op.tags]
    assert missing == []


def test_ops_only_torchs_core_table_decomposes_match_eager():
    functional = torch.nn.functional
    torch.manual_seed(0)
    x, image = torch.randn(2, 3, 8), torch.randn(1, 4, 4, 6)

    def gradient(fn):
        def step(a):
            a = a.detach().requires_grad_(True)
            out = fn(a)
            return torch.autograd.grad((out * torch.arange(out.numel()).view(out.shape)).sum(),
                                       [a])[0]
        return step
    cases = [
        (gradient(functional.silu), x), (gradient(functional.mish), x),
        (gradient(lambda a: functional.pad(a, (2, 1), mode="reflect")), x),
        (lambda a: functional.interpolate(a, scale_factor=2, mode="linear"), x),
        (lambda a: functional.interpolate(a, size=(3, 9), mode="nearest-exact"), image),
        (lambda a: functional.max_unpool2d(*functional.max_pool2d(a, 2, return_indices=True),
                                           2), image),
        (lambda a: functional.channel_shuffle(a, 2), image),
        (lambda a: torch.linalg.vector_norm(a, 3, dim=-1), x),
    ]
    for fn, a in cases:
        torch.testing.assert_close(kiln.compile(fn, [a])(a), fn(a), rtol=1e-4, atol=1e-5)


def cross_entropy_step(label_smoothing, reduction, weight):
    """A classifier's loss and its weight's gradient."""
    def step(x, target, w):
        w = w.detach().requires_grad_(True)
        logits = torch.einsum("nc...,cd->nd...", x, w)
        loss = torch.nn.functional.cross_entropy(logits, target, weight, reduction=reduction,
                                                 label_smoothing=label_smoothing)
        loss = loss if reduction != "none" else (loss * loss).sum()
        return [loss] + list(torch.autograd.grad(loss, [w]))
    return step


def test_cross_entropy_and_its_gradient_match_eager_with_ignored_targets():
    torch.manual_seed(0)
    x, w, weight = torch.randn(5, 6), torch.randn(6, 6), torch.rand(6)
    target = torch.tensor([0, 2, 5, 1, -100])  # -100: ignored, as padding
    images, pixels = torch.randn(2, 6, 3, 4), torch.randint(0, 6, (2, 3, 4))
    pixels[0, 1] = -100
    cases = [(cross_entropy_step(smoothing, reduction, class_weight), inputs)
             for smoothing in (0.0, 0.1) for reduction in ("mean", "sum", "none")
             for class_weight in (None, weight) if not (smoothing and class_weight is not None)
             for inputs in ([x, target, w], [images, pixels, w])]
    # Every target ignored: a mean of nothing is NaN, its gradient 0.
    cases.append((cross_entropy_step(0.0, "mean", None), [x, torch.full((5,), -100), w]))
    for step, inputs in cases:
        torch.testing.assert_close(kiln.compile(step, inputs)(*inputs), step(*inputs),
                                   equal_nan=True)
    # Traced with every target counted, run with one ignored: not counted.
    loss = lambda a, t: torch.nn.functional.cross_entropy(a, t)  # noqa: E731
    compiled = kiln.compile(loss, [x, torch.tensor([0, 2, 5, 1, 3])])
    torch.testing.assert_close(compiled(x, target), loss(x, target))


def convolution_gradients(conv):
    """conv's result and its input's, weight's and bias's gradients."""
    def step(x, w, b, grad):
        leaves = [t.detach().requires_grad_(True) for t in (x, w, b)]
        y = conv(*leaves)
        return [y] + list(torch.autograd.grad(y, leaves, grad))
    return step


def test_convolution_gradients_match_eager():
    functional = torch.nn.functional
    torch.manual_seed(0)
    cases = [  # strides, padding, dilation, groups (depthwise), 1-d and 3-d
        (lambda x, w, b: functional.conv2d(x, w, b, padding=1), (2, 4, 8, 8), (6, 4, 3, 3)),
        (lambda x, w, b: functional.conv2d(x, w, b, stride=2, padding=1), (2, 4, 9, 9),
         (6, 4, 3, 3)),
        (lambda x, w, b: functional.conv2d(x, w, b, stride=2), (2, 4, 8, 8), (6, 4, 3, 3)),
        (lambda x, w, b: functional.conv2d(x, w, b, dilation=2, padding=2), (2, 4, 8, 8),
         (6, 4, 3, 3)),
        (lambda x, w, b: functional.conv2d(x, w, b, groups=2, padding=1), (2, 4, 8, 8),
         (6, 2, 3, 3)),
        (lambda x, w, b: functional.conv2d(x, w, b, groups=4, padding=1), (2, 4, 8, 8),
         (4, 1, 3, 3)),
        (lambda x, w, b: functional.conv2d(x, w, b, stride=(2, 1), padding=(1, 0)),
         (1, 3, 7, 6), (5, 3, 3, 2)),
        (lambda x, w, b: functional.conv1d(x, w, b, stride=2, padding=1), (2, 4, 11), (6, 4, 3)),
        (lambda x, w, b: functional.conv3d(x, w, b, padding=1), (1, 2, 4, 5, 5), (3, 2, 3, 3, 3)),
    ]
    for conv, x_shape, w_shape in cases:
        x, w, b = torch.randn(x_shape), torch.randn(w_shape), torch.randn(w_shape[0])
        inputs = [x, w, b, torch.randn(conv(x, w, b).shape)]
        step = convolution_gradients(conv)
        torch.testing.assert_close(kiln.compile(step, inputs)(*inputs), step(*inputs),
                                   rtol=1e-4, atol=1e-4)


class SmallCnn(torch.nn.Module):
    """A training step: convolutions (one depthwise), batch norm in training
    mode, max and adaptive average pooling, hardswish, a residual add and
    cross entropy with label smoothing and an ignored target."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8, track_running_stats=False)
        self.depthwise = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.head = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x, target):
        functional = torch.nn.functional
        y = functional.max_pool2d(functional.relu(self.norm(self.conv(x))), 2)
        y = functional.adaptive_avg_pool2d(functional.hardswish(self.depthwise(y) + y), 4)
        loss = functional.cross_entropy(self.head(y.flatten(1)), target, label_smoothing=0.1)
        return [loss] + list(torch.autograd.grad(loss, list(self.parameters())))


def test_a_cnn_training_step_matches_eager():
    torch.manual_seed(0)
    step, x, target = SmallCnn(), torch.randn(4, 3, 16, 16), torch.tensor([1, 2, 3, -100])
    torch.testing.assert_close(kiln.compile(step, [x, target])(x, target), step(x, target),
                               rtol=1e-4, atol=1e-5)


COUNTER = torch.zeros(())


class Counting(torch.nn.Module):
    """Counts its calls in a buffer and its rows in a global it holds, and
    keeps its last input in a buffer it never reads."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.register_buffer("last", torch.zeros(5, 2))

    def forward(self, x):
        self.calls += 1
        COUNTER.add_(x.shape[0])
        self.last.copy_(x)
        return x * 2


def assert_changes_match(compiled_fn, eager_fn, make_inputs, calls=3):
    """compiled_fn compiled on inputs that compiling leaves as they were,
    then called beside eager_fn on equal inputs: equal results, and equal
    inputs and module state after each call."""
    compiled_inputs, eager_inputs = make_inputs(), make_inputs()
    example = make_inputs()
    before = [t.clone() for t in example]
    state = {name: t.clone() for name, t in getattr(compiled_fn, "state_dict", dict)().items()}
    compiled = kiln.compile(compiled_fn, example)
    for changed, kept in zip(example, before):
        torch.testing.assert_close(changed, kept, rtol=0, atol=0)
    for name, t in getattr(compiled_fn, "state_dict", dict)().items():
        torch.testing.assert_close(t, state[name], rtol=0, atol=0, msg=f"{name} after compile")
    for call in range(calls):
        torch.testing.assert_close(compiled(*compiled_inputs), eager_fn(*eager_inputs),
                                   rtol=1e-4, atol=1e-5)
        for mine, theirs in zip(compiled_inputs, eager_inputs):
            torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
        for (name, mine), theirs in zip(getattr(compiled_fn, "state_dict", dict)().items(),
                                        getattr(eager_fn, "state_dict", dict)().values()):
            torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5,
                                       msg=f"{name} after call {call}")


def test_inputs_changed_in_place_by_calls_on_several_threads_each_get_their_own_values():
    # New values are written into buffers the compiled function keeps
    # between calls (one set per call in flight), then copied back.
    import threading

    def step(state, x):
        state.mul_(0.5).add_(x)
        return state.sum(dim=1)
    compiled = kiln.compile(step, [torch.zeros(64, 256), torch.ones(64, 256)])
    failures = []

    def worker(seed):
        generator = torch.Generator().manual_seed(seed)
        state, eager_state = torch.zeros(64, 256), torch.zeros(64, 256)
        for call in range(200):
            x = torch.randn(64, 256, generator=generator)
            got, want = compiled(state, x), step(eager_state, x)
            try:
                torch.testing.assert_close(state, eager_state)
                torch.testing.assert_close(got, want)
            except AssertionError as error:
                failures.append(f"thread {seed}, call {call}: {error}")
                return
    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_inputs_changed_in_place_are_changed_as_eager_changes_them():
    def chain(x, y):
        x.add_(1)
        x.mul_(y)
        return x.sum()

    def through_a_view(x):
        x[0].mul_(2)
        return x + 1

    def broadcast_copy(x, y):
        x.copy_(y)
        return x * y

    def made_here(x):
        made = torch.tensor([1.0, 2.0, 3.0])  # fresh at each eager call
        made.add_(x)
        return made

    def seeded(*shapes):
        return lambda: [torch.randn(shape, generator=torch.Generator().manual_seed(i))
                        for i, shape in enumerate(shapes)]
    assert_changes_match(chain, chain, seeded((4, 4), (4, 4)))
    assert_changes_match(through_a_view, through_a_view, seeded((3, 3)))
    assert_changes_match(broadcast_copy, broadcast_copy, seeded((3, 4), (4,)))
    assert_changes_match(made_here, made_here, seeded((3,)))
    compiled, eager = Counting(), Counting()
    assert_changes_match(compiled, eager, seeded((5, 2)))
    assert compiled.calls.item() == 3 and COUNTER.item() == 2 * 3 * 5  # both modules' calls

    class Trainer(torch.nn.Module):
        """A whole training step: loss, gradients, and SGD with momentum on
        its own parameters, the velocities in buffers."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                           torch.nn.Linear(16, 4))
            for i, parameter in enumerate(self.net.parameters()):
                self.register_buffer(f"velocity{i}", torch.zeros_like(parameter))

        def forward(self, x, target):
            parameters = list(self.net.parameters())
            gradients = torch.autograd.grad(
                torch.nn.functional.mse_loss(self.net(x), target), parameters)
            with torch.no_grad():
                for i, parameter in enumerate(parameters):
                    velocity = getattr(self, f"velocity{i}").mul_(0.9).add_(gradients[i])
                    parameter.sub_(0.1 * velocity)
            return gradients[0].norm()
    assert_changes_match(Trainer(), Trainer(), seeded((5, 8), (5, 4)))

    class OutOfBand(torch.nn.Module):  # writes a parameter through out=
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(3), requires_grad=False)

        def forward(self, x):
            torch.mul(self.scale, 2, out=self.scale)
            return x * self.scale
    with pytest.raises(kiln.UnsupportedOpError, match=r"changes 1 of its module's parameters in "
                                                      r"place other than through an in-place "
                                                      r"function \(out=, say; shaped \[3\]\)"):
        kiln.compile(OutOfBand(), [torch.randn(3)], strict=True)

    def sgd_step(weight, gradient):  # parameters passed in are arguments like any other
        with torch.no_grad():
            weight.add_(gradient, alpha=-0.5)
        return weight.sum()

    def parameters():
        return [torch.nn.Parameter(torch.ones(3), requires_grad=False), torch.full((3,), 2.0)]
    assert_changes_match(sgd_step, sgd_step, parameters)

    def changes_one_reads_other(changed, read):
        changed.add_(1)
        return read * 2
    x = torch.randn(4)
    shared = x.clone()
    with pytest.raises(kiln.GuardError, match="argument tensors 0 and 1 share memory"):
        kiln.compile(changes_one_reads_other, [x.clone(), x.clone()])(shared, shared)
    torch.testing.assert_close(shared, x, rtol=0, atol=0)  # refused before any change
    with pytest.warns(RuntimeWarning, match="share memory"):
        result = kiln.compile(changes_one_reads_other, [x.clone(), x.clone()],
                              fallback="eager")(shared, shared[:])
    torch.testing.assert_close(result, (x + 1) * 2)


def test_a_batch_norm_training_step_updates_the_running_statistics_as_eager(tmp_path):
    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(1)
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.norm = torch.nn.BatchNorm2d(8)
            self.shared = torch.nn.BatchNorm1d(8, momentum=0.3)  # applied twice
            self.head = torch.nn.Linear(8, 4)

        def forward(self, x, target):
            y = torch.relu(self.norm(self.conv(x))).mean((2, 3))
            y = self.shared(self.shared(y) * 2)
            loss = torch.nn.functional.cross_entropy(self.head(y), target)
            return [loss] + list(torch.autograd.grad(loss, list(self.parameters())))

    def inputs():
        generator = torch.Generator().manual_seed(0)
        return [torch.randn(4, 3, 8, 8, generator=generator) * 3 + 1, torch.tensor([0, 1, 2, 3])]
    compiled, eager = Step().train(), Step().train()
    assert_changes_match(compiled, eager, inputs)
    assert compiled.norm.num_batches_tracked.item() == 3
    assert not torch.equal(compiled.norm.running_var, torch.ones(8))
    # A package keeps the writes: loaded onto the module, it goes on updating it.
    kiln.save(compiled, inputs(), str(tmp_path / "step"))
    loaded = kiln.load(str(tmp_path / "step"), compiled)
    x, target = inputs()
    torch.testing.assert_close(loaded(x, target), eager(x, target), rtol=1e-4, atol=1e-5)
    for name, mine in compiled.state_dict().items():
        torch.testing.assert_close(mine, eager.state_dict()[name], rtol=1e-4, atol=1e-5, msg=name)
    assert compiled.norm.num_batches_tracked.item() == 4


class CachedAttention(torch.nn.Module):
    """One decoding step of self-attention: the step's keys and values are
    written into cache buffers at `position` (a tensor, so that one graph
    serves every step), and the query attends to the positions so far."""

    def __init__(self, width=32, heads=4, longest=16, batch=2):
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.heads, self.head_width = heads, width // heads
        self.register_buffer("keys", torch.zeros(batch, heads, longest, width // heads))
        self.register_buffer("values", torch.zeros(batch, heads, longest, width // heads))

    def forward(self, x, position):
        batch = x.shape[0]
        q, k, v = self.qkv(x).view(batch, 1, 3, self.heads, self.head_width).permute(2, 0, 3, 1, 4)
        self.keys[:, :, position] = k
        self.values[:, :, position] = v
        scores = q @ self.keys.transpose(-1, -2) / self.head_width ** 0.5
        scores = scores.masked_fill(torch.arange(self.keys.shape[2]) > position, float("-inf"))
        y = torch.softmax(scores, -1) @ self.values
        return self.out(y.transpose(1, 2).reshape(batch, 1, -1))


class Smoothing(torch.nn.Module):
    """Rebinds its attributes in forward, as recurrent state often is: a
    buffer counting calls and a plain tensor attribute."""

    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))
        self.state = torch.zeros(3)

    def forward(self, x):
        self.steps = self.steps + 1
        self.state = self.state * 0.5 + x
        return self.state * self.steps


def test_attributes_a_forward_rebinds_hold_what_eager_leaves():
    compiled_module, eager = Smoothing(), Smoothing()
    compiled = kiln.compile(compiled_module, [torch.ones(3)])
    assert compiled_module.steps.item() == 0 and not compiled_module.state.any()  # trace undone
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), eager(x))
        torch.testing.assert_close(compiled_module.state, eager.state)
        assert compiled_module.steps.item() == eager.steps.item()

    class Remembers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = None

        def forward(self, x):
            self.hidden = x * 2
            return x + 1

    class Grows(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", torch.zeros(0, 3))

        def forward(self, x):
            self.seen = torch.cat([self.seen, x])
            return self.seen.sum(0)
    remembers, grows = Remembers(), Grows()
    with pytest.raises(kiln.UnsupportedOpError, match=r"sets Remembers.hidden from None to "
                                                      r"float32\[3\].*must keep its shape"):
        kiln.compile(remembers, [torch.ones(3)], strict=True)
    with pytest.raises(kiln.UnsupportedOpError, match=r"sets Grows.seen from float32\[0, 3\] to "
                                                      r"float32\[1, 3\]"):
        kiln.compile(grows, [torch.ones(1, 3)], strict=True)
    assert remembers.hidden is None and grows.seen.shape == (0, 3)  # as before the trace


def test_a_decoding_step_writes_its_key_value_cache_as_eager(tmp_path):
    torch.manual_seed(0)
    compiled_module = CachedAttention().eval()
    eager = copy.deepcopy(compiled_module)
    example = [torch.randn(2, 1, 32), torch.tensor([0])]
    with torch.no_grad():
        compiled = kiln.compile(compiled_module, example)
        assert not compiled_module.keys.any()  # the trace's write is undone
        # A package loaded onto the module writes its caches too.
        kiln.save(compiled_module, example, str(tmp_path / "step"))
        loaded = kiln.load(str(tmp_path / "step"), compiled_module)
        for step in range(5):
            x, position = torch.randn(2, 1, 32), torch.tensor([step])
            step_fn = compiled if step < 3 else loaded
            torch.testing.assert_close(step_fn(x, position), eager(x, position),
                                       rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(compiled_module.keys, eager.keys, rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(compiled_module.values, eager.values, rtol=1e-4, atol=1e-5)
    written = compiled_module.keys
    assert written[:, :, :5].abs().sum() > 0 and not written[:, :, 5:].any()


def weight_gradient(layer):
    """The gradient of layer(x @ w).sum() with respect to w."""
    def step(x, w):
        w = w.detach().requires_grad_(True)
        return list(torch.autograd.grad(layer(x @ w).sum(), [w]))
    return step


def test_activation_loss_and_view_gradients_match_eager():
    functional = torch.nn.functional
    torch.manual_seed(0)
    x, w, target = torch.randn(4, 6), torch.randn(6, 6), torch.rand(4, 6)
    layers = [
        torch.tanh, torch.sigmoid, functional.softplus, lambda y: functional.softplus(y, 2, 1),
        functional.logsigmoid, functional.glu, functional.hardshrink, functional.softshrink,
        lambda y: functional.binary_cross_entropy(torch.sigmoid(y), target),
        lambda y: functional.binary_cross_entropy(torch.sigmoid(y), target, reduction="sum"),
        lambda y: functional.binary_cross_entropy_with_logits(y, target),
        lambda y: torch.logit(torch.sigmoid(y), 1e-6),
        lambda y: functional.soft_margin_loss(y, target * 2 - 1),
        lambda y: y[:, 1:4] * 3, lambda y: y[2] * y[:, 0].sum(), lambda y: y.chunk(2, 1)[1] ** 2,
    ]
    for layer in layers:
        step = weight_gradient(layer)
        torch.testing.assert_close(kiln.compile(step, [x, w])(x, w), step(x, w))


class LstmLanguageModel(torch.nn.Module):
    """A training step: embeddings, an LSTM (sigmoid and tanh gradients),
    cross entropy over [batch, vocabulary, time] with padded targets."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(50, 16)
        self.lstm = torch.nn.LSTM(16, 32, batch_first=True)
        self.head = torch.nn.Linear(32, 50)

    def forward(self, tokens, targets):
        hidden, _ = self.lstm(self.embedding(tokens))
        logits = self.head(hidden).transpose(1, 2)
        loss = torch.nn.functional.cross_entropy(logits, targets)
        return [loss] + list(torch.autograd.grad(loss, list(self.parameters())))


def test_an_lstm_language_model_training_step_matches_eager():
    torch.manual_seed(0)
    step = LstmLanguageModel()
    tokens, targets = torch.randint(0, 50, (2, 12)), torch.randint(0, 50, (2, 12))
    targets[1, 8:] = -100
    torch.testing.assert_close(kiln.compile(step, [tokens, targets])(tokens, targets),
                               step(tokens, targets), rtol=1e-4, atol=1e-5)


def test_clamp_with_tensor_bounds_matches_eager_bit_for_bit():
    torch.manual_seed(0)
    x, low = torch.randn(4, 6), torch.randn(6) - 1
    x[0, 0], low[3] = float("nan"), float("nan")  # either NaN gives NaN, as eager
    high = low + 1.5
    high[1] = low[1] - 1  # crossed bounds: the upper one wins
    cases = [lambda a, lo, hi: torch.clamp(a, lo, hi), lambda a, lo, hi: a.clamp(min=lo),
             lambda a, lo, hi: a.clamp(max=hi) + a.clamp_min(lo) + a.clamp_max(hi),
             lambda a, lo, hi: a.clamp(lo.double())]
    for fn in cases:
        torch.testing.assert_close(kiln.compile(fn, [x, low, high])(x, low, high),
                                   fn(x, low, high), rtol=0, atol=0, equal_nan=True)


def test_3d_pooling_matches_eager_with_ties_nans_and_padding():
    functional = torch.nn.functional
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 9, 8)
    x[0, 0, 2, 3, 3] = float("nan")
    x[1, 1, 4:6, 2:5, 1:3] = 5.0  # ties across frames and within them
    exact = [
        lambda a: functional.max_pool3d(a, 2),
        lambda a: functional.max_pool3d(a, 3, 2, 1, dilation=(2, 1, 2)),
        lambda a: functional.max_pool3d(a, (1, 3, 3), (1, 2, 2), (0, 1, 1), ceil_mode=True),
        lambda a: list(functional.max_pool3d(a, (2, 3, 3), 2, 1, return_indices=True)),
        lambda a: list(functional.max_pool3d(a[0], 2, return_indices=True, ceil_mode=True)),
    ]
    close = [
        lambda a: functional.avg_pool3d(a, 3, 2, 1),
        lambda a: functional.avg_pool3d(a, 3, 2, 1, count_include_pad=False),
        lambda a: functional.avg_pool3d(a, (2, 3, 3), 2, (1, 1, 0), ceil_mode=True,
                                        count_include_pad=False),
        lambda a: functional.avg_pool3d(a, 2, divisor_override=3),
        lambda a: functional.avg_pool3d(a[1], 3, 1, 1),
    ]
    for fn in exact:
        torch.testing.assert_close(kiln.compile(fn, [x])(x), fn(x), rtol=0, atol=0,
                                   equal_nan=True)
    for fn in close:
        torch.testing.assert_close(kiln.compile(fn, [x])(x), fn(x), equal_nan=True)
    with pytest.raises(kiln.UnsupportedOpError, match="window 0 of dim -3 lies wholly in the padding"):
        kiln.compile(lambda a: functional.max_pool3d(a, (2, 1, 1), 1, (1, 0, 0), (2, 1, 1)),
                     [torch.randn(1, 1, 1, 3, 3)], strict=True)


def test_distances_and_affine_grids_match_eager():
    functional = torch.nn.functional
    torch.manual_seed(0)
    a, b = torch.randn(30, 5), torch.randn(40, 5)
    images, theta = torch.randn(2, 3, 8, 8), torch.randn(2, 2, 3) * 0.3
    with_nan = a[:4].clone()
    with_nan[1, 2] = float("nan")
    cases = [  # 30 x 40 rows: eager's matrix product form; 5 x 7: the differences
        (torch.cdist, [a, b]), (lambda u, v: torch.cdist(u[:5], v[:7]), [a, b]),
        (lambda u, v: torch.cdist(u, v, 1), [a, b]),
        (lambda u, v: torch.cdist(u, v, float("inf")), [a, b]),
        (lambda u, v: torch.cdist(u, v, 3), [a, b]),
        (lambda u, v: torch.cdist(u, v, 0), [a.round(), b.round()]),
        (lambda u, v: torch.cdist(u.view(2, 15, 5), v.view(2, 20, 5)), [a, b]),
        (lambda u: functional.pdist(u[:9]), [a]), (lambda u: functional.pdist(u[:9], 1), [a]),
        (lambda x, t: functional.grid_sample(
            x, functional.affine_grid(t, (2, 3, 8, 8), align_corners=False),
            align_corners=False), [images, theta]),
        (lambda t: functional.affine_grid(t, (2, 1, 5, 7), align_corners=True), [theta]),
        (lambda t: functional.affine_grid(t, (2, 1, 1, 4), align_corners=False), [theta]),
        # NaN: p = 0 counts it as NaN; cdist's max passes over it, pdist's not.
        (lambda u, v: torch.cdist(u, v, 0), [with_nan, b[:3]]),
        (lambda u, v: torch.cdist(u, v, float("inf")), [with_nan, b[:3]]),
        (lambda u: functional.pdist(u, float("inf")), [with_nan]),
    ]
    for fn, args in cases:
        torch.testing.assert_close(kiln.compile(fn, args)(*args), fn(*args), rtol=1e-4, atol=1e-5,
                                   equal_nan=True)


def test_topk_of_the_largest_matches_eager_with_nans_and_infinities():
    torch.manual_seed(0)
    logits = torch.randn(4, 1000)
    special = torch.randn(3, 9)
    special[0, 4], special[1, 2], special[1, 5], special[2, 7] = \
        float("nan"), float("-inf"), float("-inf"), float("inf")
    cases = [(lambda a: a.topk(5), logits), (lambda a: torch.topk(a, 3, dim=0), logits),
             (lambda a: a.softmax(-1).topk(2).indices, logits), (lambda a: a.topk(9), special),
             (lambda a: torch.topk(a, 2, dim=1), torch.randperm(120).view(3, 40) - 60),
             (lambda a: a.topk(65), logits), (lambda a: a.topk(2, largest=False), logits)]
    for fn, x in cases:
        torch.testing.assert_close(kiln.compile(fn, [x])(x), fn(x), equal_nan=True)
    batched = kiln.compile(lambda a: a.topk(3), [torch.randn(5, 10)], dynamic={0: 0})
    for rows in (5, 9):
        x = torch.randn(rows, 10)
        torch.testing.assert_close(batched(x), x.topk(3))


def test_scatter_routes_like_eager():
    torch.manual_seed(0)

    def gate(h, w):
        weights, experts = (h @ w).softmax(-1).topk(2)
        return torch.zeros(h.shape[0], w.shape[1]).scatter(1, experts, weights)

    def in_place(x, i):
        y = x * 1
        y.scatter_(0, i, 7.0)
        return y
    cases = [(gate, [torch.randn(6, 16), torch.randn(16, 8)]),
             (in_place, [torch.randn(4, 5), torch.tensor([[0, 3, 1, 1, 2]])]),
             (lambda x, i, s: x.scatter(1, i, s),
              [torch.randn(3, 6), torch.tensor([[0, 5], [2, 2], [4, 1]]), torch.randn(3, 4)])]
    for fn, args in cases:
        torch.testing.assert_close(kiln.compile(fn, args)(*args), fn(*args))
    narrower = [torch.randn(4, 5), torch.tensor([[0, 1]])]  # index narrower than x
    torch.testing.assert_close(kiln.compile(lambda x, i: x.scatter(0, i, 1.0), narrower)(*narrower),
                               narrower[0].scatter(0, narrower[1], 1.0))


def test_data_dependent_torch_functions_take_kilns_forms():
    torch.manual_seed(0)
    image, grid = torch.randn(2, 3, 6, 6), torch.rand(2, 4, 4, 2) * 2.4 - 1.2
    sample = torch.nn.functional.grid_sample
    cases = [
        (lambda i: torch.nn.functional.one_hot(i, 10).float() * 2, [torch.randint(0, 10, (6,))]),
        (lambda a: a.repeat_interleave(3), [torch.randn(2, 3)]),
        (lambda a: torch.repeat_interleave(a, 2, dim=-1), [torch.randn(2, 3)]),
        (lambda a, g: sample(a, g, align_corners=False), [image, grid]),
        (lambda a, g: sample(a, g, padding_mode="border", align_corners=True), [image, grid]),
    ]
    with torch.no_grad():
        for fn, args in cases:
            torch.testing.assert_close(kiln.compile(fn, args)(*args), fn(*args),
                                       rtol=1e-4, atol=1e-5)


def bag(mode, padding_idx=None):
    return lambda i, w: torch.nn.functional.embedding_bag(i, w, mode=mode,
                                                          padding_idx=padding_idx)


def test_embedding_bags_of_one_size_and_by_offsets_match_eager():
    torch.manual_seed(0)
    weight, indices = torch.randn(50, 8), torch.randint(0, 50, (4, 6))
    indices[1] = 3  # a bag of padding alone: zeros
    indices[2, :3] = 3
    weights = torch.rand(4, 6)
    cases = [(bag(mode, padding), [indices, weight])
             for mode in ("sum", "mean", "max") for padding in (None, 3, -47)]
    cases.append((lambda i, w, p: torch.nn.functional.embedding_bag(
        i, w, mode="sum", per_sample_weights=p), [indices, weight, weights]))
    module = torch.nn.EmbeddingBag(50, 8).eval()
    cases.append((module, [indices]))
    with torch.no_grad():
        for fn, args in cases:
            torch.testing.assert_close(kiln.compile(fn, args)(*args), fn(*args))
    by_offsets = [indices.flatten(), torch.tensor([0, 5, 9]), weight]
    fn = lambda i, o, w: torch.nn.functional.embedding_bag(i, w, o)  # noqa: E731
    torch.testing.assert_close(kiln.compile(fn, by_offsets, strict=True)(*by_offsets),
                               fn(*by_offsets))


def test_sort_argsort_and_median_match_eager_with_nans_ties_and_infinities():
    torch.manual_seed(0)
    x, integers = torch.randn(4, 7), torch.randint(-3, 3, (4, 7))
    x[0, 2], x[0, 5], x[2, 1] = float("nan"), float("nan"), float("inf")
    x[1, :3] = 1.0  # ties keep their order, as eager's sort
    x[3, 4], x[3, 5] = -0.0, 0.0
    cases = [
        (lambda a: list(torch.sort(a)), x), (lambda a: list(a.sort(0, True)), x),
        (lambda a: list(torch.sort(a, dim=1, descending=True, stable=True)), x),
        (lambda a: a.argsort(-1), x), (torch.msort, x), (lambda a: list(a.sort(1)), integers),
        (lambda a: a.argsort(0, descending=True), integers), (lambda a: list(a.median(1)), x),
        (lambda a: list(a.median(0, keepdim=True)), x), (torch.median, x),
        (lambda a: a[1:].median(), x), (lambda a: list(a.median(1)), integers),
        (torch.median, integers), (lambda a: list(torch.sort(a > 0, 1)), x),
    ]
    for fn, a in cases:
        torch.testing.assert_close(kiln.compile(fn, [a])(a), fn(a), rtol=0, atol=0,
                                   equal_nan=True)


def test_cumulative_extremes_and_log_sums_match_eager_with_nans_and_infinities():
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, nan, 5.0, nan, 0.0],
                      [0.0, -1.0, -1.0, 4.0, 4.0, 2.0, -3.0, -3.0]])  # ties: the last
    integers = torch.randint(-3, 3, (3, 9), generator=torch.Generator().manual_seed(0))
    infinities = torch.tensor([[-inf, 1.0], [inf, 2.0], [3.0, -inf], [-inf, -inf]])
    cases = [
        (lambda a: list(torch.cummax(a, 1)), x), (lambda a: list(torch.cummin(a, 1)), x),
        (lambda a: list(torch.cummax(a, 0)), x), (lambda a: list(torch.cummax(a, 1)), integers),
        (lambda a: list(torch.cummin(a, 0)), integers),
        (lambda a: list(torch.cummax(a > 0, 1)), integers),
        (lambda a: torch.logcumsumexp(a, 1), torch.randn(3, 9)),
        (lambda a: torch.logcumsumexp(a, 0), infinities),
        (lambda a: torch.logsumexp(a, 1), infinities),  # a row of -inf: -inf
        (lambda a: torch.logsumexp(a, [0, 1], keepdim=True), infinities),
        (lambda a: torch.logsumexp(a, 1), integers),
    ]
    for fn, a in cases:
        torch.testing.assert_close(kiln.compile(fn, [a])(a), fn(a), equal_nan=True)


def test_elementwise_and_small_linear_algebra_functions_match_eager():
    torch.manual_seed(0)
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    signed = torch.cat([y[:3], torch.tensor([[-0.0] * 6])])
    with_nan = torch.where(y > 1, float("nan"), x)
    cases = [
        torch.hypot, lambda a, b: torch.hypot(a * 1e30, b * 1e-30), torch.logaddexp,
        torch.logaddexp2, lambda a, b: torch.logaddexp(a, a.new_full(a.shape, float("-inf"))),
        lambda a, b: torch.heaviside(a.round(), b), lambda a, b: torch.copysign(a, signed),
        lambda a, b: torch.frac(a * 3), lambda a, b: torch.deg2rad(a) + torch.rad2deg(b),
        lambda a, b: torch.sgn(a), lambda a, b: torch.signbit(signed).float(),
        lambda a, b: torch.isclose(a, b + 1e-9).float() + torch.isclose(a, a + 1e-7).float(),
        lambda a, b: torch.special.xlog1py(a.round(), b.abs()),
        lambda a, b: torch.special.entr(torch.cat([a, torch.zeros(1, 6)])),
        lambda a, b: torch.nansum(with_nan), lambda a, b: torch.nanmean(with_nan, 1),
        lambda a, b: torch.nansum(a, 0, keepdim=True), lambda a, b: list(torch.std_mean(a, 1)),
        lambda a, b: list(torch.std_mean(a)), lambda a, b: list(torch.aminmax(a, dim=1)),
        lambda a, b: list(torch.aminmax(a)), lambda a, b: torch.trace(a[:, :4]),
        lambda a, b: torch.addmv(a[0, :4], a[:4], b[0], beta=0.5, alpha=2),
        lambda a, b: torch.cross(a[:, :3], b[:, :3], dim=1),
        lambda a, b: torch.linalg.cross(a[:3], b[:3], dim=0),
        lambda a, b: torch.block_diag(a[:2, :2], b[:1, :3], a[0, :2]),
        lambda a, b: a.reshape(-1)[torch.tril_indices(3, 3)[1]],
        lambda a, b: a.reshape(-1)[torch.triu_indices(3, 4, 1)[1] * 4],
        lambda a, b: torch.bucketize(a, torch.tensor([-1.0, 0.0, 1.0])),
        lambda a, b: torch.bucketize(a.round(), torch.tensor([-1.0, 0.0, 1.0]), right=True),
        lambda a, b: torch.searchsorted(torch.sort(b, -1).values, a),
        lambda a, b: torch.searchsorted(torch.sort(b[0]).values, a, side="right"),
    ]
    for fn in cases:
        torch.testing.assert_close(kiln.compile(fn, [x, y])(x, y), fn(x, y), equal_nan=True)


def test_a_boolean_mask_index_is_refused_by_strict_with_what_to_do_instead():
    x = torch.randn(4, 4)
    with pytest.raises(kiln.KilnError, match=r"boolean mask .* use torch.where"):
        kiln.compile(lambda t, m: t[m], [x, x > 0], strict=True)


def test_a_value_read_while_tracing_is_refused_naming_the_line():
    def crop_to_longest(x, lengths):
        longest = int(lengths.max())
        return x[:, :longest] * 2
    x, lengths = torch.randn(2, 6), torch.tensor([4, 6])
    with pytest.raises(kiln.UnsupportedOpError,
                       match=r"kiln_test\.py:\d+ in crop_to_longest \(longest = "
                             r"int\(lengths\.max\(\)\)\) reads a tensor's value while tracing"):
        kiln.compile(crop_to_longest, [x, lengths], strict=True)
    with pytest.warns(RuntimeWarning, match="reads a tensor's value"):
        eager = kiln.compile(crop_to_longest, [x, lengths], fallback="eager")
        torch.testing.assert_close(eager(x, lengths), x * 2)


def test_a_function_asking_whether_it_is_compiled_traces_its_compiled_path():
    # transformers' masks read the mask to skip one that hides nothing,
    # unless torch.compiler.is_compiling(), as under torch.compile.
    def masked(x, mask):
        if not torch.compiler.is_compiling() and mask.all():
            return x
        return x * mask
    x, mask = torch.randn(2, 6), torch.ones(2, 6)
    compiled = kiln.compile(masked, [x, mask])
    assert not torch.compiler.is_compiling()
    mask[1, 3:] = 0
    torch.testing.assert_close(compiled(x, mask), x * mask)


def test_tracing_a_long_unrolled_loop_names_each_node_in_a_few_steps(monkeypatch):
    # FX's namespace remembers the last number it gave each base name, so
    # naming 3,000 adds takes a few lookups each (trying add_1, add_2, ...
    # for each would take 4,500,000).
    from torch.fx.graph import _Namespace

    from kiln import _tracing
    lookups = []

    class CountedNames(set):
        def __contains__(self, name):
            lookups.append(1)
            return set.__contains__(self, name)
    init = _Namespace.__init__

    def counted_init(self):
        init(self)
        self._used_names = CountedNames()
    monkeypatch.setattr(_Namespace, "__init__", counted_init)

    def unrolled(x):
        for _ in range(3000):
            x = x + 1
        return x
    gm, _ = _tracing.trace_fx(unrolled, [torch.zeros(2)])
    names = [node.name for node in gm.graph.nodes]
    assert names == ["x_1", "add"] + [f"add_{i}" for i in range(1, 3000)] + ["output"]
    assert len(lookups) < 10 * len(names)
    # A builtin's name ("slice") is never given bare: the same from slice_1.
    lookups.clear()

    def sliced(x):
        for _ in range(3000):
            x = x[1:]
        return x
    gm, _ = _tracing.trace_fx(sliced, [torch.zeros(4000)])
    names = [node.name for node in gm.graph.nodes]
    assert names == ["x_1"] + [f"slice_{i}" for i in range(1, 3001)] + ["output"]
    assert len(lookups) < 10 * len(names)


def test_random_ops_are_refused_with_what_to_do_instead():
    # (the draws Kiln makes itself, dropout's among them: random_test.py)
    x = torch.randn(4, 4)
    for fn in (lambda a: torch.nn.functional.rrelu(a, training=True),
               lambda a: a + torch.poisson(a.exp())):
        with pytest.raises(kiln.UnsupportedOpError,
                           match=r"draws random numbers.*call model.eval\(\) for dropout"):
            kiln.compile(fn, [x], strict=True)
    with torch.no_grad():
        dropout = torch.nn.Dropout(0.5).eval()  # eval: the identity, compiled
        torch.testing.assert_close(kiln.compile(dropout, [x])(x), x)


def test_a_dtype_kiln_lacks_is_named_with_what_to_do():
    image = torch.randint(0, 255, (1, 3, 4, 4)).to(torch.uint16)
    with pytest.raises(kiln.UnsupportedOpError, match=r"input 'image_1' is torch.uint16: Kiln "
                       r"compiles tensors of float32, .*; convert it to one of those first"):
        kiln.compile(lambda image: image.float() / 255, [image], strict=True)
    with pytest.raises(kiln.UnsupportedOpError, match=r"the dtype of node '_to_copy' "
                       r"\(aten._to_copy.default\) is torch.float8_e4m3fn: .*; compute in one "
                       r"of those"):
        kiln.compile(lambda x: (x * 3).to(torch.float8_e4m3fn), [torch.randn(3)], strict=True)
    eager = kiln.compile(lambda image: image.float() / 255, [image], fallback="eager",
                         strict=True)
    with pytest.warns(RuntimeWarning, match="input 'image_1' is torch.uint16"):
        torch.testing.assert_close(eager(image), image.float() / 255)


POSITIONS = torch.arange(64).expand(1, -1)


def test_tables_cut_to_a_symbolic_length_compile_once_for_every_length():
    """Position ids and a causal mask sliced to the sequence's length, and
    its first and last tokens selected: one symbolic artifact, the table's
    size as the length's bound (eager fails past it too)."""
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(64, 8)
    causal = torch.tril(torch.ones(64, 64))

    def step(x):
        length = x.size(1)
        h = x + embedding(POSITIONS[:, :length])
        scores = (h @ h.transpose(1, 2)).masked_fill(causal[:length, :length] == 0, float("-inf"))
        return scores.softmax(-1) @ h, h[:, 0], h[:, -1], h[:, -2, 3]
    with torch.no_grad():
        compiled = kiln.compile(step, [torch.randn(2, 12, 8)], dynamic={0: {1: "T"}})
        assert SymbolRelation(range=SymbolRelation.Range(symbol="T", max=64)) in list(
            compiled._graph.relations)
        before = compiles()
        for length in (12, 3, 64, 40):
            x = torch.randn(2, length, 8)
            for got, want in zip(compiled(x), step(x)):
                torch.testing.assert_close(got, want)
        assert compiles() == before
        with pytest.raises(kiln.GuardError, match="the graph's relations require 2 <= s0 <= 64"):
            compiled(torch.randn(2, 65, 8))


def test_cat_of_parts_with_symbolic_sizes_compiles_once():
    def joined(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1), torch.cat((x, x * 2), dim=1)
    compiled = kiln.compile(joined, [torch.randn(2, 6, 8)], dynamic={0: {1: "T"}})
    before = compiles()
    for length in (6, 3, 17):
        x = torch.randn(2, length, 8)
        for got, want in zip(compiled(x), joined(x)):
            torch.testing.assert_close(got, want)
    assert compiles() == before
    with pytest.raises(kiln.UnsupportedOpError, match="node 'cat': dim 1 depends on a symbolic "
                       "size in a way Kiln cannot express"):
        kiln.compile(lambda x: torch.cat((x, x[:, :3]), dim=1), [torch.randn(2, 6, 8)],
                     dynamic={0: {1: "T"}}, strict=True)


# Ops of a library's own (torch.library), which Kiln has no lowering for.
@torch.library.custom_op("kiln_test::bend", mutates_args=())
def bend(x: torch.Tensor) -> torch.Tensor:
    return torch.erfinv(x)


@torch.library.custom_op("kiln_test::twist", mutates_args=())
def twist(x: torch.Tensor) -> torch.Tensor:
    return torch.digamma(x)


@bend.register_fake
@twist.register_fake
def _(x):
    return torch.empty_like(x)


def test_an_unsupported_op_names_it():
    with pytest.raises(kiln.UnsupportedOpError) as raised:
        kiln.compile(bend, [torch.randn(8)], strict=True)
    assert raised.value.ops == ["kiln_test.bend.default"]


def test_every_unsupported_op_is_named_at_once():
    def special(x):
        return bend(x) + twist(x) + bend(x * 2)
    with pytest.raises(kiln.UnsupportedOpError) as raised:
        kiln.compile(special, [torch.randn(8)], strict=True)
    assert raised.value.ops == ["kiln_test.bend.default", "kiln_test.twist.default"]
    assert "2 ops are not supported" in str(raised.value)


def test_fallback_eager_runs_what_cannot_compile_and_warns_once():
    before = kiln.stats()["process"]["eager_fallbacks"]
    compiled = kiln.compile(bend, [torch.randn(8)], fallback="eager", strict=True)
    x = torch.rand(8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(compiled(x), torch.erfinv(x))
        torch.testing.assert_close(compiled(x), torch.erfinv(x))
    assert len([w for w in caught if "kiln" in str(w.message)]) == 1
    assert kiln.stats()["process"]["eager_fallbacks"] == before + 2


def test_importing_kiln_loads_no_extension_and_a_local_hit_loads_no_grpc():
    # A fresh interpreter: `import kiln` alone maps neither the extension
    # nor the client library; a local hit maps the extension but not gRPC
    # (nor RocksDB), and no shared Abseil library when the extension was
    # built with its own (third_party/abseil: when its sources were there).
    own_abseil = os.path.exists(os.path.join(HERE, "..", "..", "third_party", "abseil", "src",
                                             "VERSION"))
    code = """
import torch
maps = lambda: open('/proc/self/maps').read()
import kiln
print('_kiln' in maps(), 'grpc' in maps())
with torch.no_grad():
    y = kiln.compile(lambda x: torch.relu(x @ x.T + 1.0), [torch.ones(8, 8)])(torch.ones(8, 8))
print('_kiln' in maps(), 'grpc' in maps(), 'rocksdb' in maps(), 'libabsl' in maps(),
      float(y[0, 0]))
"""
    run_python(code)  # kilnd has answered this very request: its alias is in the local index
    assert run_python(code).split() == [
        "False", "False", "True", "False", "False", str(not own_abseil), "9.0"]


def test_an_extension_built_against_another_torch_is_refused_naming_both_versions():
    path = kiln._native().__file__
    with open(os.path.join(os.path.dirname(path), "_kiln.torch_version")) as file:
        assert file.read() == torch.__version__ + "\n"
    code = """
import torch
torch.__version__ = '1.13.1'
import kiln
try:
    kiln.compile(lambda x: x + 1, [torch.ones(2)])
except ImportError as error:
    print(error)
"""
    assert run_python(code).strip() == (
        f"kiln's C++ extension {path} is built against torch {torch.__version__}, but this "
        f"process runs torch 1.13.1: run it with torch {torch.__version__} "
        "(scripts/install-deps.sh --with-torch installs it in the checkout's .venv), or "
        "rebuild the extension against this torch")


def run_python(code, **env):
    """`code` in a fresh interpreter with this test's environment plus `env`."""
    out = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, %r)\n" % HERE + code],
                         capture_output=True, text=True, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_saved_package_loads_in_a_fresh_process_with_no_trace_and_no_compile(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()).eval()
    x = torch.randn(4, 16)
    package = str(tmp_path / "model.kiln")
    kiln.save(model, [x], package, dynamic={0: {0: "B"}})
    with torch.no_grad():
        kiln.load(package, model)(x)  # compiled once, here
        want = model(torch.ones(3, 16))
    before = kiln.stats()["daemon"]
    torch.save(want, str(tmp_path / "want.pt"))
    out = run_python(f"""
import torch, kiln, kiln._tracing
traced = []
kiln._tracing.trace_graph = lambda *a, **k: traced.append(1)
with torch.no_grad():
    y = kiln.load({package!r})(torch.ones(3, 16))
torch.testing.assert_close(y, torch.load({str(tmp_path / "want.pt")!r}))
print(len(traced))
""")
    assert out.split() == ["0"], "no trace"
    after = kiln.stats()["daemon"]
    assert after["compiles"] == before["compiles"], "no compile"
    assert after["hits"] == before["hits"], "a local hit: no round trip"


def test_stats_are_numbers_all_the_way_down():
    kiln.compile(f, [torch.randn(5, 5)])(torch.randn(5, 5))
    daemon = kiln.stats()["daemon"]
    assert daemon["compiles"] >= 1 and sum(daemon["compile_ms_counts"]) == daemon["compiles"]
    assert all(isinstance(count, int) for count in daemon["failures_by_kind"].values())


def test_kiln_load_refuses_what_is_not_a_package(tmp_path):
    path = str(tmp_path / "other.pt")
    torch.save({"weights": []}, path)
    with pytest.raises(ValueError, match="is not a Kiln package"):
        kiln.load(path)
    os.makedirs(tmp_path / "dir")
    (tmp_path / "dir" / "package.json").write_text('{"format": "kiln-package-1"}')
    (tmp_path / "dir" / "graph.pb").write_bytes(b"")
    with pytest.raises(ValueError, match="not 'kiln-package-6'.*save it again"):
        kiln.load(str(tmp_path / "dir"))
    (tmp_path / "dir" / "package.json").write_text(
        '{"format": "kiln-package-4", "weights": [], "outputs": "tensor", "arguments": '
        '{"parameters": [["x", "POSITIONAL_OR_KEYWORD"]], "parts": [["x", "tensor"]], '
        '"names": ["x"]}}')
    (tmp_path / "dir" / "weights.bin").write_bytes(b"")
    (tmp_path / "dir" / "graph.pb").write_bytes(b"\xff\xff")
    with pytest.raises(ValueError, match=r"not a Kiln graph \(binary kiln.v1.Graph\)"):
        kiln.load(str(tmp_path / "dir"))


def test_graphs_are_graph_pb2_messages_and_their_files_snake_case(tmp_path):
    """kiln.compile's graph is a kiln.v1.Graph built with graph_pb2, which the
    extension takes serialized (never JSON text); kiln.save writes it as
    graph.pb and as graph.json with the proto's field names, as every Kiln
    JSON file spells them."""
    linear, x = torch.nn.Linear(8, 4), torch.randn(3, 8)

    def project(x):
        return linear(x).relu().sum(-1, keepdim=True)
    compiled = kiln.compile(project, [x], dynamic={0: {0: "B"}})
    graph = compiled._graph
    assert isinstance(graph, Graph)
    assert [i.name for i in graph.inputs] == ["x_1", "param_constant0", "param_constant1"]
    assert [node.op for node in graph.nodes] == ["aten.t.default", "aten.addmm.default",
                                                 "aten.relu.default", "aten.sum.dim_IntList"]
    with torch.no_grad():
        assert_matches(compiled(torch.ones(5, 8)), project(torch.ones(5, 8)))
    with pytest.raises(TypeError, match="incompatible constructor arguments"):
        kiln._native().CompiledGraph(kiln._default_client(), json_format.MessageToJson(graph))

    path = str(tmp_path / "linear")
    kiln.save(project, [x], path, dynamic={0: {0: "B"}})
    with open(os.path.join(path, "graph.pb"), "rb") as binary:
        assert Graph.FromString(binary.read()) == graph
    with open(os.path.join(path, "graph.json")) as text:
        written = json.load(text)
    assert json_format.ParseDict(written, Graph()) == graph

    def keys(value):
        if isinstance(value, dict):
            return set(value) | {k for v in value.values() for k in keys(v)}
        return {k for v in value for k in keys(v)} if isinstance(value, list) else set()
    assert {"output_types", "int_list"} <= keys(written)
    assert sorted(k for k in keys(written) if k != k.lower()) == []
    with torch.no_grad():
        assert_matches(kiln.load(path)(torch.ones(6, 8)), project(torch.ones(6, 8)))


def test_kiln_load_names_a_damaged_package(tmp_path):
    model, x = torch.nn.Linear(8, 4), torch.randn(2, 8)
    path = str(tmp_path / "linear")
    kiln.save(model, [x], path)
    with open(os.path.join(path, "weights.bin"), "r+b") as weights:
        weights.truncate(10)
    with pytest.raises(ValueError, match=r"weights.bin holds 10 bytes, and weight 0 \(weight\) "
                                         r"needs bytes up to 128: the package is damaged"):
        kiln.load(path)
    with open(os.path.join(path, "package.json")) as package_file:
        package = json.load(package_file)
    del package["outputs"]
    with open(os.path.join(path, "package.json"), "w") as package_file:
        json.dump(package, package_file)
    with pytest.raises(ValueError, match="package.json lacks 'outputs': the package is damaged"):
        kiln.load(path)


def test_saved_weights_keep_their_dtype_sizes_and_strides(tmp_path):
    weights = [torch.randn(3, 5).t(), torch.arange(7, dtype=torch.int64),
               torch.randn(2, 2).to(torch.bfloat16), torch.empty(0, 4), torch.tensor(2.5),
               torch.tensor([True, False, True])]
    layouts = kiln._write_weights(weights, str(tmp_path / "weights.bin"))
    assert all(layout["offset"] % 64 == 0 for layout in layouts)
    for want, got in zip(weights, kiln._read_weights(str(tmp_path / "weights.bin"), layouts)):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.stride() == want.stride()
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_a_package_with_buckets_is_a_warmup_plan_for_kiln_warmup(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    package = str(tmp_path / "mlp.kiln")
    buckets = {"symbols": [{"symbol": "B", "sizes": [1, 2, 4]}]}
    kiln.save(model, [torch.randn(4, 8)], package, dynamic={0: {0: "B"}}, buckets=buckets)
    kiln._default_client().daemon()  # kilnd is up
    kiln_cli = os.path.join(HERE, "..", "..", "tools", "kiln", "kiln")
    out = subprocess.run([kiln_cli, "warmup", os.path.join(package, "plan.json"), "--start=false"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "warmed 3 buckets with 3 compiles: 0 hits, 3 compiled, 0 failed" in out.stdout
    before = compiles()
    with torch.no_grad():
        loaded = kiln.load(package, model, warmup=True)
        for batch in (1, 2, 4):
            x = torch.randn(batch, 8)
            assert_matches(loaded(x), model(x))
    assert compiles() == before + 1, "the symbolic artifact only: the CLI compiled the buckets"


def test_backend_takes_symbolic_trace_and_make_fx_graph_modules():
    from torch.fx.experimental.proxy_tensor import make_fx

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 8)

        def forward(self, x):
            return (torch.tanh(self.linear(x)) * 2.0,)

    block = Block()
    x = torch.randn(5, 8)
    with torch.no_grad():
        for gm in (torch.fx.symbolic_trace(block), make_fx(block)(x)):
            compiled = kiln.backend(gm, [x])
            result = compiled(x)
            assert isinstance(result, tuple) and len(result) == 1
            assert_matches(result[0], block(x)[0])


def test_many_threads_call_one_compiled_module():
    import threading
    x = torch.randn(32, 32)
    compiled = kiln.compile(f, [x])
    inputs = [torch.randn(32, 32) for _ in range(8)]
    errors = []

    def call(t):
        try:
            for _ in range(50):
                assert_matches(compiled(t), f(t))
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=call, args=(t,)) for t in inputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


FORKING_PARENT = """
import os, signal, time, torch, kiln
def f(t):
    return torch.relu(t @ t.T + 1.0)
def assert_matches(got, want):
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
x = torch.randn(256, 256)
compiled = kiln.compile(f, [x])  # a local hit: no connection
{connect}
assert_matches(compiled(x), f(x))  # the pool's workers run
children = []
for child in range(2):
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            torch.set_num_threads(1)  # eager's OpenMP pool (torch's wheels) does not survive fork
            assert_matches(compiled(x), f(x))
            try:
                shift = float(child + {offset})  # a graph of this child's own: a miss
                other = kiln.compile(lambda t: t * 3.0 - shift, [torch.randn(5)])
                torch.testing.assert_close(other(torch.ones(5)), torch.full((5,), 3.0 - shift))
                code = 0
            except kiln.DaemonUnavailable as error:
                code = 3 if "gRPC does not survive fork" in str(error) else 4
        finally:
            os._exit(code)
    children.append(pid)
deadline = time.monotonic() + 60
codes = []
for pid in children:
    while (waited := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    if waited[0] == 0:
        os.kill(pid, signal.SIGKILL)
        codes.append("hung")
    else:
        codes.append(os.waitstatus_to_exitcode(waited[1]))
assert_matches(compiled(x), f(x))
print(*codes)
"""


def test_a_module_prepared_before_fork_works_in_the_children():
    # A first parent's request is answered by kilnd, so a second one finds
    # it in the local index (by the request's alias) and never connects: its
    # children run it and connect to kilnd for new compiles of their own.
    run_python(FORKING_PARENT.format(connect="", offset=0))
    assert run_python(FORKING_PARENT.format(connect="", offset=0)).split() == ["0", "0"]
    # A parent that connected: its children still run what is loaded, and
    # are told why they cannot ask kilnd (gRPC does not survive fork).
    connect = "kiln._default_client().daemon()"
    assert run_python(FORKING_PARENT.format(connect=connect, offset=10)).split() == ["3", "3"]


FORKING_UNDER_LOAD = """
import os, signal, threading, time, torch, kiln
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 256)).eval()
x = torch.randn(64, 512)
with torch.no_grad():
    want = model(x)
    compiled = kiln.compile(model, [x])
stop = threading.Event()
failures = []
def call():
    with torch.no_grad():
        while not stop.is_set():
            got = compiled(x)
            if not torch.allclose(got, want, rtol=1e-4, atol=1e-4):
                failures.append("a parent thread's result differs")
threads = [threading.Thread(target=call) for _ in range(8)]
for thread in threads:
    thread.start()
codes = []
for _ in range({forks}):
    time.sleep(0.005)  # the 8 threads are mid-call, in kernels and GEMMs
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)  # a hung child dies of SIGALRM (exit code -14)
        torch.set_num_threads(1)  # eager's OpenMP pool (torch's wheels) does not survive fork
        with torch.no_grad():
            ok = all(torch.allclose(compiled(x), want, rtol=1e-4, atol=1e-4) for _ in range(3))
        os._exit(0 if ok else 1)
    codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
stop.set()
for thread in threads:
    thread.join()
print(failures or "no failures")
print(*codes)
"""


def test_children_forked_while_threads_run_gemms_each_get_their_results():
    # A pre-fork server whose threads are inside compiled calls (GEMMs on
    # OpenBLAS, the runtime's pool) when it forks: every child runs the
    # function and gets eager's result, none hangs on a lock a parent thread
    # held.
    forks = 40
    out = run_python(FORKING_UNDER_LOAD.format(forks=forks)).splitlines()
    assert out[0] == "no failures"
    assert out[1].split() == ["0"] * forks


def test_no_daemon_is_daemon_unavailable_or_eager_with_fallback(tmp_path):
    out = run_python("""
import torch, kiln, warnings
f = lambda x: x * 3 + 1
try:
    kiln.compile(f, [torch.randn(4)])
    print("compiled")
except kiln.DaemonUnavailable as error:
    print("unavailable")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    eager = kiln.compile(f, [torch.randn(4)], fallback="eager")
    torch.testing.assert_close(eager(torch.ones(4)), torch.full((4,), 4.0))
print(len(caught), kiln.stats()["process"]["eager_fallbacks"])
""", KILN_SOCKET=str(tmp_path / "none.sock"), KILN_CACHE_DIR=str(tmp_path / "cache"),
                     KILN_DAEMON=str(tmp_path / "no-kilnd"))
    assert out.split() == ["unavailable", "1", "1"]


def test_a_kilnd_that_stops_answering_is_daemon_unavailable_and_eager_with_fallback():
    import shutil
    import signal
    import tempfile
    root = tempfile.mkdtemp(prefix="kstop", dir="/tmp")
    socket, cache = os.path.join(root, "s"), os.path.join(root, "cache")
    daemon = subprocess.Popen([kiln._kilnd_path(), "--socket=" + socket, "--cache_dir=" + cache],
                              stderr=subprocess.DEVNULL)
    try:
        run_python("import kiln; kiln._default_client().daemon()", KILN_SOCKET=socket,
                   KILN_CACHE_DIR=cache)  # kilnd is up
        daemon.send_signal(signal.SIGSTOP)
        out = run_python("""
import warnings
import torch, kiln
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    eager = kiln.compile(lambda x: x * 3 + 1, [torch.randn(4)], fallback="eager")
    torch.testing.assert_close(eager(torch.ones(4)), torch.full((4,), 4.0))
print(caught[0].message)
""", KILN_SOCKET=socket, KILN_CACHE_DIR=cache)
    finally:
        daemon.kill()
        daemon.wait()
        shutil.rmtree(root, ignore_errors=True)
    assert (f"kiln: running eagerly: kilnd (pid {daemon.pid}) on {socket}: kilnd did not answer "
            f"Hello within 5s. It is stopped, hung or overloaded") in out, out


def test_ctrl_c_interrupts_a_compile_at_once_and_kilnd_still_stores_it():
    import shutil
    import tempfile
    root = tempfile.mkdtemp(prefix="kint", dir="/tmp")
    socket, cache = os.path.join(root, "s"), os.path.join(root, "cache")
    # A kilnd whose every compile takes eight seconds more.
    daemon = subprocess.Popen([kiln._kilnd_path(), "--socket=" + socket, "--cache_dir=" + cache,
                               "--testonly_compile_delay=8s"], stderr=subprocess.DEVNULL)
    try:
        out = run_python("""
import os, signal, threading, time
import torch, kiln
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job's is SIG_IGN
def f(x):
    return x * 3 + 1
kiln._default_client().daemon()  # kilnd is up
from kiln import _tracing
_tracing.trace_fx(f, [torch.randn(5)])  # the tracer's imports (torch._inductor) done first
threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
start = time.monotonic()
try:
    kiln.compile(f, [torch.randn(5)])
    print("compiled")
except KeyboardInterrupt:
    print("interrupted", time.monotonic() - start < 5)
for _ in range(300):
    if kiln.stats()["daemon"]["compiles"] == 1:
        break
    time.sleep(0.1)
kiln.compile(f, [torch.randn(5)])
print("compiles", kiln.stats()["daemon"]["compiles"])
""", KILN_SOCKET=socket, KILN_CACHE_DIR=cache)
    finally:
        daemon.kill()
        daemon.wait()
        shutil.rmtree(root, ignore_errors=True)
    assert out.split() == ["interrupted", "True", "compiles", "1"], out


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
