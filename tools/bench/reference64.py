"""Float64 references for the benches' result checks (docs/BENCHMARKS.md).

Usage: reference64.py --trace KILN_TRACE_PY --workloads PY [--workloads PY ...]
                      --case WORKLOAD REF_JSON OUT_JSON [--case ...]

For each case, WORKLOAD's function (from the --workloads files) is traced
with make_fx at the sizes of REF_JSON's inputs, as tools/trace does, and its
ATen graph is run by eager PyTorch in float64 on REF_JSON's inputs (the ones
Kiln and eager get, lifted weights included), every float32 tensor and
dtype argument made float64. OUT_JSON holds the outputs (kiln.v1.Reference,
no inputs). Run at build time by //tools/bench:traced and :dynamic64.
"""

import argparse
import base64
import importlib.util
import json
import sys

import numpy
import torch
from torch.fx.experimental.proxy_tensor import make_fx

DTYPES = {"FLOAT32": numpy.float32, "FLOAT64": numpy.float64, "INT64": numpy.int64,
          "INT32": numpy.int32, "BOOL": numpy.bool_}


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tensor(data):
    raw = base64.b64decode(data.get("data", ""))
    array = numpy.frombuffer(raw, dtype=DTYPES[data.get("dtype", "FLOAT32")]).copy()
    return torch.from_numpy(array.reshape([int(s) for s in data.get("sizes", [])]))


def promote(value):
    if isinstance(value, torch.dtype):
        return torch.float64 if value == torch.float32 else value
    if isinstance(value, torch.Tensor):
        return value.double() if value.dtype == torch.float32 else value
    if isinstance(value, (list, tuple)):
        return type(value)(promote(v) for v in value)
    return value


class Float64(torch.fx.Interpreter):
    def call_function(self, target, args, kwargs):
        return super().call_function(target, promote(args),
                                     {k: promote(v) for k, v in kwargs.items()})


def reference64(trace, fn, example, ref):
    inputs = [tensor(t) for t in ref["inputs"]]
    own = inputs[:len(example)]
    gm = make_fx(fn)(*own)
    trace.functionalize(gm)
    lifted = trace.lift_constants(gm)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    if len(own) + len(lifted) != len(inputs):
        raise SystemExit("reference64: %d inputs traced, the reference has %d" %
                         (len(own) + len(lifted), len(inputs)))
    with torch.no_grad():
        outputs = Float64(gm).run(*[promote(t) for t in inputs])
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    return {"inputs": [], "outputs": [trace.tensor_data(o) for o in outputs],
            "provenance": "float64 eager PyTorch %s (tools/bench/reference64.py)" %
                          torch.__version__}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", required=True)
    parser.add_argument("--workloads", action="append", required=True)
    parser.add_argument("--case", nargs=3, action="append", required=True,
                        metavar=("WORKLOAD", "REF_JSON", "OUT_JSON"))
    args = parser.parse_args()
    trace = load("kiln_trace", args.trace)
    factories = {}
    for i, path in enumerate(args.workloads):
        factories.update(load("workloads%d" % i, path).WORKLOADS)
    for workload, ref_path, out_path in args.case:
        fn, example = factories[workload]()
        with open(ref_path) as f:
            ref = json.load(f)
        with open(out_path, "w") as f:
            json.dump(reference64(trace, fn, example, ref), f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
