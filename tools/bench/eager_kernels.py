"""The eager PyTorch side of //tools/bench:kernels (see docs/BENCHMARKS.md).

Usage: eager_kernels.py WORKLOADS_PY TRACED_DIR NAME...

The benchmark starts one of these per eager configuration (ATen dispatch,
thread count), keeps it alive and drives it over a pipe, so `import torch`
happens once and eager's allocator and caches stay as warm as Kiln's.
Thread variables (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, OMP_WAIT_POLICY,
ATEN_CPU_CAPABILITY) come from the parent's environment; OpenBLAS and
OpenMP read them when they load, before any of this runs.

Each NAME is a workload: from WORKLOADS_PY (the public workloads.py), from
models.py beside it (resnet18_b8), or from kernel_workloads.py beside this
file (f_1024). Its function is called
on the inputs of TRACED_DIR/NAME.ref.json (the ones Kiln gets; lifted weights
stay inside the module, as the user wrote it), and its outputs are measured
once against TRACED_DIR/NAME.ref64.json (eager in float64 on the same
inputs) before anything is timed; the benchmark holds them to the bound it
holds Kiln's to (tools/bench/accuracy.h).

Protocol, one line each way:
  start             -> `ready torch=V threads=N capability=C libblas=P openblas=P ...
                       accuracy_NAME_K=MAX_ABS_ERR,MAX_REL_ERR ...` (output K of NAME)
                       or `error MESSAGE` (then exit 0: a missing torch is
                       reported, not fatal)
  `NAME VARIANT N`  -> `ns=MEDIAN minflt=F` (one untimed call, then N calls
                       timed one by one; the median, and minor page faults
                       per timed call) or `error MESSAGE`
  EOF               -> exit
VARIANT is `alloc` (the workload's function, as users call it) or, for
tail only, `out` (torch.add(x, 1.0, out=t); t.relu_(): no allocation).
Calls run under torch.inference_mode(), eager at its best for inference;
training steps (TRAINING) with autograd on, as they need it.
"""

import base64
import importlib.util
import os
import resource
import statistics
import sys
import time

from eager_util import mapped

TRAINING = {"mlp_train"}  # workloads that call autograd


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
    factories.update(load_module("models", os.path.join(
        os.path.dirname(workloads_py), "models.py")).WORKLOADS)
    dtypes = {"FLOAT32": numpy.float32, "FLOAT64": numpy.float64, "INT64": numpy.int64,
              "INT32": numpy.int32, "BOOL": numpy.bool_}

    def tensor(data):
        raw = base64.b64decode(data.get("data", ""))
        array = numpy.frombuffer(raw, dtype=dtypes[data.get("dtype", "FLOAT32")]).copy()
        return torch.from_numpy(array.reshape([int(s) for s in data.get("sizes", [])]))

    def errors(got, want):
        """`max_abs_err,max_rel_err` of got against a float64 reference, as
        tools/bench/accuracy.h measures them: relative to |ref| + mean |ref|;
        a NaN or infinity that the reference does not have is inf."""
        got, want = got.double().flatten(), want.double().flatten()
        finite = torch.isfinite(want)
        if not torch.equal(torch.isnan(got), torch.isnan(want)) or not torch.equal(
                got[~finite & ~torch.isnan(want)], want[~finite & ~torch.isnan(want)]):
            return "inf,inf"
        g, w = got[finite], want[finite]
        if g.numel() == 0:
            return "0,0"
        error = (g - w).abs()
        relative = error / (w.abs() + w.abs().mean())
        relative[error == 0] = 0
        return "%.6g,%.6g" % (error.max().item(), relative.max().item())

    def mode(name):
        return torch.enable_grad() if name in TRAINING else torch.inference_mode()

    accuracy = {}  # accuracy_NAME_K -> "max_abs_err,max_rel_err"
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
        with mode(name):
            got = fn(*inputs)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        with open(os.path.join(traced, name + ".ref64.json")) as f:
            reference64 = json.load(f)
        for k, (g, want) in enumerate(zip(got, reference64["outputs"])):
            accuracy["accuracy_%s_%d" % (name, k)] = errors(g, tensor(want))
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
           os.environ.get("ATEN_CPU_CAPABILITY", "unset")) +
          "".join(" %s=%s" % item for item in sorted(accuracy.items())), flush=True)

    clock = time.perf_counter_ns
    for line in sys.stdin:
        words = line.split()
        if len(words) != 3 or (words[0], words[1]) not in calls:
            print("error bad request: %s" % line.strip(), flush=True)
            continue
        call, n = calls[(words[0], words[1])], max(1, int(words[2]))
        times = [0] * n
        with mode(words[0]):
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
