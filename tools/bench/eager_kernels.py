"""The eager PyTorch side of //tools/bench:kernels (see docs/BENCHMARKS.md).

Usage: eager_kernels.py WORKLOADS_PY TRACED_DIR NAME...

The benchmark starts one of these per eager configuration (ATen dispatch,
thread count), keeps it alive and drives it over a pipe, so `import torch`
happens once and eager's allocator and caches stay as warm as Kiln's.
Thread variables (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, OMP_WAIT_POLICY,
ATEN_CPU_CAPABILITY) come from the parent's environment; OpenBLAS and
OpenMP read them when they load, before any of this runs.

Each NAME is a workload: from WORKLOADS_PY (the public workloads.py), or
from kernel_workloads.py beside this file (f_1024). Its function is called
on the inputs of TRACED_DIR/NAME.ref.json (the ones Kiln gets; lifted weights
stay inside the module, as the user wrote it), and its outputs are checked
once against that file's eager outputs before anything is timed.

Protocol, one line each way:
  start             -> `ready torch=V threads=N capability=C libblas=P openblas=P ...`
                       or `error MESSAGE` (then exit 0: a missing torch is
                       reported, not fatal)
  `NAME VARIANT N`  -> `ns=MEDIAN minflt=F` (one untimed call, then N calls
                       timed one by one; the median, and minor page faults
                       per timed call) or `error MESSAGE`
  EOF               -> exit
VARIANT is `alloc` (the workload's function, as users call it) or, for
tail only, `out` (torch.add(x, 1.0, out=t); t.relu_(): no allocation).
Calls run under torch.inference_mode(): eager at its best for inference.
"""

import base64
import importlib.util
import os
import resource
import statistics
import sys
import time

from eager_util import mapped


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    if len(sys.argv) < 4:
        print("error usage: eager_kernels.py WORKLOADS_PY TRACED_DIR NAME...", flush=True)
        return 0
    workloads_py, traced, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    try:
        import json
        import torch
        import numpy
    except ImportError as error:
        print("error cannot import torch (%s); run scripts/install-deps.sh --with-torch" % error,
              flush=True)
        return 0
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    torch.set_num_threads(threads)
    factories = dict(load_module("workloads", workloads_py).WORKLOADS)
    factories.update(load_module("kernel_workloads", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "kernel_workloads.py")).WORKLOADS)
    dtypes = {"FLOAT32": numpy.float32, "FLOAT64": numpy.float64, "INT64": numpy.int64,
              "INT32": numpy.int32, "BOOL": numpy.bool_}

    def tensor(data):
        raw = base64.b64decode(data.get("data", ""))
        array = numpy.frombuffer(raw, dtype=dtypes[data.get("dtype", "FLOAT32")]).copy()
        return torch.from_numpy(array.reshape([int(s) for s in data.get("sizes", [])]))

    calls = {}  # (name, variant) -> a function of no arguments
    for name in names:
        if name not in factories:
            print("error no workload %s in %s or kernel_workloads.py" % (name, workloads_py),
                  flush=True)
            return 0
        fn, example = factories[name]()
        with open(os.path.join(traced, name + ".ref.json")) as f:
            reference = json.load(f)
        # The function's own inputs come first; lifted weights follow (they
        # are inside the module here).
        inputs = [tensor(t) for t in reference["inputs"][:len(example)]]
        with torch.inference_mode():
            got = fn(*inputs)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        for k, (g, want) in enumerate(zip(got, reference["outputs"])):
            try:
                torch.testing.assert_close(g, tensor(want))
            except AssertionError as error:
                print("error eager %s output %d differs from the traced reference: %s" %
                      (name, k, str(error).replace("\n", " ")), flush=True)
                return 0
        calls[(name, "alloc")] = (lambda fn, inputs: lambda: fn(*inputs))(fn, inputs)
        if name == "tail":
            x, t = inputs[0], torch.empty_like(inputs[0])

            def tail_out(x=x, t=t):
                torch.add(x, 1.0, out=t)
                t.relu_()
            calls[(name, "out")] = tail_out

    config = torch.__config__.show()
    capability = config.split("CPU capability usage:")[1].split()[0] if (
        "CPU capability usage:" in config) else "?"
    print("ready torch=%s threads=%d capability=%s libblas=%s openblas=%s "
          "OPENBLAS_NUM_THREADS=%s OMP_NUM_THREADS=%s OMP_WAIT_POLICY=%s ATEN_CPU_CAPABILITY=%s" %
          (torch.__version__, torch.get_num_threads(), capability, mapped("libblas.so"),
           mapped("libopenblas"), os.environ.get("OPENBLAS_NUM_THREADS", "unset"),
           os.environ.get("OMP_NUM_THREADS", "unset"), os.environ.get("OMP_WAIT_POLICY", "unset"),
           os.environ.get("ATEN_CPU_CAPABILITY", "unset")), flush=True)

    clock = time.perf_counter_ns
    for line in sys.stdin:
        words = line.split()
        if len(words) != 3 or (words[0], words[1]) not in calls:
            print("error bad request: %s" % line.strip(), flush=True)
            continue
        call, n = calls[(words[0], words[1])], max(1, int(words[2]))
        times = [0] * n
        with torch.inference_mode():
            call()  # untimed: whatever the previous batch left behind settles here
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for i in range(n):
                start = clock()
                call()
                times[i] = clock() - start
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        print("ns=%d minflt=%.4f" % (statistics.median(times), faults / n), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
