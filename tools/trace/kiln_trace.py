#!/usr/bin/env python3
"""Traces a PyTorch function or nn.Module into a Kiln graph file.

Writes NAME.json (a kiln.v1.Graph in protobuf JSON, snake_case field names)
and NAME.ref.json (a kiln.v1.Reference: the inputs traced with and eager
PyTorch's outputs).

    kiln_trace.py --workload mlp --out DIR          # a public workload
    kiln_trace.py --workload all --out DIR
    kiln_trace.py --module pkg.mod:factory --out DIR  # factory() -> (fn, inputs)

The tracing is the module kiln._tracing (client/python/kiln/_tracing.py),
which kiln.compile shares; this is its command line.
"""
import argparse
import importlib
import importlib.util
import json
import os
import subprocess
import sys

# The package `kiln` from this tree. Resolving symlinks finds it from the
# source tree, Bazel's execroot and runfiles alike; importing it loads
# nothing but Python. Its generated graph_pb2 is in runfiles beside this
# file's link (kiln/__init__.py extends the package over it).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                "..", "..", "client", "python"))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "client", "python"))
import torch  # noqa: E402
from google.protobuf import json_format  # noqa: E402,F401

from kiln import _tracing  # noqa: E402
# Also what tests/ops/op_cases.py and tools/bench/reference64.py use from
# the module they load from this file.
from kiln._decompositions import TraceError  # noqa: E402,F401
from kiln._functionalize import functionalize, lift_constants  # noqa: E402,F401
from kiln._graph import (  # noqa: E402,F401
    DTYPES, parse_relation, scalar_arg, tensor_type, to_json, to_kiln_half)
from kiln._references import sized_references, tensor_data, trace  # noqa: E402,F401
from kiln.graph_pb2 import DType, Graph, Input, Node  # noqa: E402,F401


def check(kiln, out_dir, name):
    """Compiles and runs NAME through kilnd; prints kiln's verdict."""
    path = os.path.join(out_dir, name)
    result = subprocess.run([kiln, "run", path + ".json", "--reference=" + path + ".ref.json",
                             "--repeat=0"], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"kiln_trace: {name}: {result.stderr.strip()}", file=sys.stderr)
        return False
    print("  " + "\n  ".join(line for line in result.stdout.splitlines()
                              if line.startswith(("graph", "eager"))))
    return True


def write(out_dir, name, graph, reference):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        f.write(to_json(graph))
    with open(os.path.join(out_dir, name + ".ref.json"), "w") as f:
        json.dump(reference, f)


def workloads(path=None):
    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "workloads", "workloads.py")
    spec = importlib.util.spec_from_file_location("workloads", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WORKLOADS


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1] + "\n"
                                     + _tracing.__doc__.split("\n\n", 2)[2])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--workload", help="a name from workloads.py, or 'all'")
    source.add_argument("--module", help="MODULE:FACTORY, FACTORY() returning (fn, inputs)")
    parser.add_argument("--out", required=True, help="directory for NAME.json and NAME.ref.json")
    parser.add_argument("--name", help="graph name (default: the workload or factory name)")
    parser.add_argument("--symbolic", default="",
                        help="comma-separated INPUT:DIM[:SYMBOL] to make symbolic, e.g. x:0, or "
                             "q:0:b,k:0:b,v:0:b for one batch symbol shared by three inputs")
    parser.add_argument("--relation", action="append", default=[], metavar="RELATION",
                        help="what the symbolic sizes promise, repeatable: 'S %% N == 0', "
                             "'LO <= S <= HI', 'S <= HI', 'S >= LO', 'A == B'")
    parser.add_argument("--dtype", choices=["float32", "float64", "float16", "bfloat16"],
                        help="cast floating inputs (and parameters) to this dtype")
    parser.add_argument("--workloads", help="path of workloads.py (default: tests/workloads/workloads.py)")
    parser.add_argument("--reweight", type=int, metavar="SEED",
                        help="also write NAME_reweighted: the same graph with other random "
                             "weights (lifted parameters) and its eager outputs")
    parser.add_argument("--sizes", default="",
                        help="with --symbolic: also write NAME.ref.N.json for each listed "
                             "size N of the symbolic dims (eager outputs on fresh inputs)")
    parser.add_argument("--check", metavar="KILN",
                        help="then compile and run each graph with this `kiln` binary and "
                             "compare with eager (kiln run --reference)")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.workload:
        table = workloads(args.workloads)
        names = sorted(table) if args.workload == "all" else [args.workload]
        factories = []
        for name in names:
            if name not in table:
                parser.error(f"unknown workload '{name}'; known: {', '.join(sorted(table))}")
            factories.append((name, table[name]))
    else:
        module, _, attribute = args.module.partition(":")
        factories = [(args.name or attribute, getattr(importlib.import_module(module), attribute))]
    # INPUT:DIM[:SYMBOL]; dims naming the same symbol are equal (q:0:b,k:0:b).
    symbolic = [(part.split(":")[0], int(part.split(":")[1]), *part.split(":")[2:])
                for part in args.symbolic.split(",") if part]
    try:
        relations = [parse_relation(text) for text in args.relation]
    except ValueError as error:
        parser.error(str(error))
    if relations and not symbolic:
        parser.error("--relation needs --symbolic")
    for name, factory in factories:
        fn, inputs = factory()
        if args.dtype:
            dtype = getattr(torch, args.dtype)
            inputs = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
        try:
            graph, reference = trace(fn, inputs, args.name or name, symbolic,
                                     relations=relations)
        except TraceError as error:
            print(f"kiln_trace: {name}: {error}", file=sys.stderr)
            sys.exit(1)
        written = [args.name or name]
        write(args.out, written[0], graph, reference)
        if args.sizes:
            sizes = [int(n) for n in args.sizes.split(",")]
            for size, sized in sized_references(fn, inputs, symbolic, sizes, name).items():
                with open(os.path.join(args.out, f"{written[0]}.ref.{size}.json"), "w") as f:
                    json.dump(sized, f)
        if args.reweight is not None:
            graph, reference = trace(fn, inputs, written[0], symbolic, weights_seed=args.reweight,
                                     relations=relations)
            written.append(written[0] + "_reweighted")
            write(args.out, written[1], graph, reference)
        for item in written:
            print(f"{item}: {len(graph.nodes)} nodes -> {args.out}/{item}.json")
            if args.check and not check(args.check, args.out, item):
                sys.exit(1)


if __name__ == "__main__":
    main()
