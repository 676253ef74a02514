"""Generates the per-op test cases: every op of Kiln's table, traced from
eager PyTorch (torch 2.15, the checkout's .venv) with tools/trace.

    op_cases.py --trace tools/trace/kiln_trace.py --ops docs/OPS.md --out op_cases.jsonl

Writes one kiln.test.OpCase (tests/ops/op_case.proto) per line, in protobuf
JSON: the case's name ("aten.add.Tensor/float32/broadcast"), its graph, the
inputs and eager's outputs, and how ops_test compares them.

The families (cases_*.py) build cases for the dtypes each op claims in
docs/OPS.md. The generator fails, listing them, when a claimed (op, dtype)
has no case or eager refuses a claimed dtype: the table must not claim what
is not tested, or what eager does not do.

float16: these are traced with fake tensors and the reference is float32 math
on the same values, rounded to each output's dtype, as Kiln computes float16
ops (eager's float16 CPU kernels round some intermediate results). The same
holds for the few bfloat16 ops eager lacks a kernel for.
"""
import argparse
import importlib.util
import json
import os
import re
import sys
import warnings

import torch
from torch.fx.experimental.proxy_tensor import make_fx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from cases_common import ERROR, NAMES  # noqa: E402

FAMILIES = ["cases_pointwise", "cases_activations", "cases_reductions", "cases_views",
            "cases_creation", "cases_composites", "cases_gemm", "cases_convolution",
            "cases_pooling", "cases_normalization", "cases_lookups", "cases_complex",
            "cases_special",
            "cases_linalg", "cases_lapack", "cases_scatter",
            "cases_sorting", "cases_integers", "cases_ieee",
            "cases_writes",
            "cases_attention",
            "cases_random"]
HALF = (torch.float16, torch.bfloat16)
tracer = None  # tools/trace/kiln_trace.py, loaded by main() from --trace
# Table entries no case can reach: internal ops (decompositions emit them).
INTERNAL = {"kiln.alias.default", "kiln.mm.default", "kiln.bmm.default", "kiln.stack.default",
            "kiln.concat.default", "kiln.size.default", "kiln.exp_nonpositive.default",
            "kiln.softmax_max.default", "kiln.convolution.default",
            "kiln.conv_transpose.default", "kiln.fft.default", "kiln.pool2d.default",
            "kiln.pool2d_backward.default", "kiln.avg_pool2d_divisor.default",
            "kiln.linalg.default", "kiln.qr.default", "kiln.lstsq.default",
            "kiln.matrix_exp.default", "kiln.ldl.default", "kiln.eig.default",
            "kiln.scatter_fold.default", "kiln.attention_to_length.default",
            "kiln.select_rows.default",
            "kiln.check_index.default"}  # passes/check_lookups.h adds it
INTERNAL |= {"kiln.fractional_max_pool.default",  # fractional_max_pool2d and 3d's
             "kiln_check.check.default"}  # the tracer's value checks: single_ops_test


class GenerationError(Exception):
    pass


def load_tracer(path):
    spec = importlib.util.spec_from_file_location("kiln_trace", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_claims(path):
    """{op: [dtype names]} from docs/OPS.md's table."""
    claims = {}
    for line in open(path):
        match = re.match(r"\| `(\w+\.\w+\.\w+)` \| [^|]+ \| [^|]+ \| [^|]* \| ([^|]+) \|", line)
        if match:
            claims[match.group(1)] = [d.strip() for d in match.group(2).split(",")]
    return claims


def as_list(outputs):
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def output_dtypes(graph):
    """The declared dtype of each graph output."""
    types = {i.value: i.type for i in graph.inputs}
    for node in graph.nodes:
        types.update(zip(node.outputs, node.output_types))
    by_name = {name: dtype for dtype, name in tracer.DTYPES.items()}
    return [by_name[tracer.DType.Name(types[v].dtype)] for v in graph.outputs]


def has_float16(inputs):
    return any(t.dtype == torch.float16 for t in inputs)


def float32_outputs(fn, inputs, dtypes):
    """fn on 16-bit inputs as float32 math, each output rounded to `dtypes`."""
    widened = [t.float() if t.dtype in HALF else t for t in inputs]
    return [o.to(d) for o, d in zip(as_list(fn(*widened)), dtypes)]


def trace_fake(fn, inputs, name):
    """Like kiln_trace.trace, with fake tensors: for 16-bit inputs whose
    eager kernels are missing."""
    gm = make_fx(fn, tracing_mode="fake")(*inputs)
    tracer.functionalize(gm)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return tracer.to_kiln_half(gm, list(inputs), name)


def manual_graph(case):
    """A one-node graph over the case's inputs, for ops make_fx never emits
    (it decomposes aten.linear) and for graphs Kiln must refuse."""
    op, args = case.manual
    if has_float16(case.inputs):  # float32 math, rounded back
        outputs = [o.half() if o.dtype == torch.float32 else o
                   for o in as_list(case.fn(*[t.float() if t.dtype == torch.float16 else t
                                               for t in case.inputs]))]
    else:
        outputs = as_list(case.fn(*case.inputs))
    n = len(case.inputs)
    graph = tracer.Graph(
        name=case.name,
        inputs=[tracer.Input(value=i, name=f"x{i}", type=tracer.tensor_type(t))
                for i, t in enumerate(case.inputs)],
        nodes=[tracer.Node(name=op.split(".")[1], op=op, inputs=range(n),
                           args=[tracer.scalar_arg(k, v) for k, v in args],
                           outputs=range(n, n + len(outputs)),
                           output_types=[tracer.tensor_type(o) for o in outputs])],
        outputs=range(n, n + len(outputs)))
    return graph, outputs


def trace_graph(case):
    """The case's graph: traced with real tensors, or with fake ones for
    float16 and for bfloat16 ops eager has no kernel for. (kiln_trace.trace's
    own float16 reference runs the traced graph, whose dtype arguments say
    float16, on float32 inputs: it is not used.)"""
    if has_float16(case.inputs):
        return trace_fake(case.fn, case.inputs, case.name), None
    try:
        return tracer.trace(case.fn, case.inputs, case.name, eager_bfloat16=True)
    except RuntimeError as error:
        if "BFloat16" not in str(error):
            raise
    return trace_fake(case.fn, case.inputs, case.name), None


def build(case):
    """(kiln.v1.Graph, reference JSON) of one case."""
    if case.manual:
        graph, outputs = manual_graph(case)
        provenance = f"torch {torch.__version__} eager"
    else:
        graph, reference = trace_graph(case)
        half = has_float16(case.inputs) or case.float32_reference or reference is None
        fn = case.reference_fn or case.fn
        if not half and not case.reference_fn:
            return graph, reference
        if half:
            outputs = float32_outputs(fn, case.inputs, output_dtypes(graph))
            provenance = f"torch {torch.__version__}, float32 math rounded to the output dtype"
        else:
            outputs = as_list(fn(*case.inputs))
            provenance = f"torch {torch.__version__} eager, from contiguous copies of the inputs"
    reference = {"inputs": [tracer.tensor_data(t) for t in case.inputs],
                 "outputs": [tracer.tensor_data(o) for o in outputs], "provenance": provenance}
    return graph, reference


def record(case, graph, reference):
    line = {"name": case.name, "op": case.op, "dtype": tracer.DTYPES[case.dtype],
            "graph": tracer.json_format.MessageToDict(graph, preserving_proto_field_name=True),
            "reference": reference, "check": case.check}
    if case.function:
        line["function"] = case.function
    if case.tolerance:
        line["tolerance"] = {"rtol": case.tolerance[0], "atol": case.tolerance[1]}
    if case.error:
        line["error_code"], line["error_substring"] = case.error
    if case.known_bug:
        line["known_bug"] = case.known_bug
    return json.dumps(line, separators=(",", ":"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--trace", required=True, help="path of tools/trace/kiln_trace.py")
    parser.add_argument("--ops", required=True, help="path of docs/OPS.md (the claims)")
    parser.add_argument("--out", required=True, help="the JSON-lines file to write")
    parser.add_argument("--only", help="regex: only cases whose name matches (for debugging)")
    parser.add_argument("--keep_going", action="store_true",
                        help="write the cases even when there are problems (for debugging)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    global tracer
    tracer = load_tracer(args.trace)
    claims = read_claims(args.ops)
    covered, problems, lines, names = set(), [], [], set()
    for family in FAMILIES:
        for case in importlib.import_module(family).cases(claims):
            if args.only and not re.search(args.only, case.name):
                continue
            if case.name in names:
                raise GenerationError(f"two cases are named {case.name}")
            names.add(case.name)
            try:
                graph, reference = build(case)
            except Exception as error:  # eager (or make_fx) refused the case
                problems.append(f"{case.name}: eager refuses: {str(error).splitlines()[0]}")
                continue
            ops = {node.op for node in graph.nodes}
            if case.op not in ops:
                problems.append(f"{case.name}: the traced graph has no {case.op} "
                                f"(it has {', '.join(sorted(ops))})")
                continue
            if case.check != ERROR:
                covered.add((case.op, NAMES[case.dtype]))
            lines.append(record(case, graph, reference))
    if not args.only:
        for op, dtypes in sorted(claims.items()):
            missing = [d for d in dtypes if (op, d) not in covered and op not in INTERNAL]
            if missing:
                problems.append(f"{op}: claimed but no case: {', '.join(missing)}")
    if problems:
        print(f"op_cases: {len(problems)} problems:\n  " + "\n  ".join(problems), file=sys.stderr)
        if not args.keep_going:
            sys.exit(1)
    with open(args.out, "w") as out:
        out.write("\n".join(lines) + "\n")
    print(f"op_cases: {len(lines)} cases -> {args.out}")


if __name__ == "__main__":
    main()
