"""Tests of the tracer: lifting, functionalization, dead code, symbolic dims,
and the one-line errors its user sees."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln_trace  # noqa: E402


def trace(*args, **kwargs):
    """kiln_trace.trace's (graph, reference), the graph (a kiln.v1.Graph) in
    the protobuf JSON form its graph files take, snake_case field names."""
    graph, reference = kiln_trace.trace(*args, **kwargs)
    assert isinstance(graph, kiln_trace.Graph), type(graph)
    return kiln_trace.json_format.MessageToDict(graph, preserving_proto_field_name=True), reference


def ops(graph):
    return [node["op"] for node in graph["nodes"]]


class TraceTest(unittest.TestCase):
    def test_weights_become_inputs(self):
        layer = torch.nn.Linear(8, 4)
        graph, reference = trace(lambda x: layer(x), [torch.randn(2, 8)], "linear")
        self.assertEqual(len(graph["inputs"]), 3)  # x, weight, bias
        self.assertEqual(len(reference["inputs"]), 3)
        self.assertEqual([i["type"]["sizes"] for i in graph["inputs"][1:]],
                         [[{"constant": "4"}, {"constant": "8"}], [{"constant": "4"}]])

    def test_in_place_on_an_intermediate_is_functionalized(self):
        graph, _ = trace(lambda x: (x + 1).relu_(), [torch.randn(4)], "inplace")
        self.assertEqual(ops(graph), ["aten.add.Tensor", "aten.relu.default"])

    def test_mutating_an_input_is_refused(self):
        def mutate(x):
            x.add_(1)
            return x * 2
        with self.assertRaisesRegex(kiln_trace.TraceError, "mutates graph input 'x_1' in place"):
            trace(mutate, [torch.randn(4)], "mutate")

    def test_a_training_batch_norm_with_running_statistics_warns(self):
        mean, var = torch.zeros(3), torch.ones(3)
        with self.assertWarnsRegex(RuntimeWarning, "does not update running_mean and "
                                                   "running_var"):
            graph, _ = trace(
                lambda x, mean, var: torch.nn.functional.batch_norm(x, mean, var, training=True),
                [torch.randn(4, 3), mean, var], "batch_norm")
        self.assertEqual(ops(graph), ["aten.native_batch_norm.default"])

    def test_a_batch_norm_module_in_training_mode_is_refused_with_advice(self):
        norm = torch.nn.BatchNorm1d(3)
        with self.assertRaisesRegex(kiln_trace.TraceError,
                                    r"mutates graph input .* in place: Unimplemented \(a "
                                    r"BatchNorm module in training mode .* module.eval\(\)"):
            trace(norm, [torch.randn(4, 3)], "batch_norm_module")
        norm.eval()
        graph, _ = trace(norm, [torch.randn(4, 3)], "batch_norm_module")
        self.assertEqual(ops(graph), ["aten.native_batch_norm.default"])

    def test_results_a_partial_output_mask_drops_are_declared(self):
        def gradient(grad, x):
            x = x.detach().requires_grad_(True)
            return torch.autograd.grad(torch.nn.functional.group_norm(x, 2), x, grad)[0]
        graph, _ = trace(gradient, [torch.randn(2, 4, 3), torch.randn(2, 4, 3)],
                                    "group_norm_input_gradient")
        backward = graph["nodes"][-1]
        self.assertEqual(backward["op"], "aten.native_group_norm_backward.default")
        self.assertEqual([t["sizes"] for t in backward["output_types"]],
                         [[{"constant": "2"}, {"constant": "4"}, {"constant": "3"}],
                          [{"constant": "4"}], [{"constant": "4"}]])

    def test_dead_nodes_are_dropped(self):
        def dead(x):
            unused = x.sin()  # noqa: F841
            return x + 1
        graph, _ = trace(dead, [torch.randn(4)], "dead")
        self.assertEqual(ops(graph), ["aten.add.Tensor"])

    def test_symbolic_dims(self):
        graph, _ = trace(lambda x: torch.relu(x + 1), [torch.randn(3, 5)], "sym",
                                    symbolic=[("x", 0)])
        self.assertEqual(graph["inputs"][0]["type"]["sizes"], [{"symbol": "s0"}, {"constant": "5"}])
        self.assertEqual(graph["nodes"][1]["output_types"][0]["sizes"][0], {"symbol": "s0"})

    def test_a_creation_op_sized_by_a_symbol_gets_a_symbolic_size_list(self):
        graph, _ = trace(lambda x: x + torch.ones(x.shape[0], 5), [torch.randn(3, 5)],
                                    "sized", symbolic=[("x", 0)])
        ones = graph["nodes"][0]
        self.assertEqual(ones["op"], "aten.ones.default")
        # Every entry: a factory has no element count to infer a -1 from.
        self.assertEqual(ones["args"][0], {"name": "size", "sym_int_list": {"values": [
            {"terms": [{"coefficient": "1", "symbols": ["s0"]}]},
            {"terms": [{"coefficient": "5"}]}]}})
        self.assertEqual(ones["output_types"][0]["sizes"], [{"symbol": "s0"}, {"constant": "5"}])

    def test_an_arange_to_a_symbol_gets_a_symbolic_end(self):
        graph, _ = trace(lambda x: x + torch.arange(x.shape[0]), [torch.randn(3)],
                                    "positions", symbolic=[("x", 0, "T")])
        arange = graph["nodes"][0]
        self.assertEqual(arange["args"], [{"name": "end", "sym_int": {"terms": [
            {"coefficient": "1", "symbols": ["T"]}]}}])

    def test_a_size_that_is_no_product_of_symbols_is_refused_with_fitting_advice(self):
        with self.assertRaisesRegex(
                kiln_trace.TraceError,
                r"^node 'ones' \(aten.ones.default\) has a symbolic size baked into argument "
                r"'size' \(\[4, 5\] at the traced sizes, \[5, 5\] with 's0' one larger\): Kiln "
                r"takes a size that is a constant times symbols \(T, 2\*T, T\*B\), not a sum like "
                r"T \+ 1: retrace with that dim static$"):
            trace(lambda x: x + torch.ones(x.shape[0] + 1, 5)[1:], [torch.randn(3, 5)],
                             "baked", symbolic=[("x", 0)])
        with self.assertRaisesRegex(kiln_trace.TraceError,
                                    r"node 'arange' \(aten.arange.start\) .* argument 'end' .*"
                                    r"write arange\(1, T \+ 1\) as arange\(T\) \+ 1"):
            trace(lambda x: x + torch.arange(1, x.shape[0] + 1), [torch.randn(3)],
                             "from_one", symbolic=[("x", 0)])
        with self.assertRaisesRegex(kiln_trace.TraceError,
                                    r"node 'slice_1' \(aten.slice.Tensor\) .* argument 'end' "
                                    r"\(2 at the traced sizes, 3 with 's0' one larger\): .*"
                                    r"retrace with that dim static$"):
            trace(lambda x: x[:x.shape[0] - 1] + 1, [torch.randn(3, 5)], "shorter",
                             symbolic=[("x", 0)])

    def test_a_view_naming_a_symbol_gets_a_symbolic_size_list(self):
        graph, _ = trace(lambda x: x.view(2, 2, x.shape[1], 6) + 1,
                                    [torch.randn(4, 3, 6)], "split", symbolic=[("x", 1, "S")])
        view = graph["nodes"][0]
        terms = [entry["terms"] for entry in view["args"][0]["sym_int_list"]["values"]]
        self.assertEqual(terms, [[{"coefficient": "2"}], [{"coefficient": "2"}],
                                 [{"coefficient": "1", "symbols": ["S"]}], [{"coefficient": "6"}]])
        self.assertEqual(view["output_types"][0]["sizes"][2], {"symbol": "S"})

    def test_a_broadcast_expand_names_the_symbol(self):
        graph, _ = trace(lambda x, m: x + m.expand(x.shape[0], 4),
                                    [torch.randn(3, 4), torch.randn(1, 4)], "mask",
                                    symbolic=[("x", 0)])
        expand = graph["nodes"][0]
        self.assertEqual(expand["op"], "aten.expand.default")
        terms = [entry["terms"] for entry in expand["args"][0]["sym_int_list"]["values"]]
        self.assertEqual(terms, [[{"coefficient": "1", "symbols": ["s0"]}], [{"coefficient": "4"}]])

    def test_two_symbols_at_one_size_are_told_apart(self):
        graph, _ = trace(lambda x: x.t() + 1, [torch.randn(4, 4)], "square",
                                    symbolic=[("x", 0, "B"), ("x", 1, "S")])
        self.assertEqual(graph["nodes"][-1]["output_types"][0]["sizes"],
                         [{"symbol": "S"}, {"symbol": "B"}])

    def test_a_flatten_keeping_the_symbolic_dim_names_it(self):
        graph, _ = trace(lambda x: x.view(x.size(0), -1) + 1, [torch.randn(3, 4, 2)],
                                    "flatten", symbolic=[("x", 0, "B")])
        terms = [entry["terms"] for entry in graph["nodes"][0]["args"][0]["sym_int_list"]["values"]]
        self.assertEqual(terms, [[{"coefficient": "1", "symbols": ["B"]}], [{"coefficient": "-1"}]])

    def test_dims_the_function_ties_need_one_symbol(self):
        with self.assertRaisesRegex(kiln_trace.TraceError,
                                    "growing only 'K1' fails .*give those dims one symbol"):
            trace(lambda x, y: x @ y, [torch.randn(3, 4), torch.randn(4, 5)], "tied",
                             symbolic=[("x", 1, "K1"), ("y", 0, "K2")])
        with self.assertRaisesRegex(kiln_trace.TraceError, "traced at size 1"):
            trace(lambda x: x + 1, [torch.randn(1, 4)], "one", symbolic=[("x", 0)])

    def test_a_scalar_that_moves_with_the_symbols_becomes_a_size(self):
        graph, _ = trace(lambda x: x / (x.shape[0] * x.shape[0] * 2),
                                    [torch.randn(3, 4)], "count", symbolic=[("x", 0, "n")])
        div = graph["nodes"][0]
        self.assertEqual(div["args"], [{"name": "other", "sym_int": {"terms": [
            {"coefficient": "2", "symbols": ["n", "n"]}]}}])

    def test_a_flattened_product_of_symbols(self):
        graph, _ = trace(lambda x: x.view(-1, 8).relu(), [torch.randn(3, 4, 8)],
                                    "flat", symbolic=[("x", 0, "B"), ("x", 1, "S")])
        view = graph["nodes"][0]
        self.assertEqual(view["output_types"][0]["sizes"][0],
                         {"symbol": "B", "times": ["S"]})
        with self.assertRaisesRegex(kiln_trace.TraceError,
                                    "symbol 'B' is traced at sizes 3 and 4"):
            trace(lambda x: x + 1, [torch.randn(3, 4)], "two",
                             symbolic=[("x", 0, "B"), ("x", 1, "B")])

    def test_a_leading_reshape_of_the_symbol_becomes_minus_one(self):
        graph, _ = trace(lambda x: x.view(x.shape[0] * 5) + 1, [torch.randn(3, 5)],
                                    "flat", symbolic=[("x", 0)])
        view = graph["nodes"][0]
        self.assertEqual(view["args"], [{"name": "size", "int_list": {"values": ["-1"]}}])
        self.assertEqual(view["output_types"][0]["sizes"], [{"symbol": "s0", "multiplier": "5"}])

    def test_relations(self):
        def parsed(text):
            return kiln_trace.json_format.MessageToDict(kiln_trace.parse_relation(text))
        self.assertEqual(parsed("s0 % 8 == 0"), {"divisible": {"symbol": "s0", "divisor": "8"}})
        self.assertEqual(parsed("2 <= s0 <= 512"),
                         {"range": {"symbol": "s0", "min": "2", "max": "512"}})
        self.assertEqual(parsed("s0<=512"), {"range": {"symbol": "s0", "max": "512"}})
        self.assertEqual(parsed("s0 >= 16"), {"range": {"symbol": "s0", "min": "16"}})
        self.assertEqual(parsed("b == c"), {"equal": {"lhs": "b", "rhs": "c"}})
        with self.assertRaisesRegex(ValueError, "cannot read relation 's0 < 5'"):
            kiln_trace.parse_relation("s0 < 5")


class CheckTest(unittest.TestCase):
    """The tool's user sees one readable line when Kiln refuses a graph."""

    def check(self, factory_source, *flags, sizes=()):
        """Runs the tracer CLI on a module holding `factory_source` with
        --check; returns (the completed process, the graph written). With
        `sizes`, also traces eager references at those sizes and asserts
        that `kiln run` matches each. Leaves the reference written in
        self.reference and kilnd's compile count in self.compiles."""
        kiln = os.path.join(os.getcwd(), "tools/kiln/kiln")
        with tempfile.TemporaryDirectory(dir="/tmp") as work:
            env = dict(os.environ, KILN_SOCKET=work + "/run/kilnd.sock",
                       KILN_CACHE_DIR=work + "/cache",
                       KILN_DAEMON=os.path.join(os.getcwd(), "daemon/kilnd"),
                       PYTHONPATH=work)
            with open(os.path.join(work, "model.py"), "w") as f:
                f.write("import torch\n" + factory_source)
            if sizes:
                flags += ("--sizes", ",".join(str(size) for size in sizes))
            result = subprocess.run(
                [sys.executable, kiln_trace.__file__, "--module", "model:factory",
                 "--out", work, "--check", kiln, *flags],
                env=env, capture_output=True, text=True)
            for size in sizes if result.returncode == 0 else ():
                sized = subprocess.run(
                    [kiln, "run", os.path.join(work, "factory.json"),
                     "--reference=" + os.path.join(work, f"factory.ref.{size}.json"),
                     "--repeat=0"], env=env, capture_output=True, text=True)
                self.assertEqual(sized.returncode, 0, f"at size {size}: {sized.stderr}")
                self.assertIn("match eager PyTorch", sized.stdout)
            stats = subprocess.run([kiln, "stats", "--json", "--start=false"], env=env,
                                   capture_output=True, text=True)
            self.compiles = (int(json.loads(stats.stdout).get("compiles", 0))
                             if stats.returncode == 0 else None)
            # Stop the kilnd that --check started (it would otherwise idle out).
            pids = subprocess.run(["pgrep", "-f", "kilnd.*" + work], capture_output=True,
                                  text=True).stdout
            for pid in pids.split():
                try:
                    os.kill(int(pid), 15)
                except ProcessLookupError:
                    pass  # already gone
            graph = self.reference = None
            if os.path.exists(os.path.join(work, "factory.json")):
                with open(os.path.join(work, "factory.json")) as f:
                    graph = json.load(f)
            if os.path.exists(os.path.join(work, "factory.ref.json")):
                with open(os.path.join(work, "factory.ref.json")) as f:
                    self.reference = json.load(f)
        return result, graph

    def test_unsupported_op_is_one_line(self):
        # A library's own op (torch.library), which Kiln has no lowering for.
        result, _ = self.check("@torch.library.custom_op('trace_test::mix', mutates_args=())\n"
                               "def mix(x: torch.Tensor) -> torch.Tensor:\n"
                               "    return x.sin()\n"
                               "@mix.register_fake\n"
                               "def _(x):\n"
                               "    return torch.empty_like(x)\n"
                               "def factory():\n"
                               "    return mix, [torch.randn(4)]\n")
        self.assertEqual(result.returncode, 1)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn("op 'trace_test.mix.default' is not supported", lines[0])

    def test_relations_reach_the_graph_and_compile(self):
        result, graph = self.check(
            "def factory():\n"
            "    return (lambda x: torch.relu(x + 1)), [torch.randn(8, 3)]\n",
            "--symbolic", "x:0", "--relation", "s0 % 4 == 0", "--relation", "s0 <= 1024")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(graph["relations"], [{"divisible": {"symbol": "s0", "divisor": "4"}},
                                              {"range": {"symbol": "s0", "max": "1024"}}])
        # The file spells fields as graph.proto does (snake_case), as every
        # Kiln JSON file and --json output.
        def keys(value):
            if isinstance(value, dict):
                return set(value) | {k for v in value.values() for k in keys(v)}
            return {k for v in value for k in keys(v)} if isinstance(value, list) else set()
        self.assertLessEqual({"output_types", "int_value"}, keys(graph))
        self.assertEqual(sorted(k for k in keys(graph) if k != k.lower()), [])

    def test_averages_over_a_symbolic_dim_compile_and_match(self):
        result, graph = self.check(
            "def factory():\n"
            "    return (lambda x: (x.mean(1), x.var(1), x.std(1, unbiased=False))),"
            " [torch.randn(2, 9, 16)]\n",
            "--symbolic", "x:1:S", sizes=(2, 3, 257))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(graph["inputs"][0]["type"]["sizes"][1], {"symbol": "S"})

    def test_a_causal_mask_over_a_symbolic_length_compiles_and_matches(self):
        result, graph = self.check(
            "def factory():\n"
            "    def causal(x):\n"
            "        t = x.shape[1]\n"
            "        mask = torch.ones(t, t, dtype=torch.bool).triu(1)\n"
            "        return x.masked_fill(mask, float('-inf')).softmax(-1)\n"
            "    return causal, [torch.randn(2, 5, 5)]\n",
            "--symbolic", "x:1:T,x:2:T", sizes=(3, 8, 17))
        self.assertEqual(result.returncode, 0, result.stderr)
        ones = graph["nodes"][0]
        self.assertEqual(ones["op"], "aten.ones.default")
        self.assertIn("sym_int_list", ones["args"][0])

    def test_positions_and_factories_over_a_symbolic_length_compile_and_match(self):
        result, graph = self.check(
            "def factory():\n"
            "    def made(x):\n"
            "        t = x.shape[0]\n"
            "        positions = x + torch.arange(t).unsqueeze(1)\n"
            "        return (positions + torch.zeros(t, 4), torch.full((t,), 2.0),\n"
            "                x.new_ones(t, t).tril())\n"
            "    return made, [torch.randn(5, 4)]\n",
            "--symbolic", "x:0:T", sizes=(2, 9, 33))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(node["op"] for node in graph["nodes"]
                                if any("sym_int" in arg or "sym_int_list" in arg
                                       for arg in node.get("args", []))),
                         ["aten.arange.default", "aten.full.default", "aten.new_ones.default",
                          "aten.zeros.default"])

    def test_transposed_and_sliced_inputs_run_with_their_traced_strides(self):
        # x is the transpose of a [5, 3] tensor, y a slice of [4, 10] rows,
        # z a row expanded to [4, 5]: the graph's guards check those strides,
        # the reference records them, and `kiln run` lays its inputs out so:
        # the one artifact compiled runs them (no respecialization).
        result, graph = self.check(
            "def factory():\n"
            "    torch.manual_seed(0)\n"
            "    a = torch.randn(5, 3, dtype=torch.float64)\n"
            "    b = torch.randn(4, 10, dtype=torch.float64)\n"
            "    c = torch.randn(5, dtype=torch.float64)\n"
            "    def f(x, y, z):\n"
            "        return (x * 2 + 1).sum(1), y.exp() + z, x @ y.t()\n"
            "    return f, [a.t(), b[:, 2:7], c.expand(4, 5)]\n")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("match eager PyTorch", result.stdout)
        strides = [[int(s["constant"]) for s in i["type"]["strides"]] for i in graph["inputs"]]
        self.assertEqual(strides, [[1, 3], [10, 1], [0, 1]])
        self.assertEqual([data.get("strides") for data in self.reference["inputs"]],
                         [[1, 3], [10, 1], [0, 1]])
        self.assertEqual(self.compiles, 1, "kiln run's inputs passed the traced guards")

    def test_bfloat16_is_checked_against_float32_math(self):
        # Large values, where statistics kept in bfloat16 would be off by
        # 0.19: Kiln's are float32, as the float32-math reference's.
        result, _ = self.check(
            "def factory():\n"
            "    torch.manual_seed(0)\n"
            "    norm = torch.nn.LayerNorm(512).to(torch.bfloat16)\n"
            "    return norm, [(torch.randn(16, 512) * 4 + 100).to(torch.bfloat16)]\n")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("match eager PyTorch", result.stdout)


if __name__ == "__main__":
    unittest.main()
