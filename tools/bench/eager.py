"""The eager PyTorch side of //tools/bench:e2e (see docs/BENCHMARKS.md).

The benchmark keeps this process alive and drives it over a pipe, so that
`import torch` (~1 s) happens once and eager's caches stay as warm as Kiln's
between batches. Protocol, one line each way:

  start    -> `ready torch=VERSION threads=N libblas=PATH openblas=PATH`
              or `error MESSAGE` (then exit 0: a missing torch is reported,
              not fatal)
  `CALLS`  -> `alloc_ns=MEDIAN out_ns=MEDIAN alloc_minflt=F out_minflt=F`
  EOF      -> exit

`alloc` is torch.relu(x @ x.T + 1.0), as a user writes it (three fresh
tensors per call); `out` computes the same into a preallocated tensor, the
fair match for Kiln's Run into preallocated outputs. Each call is timed on
its own and the batch answers with the median; minflt is minor page faults
per call. The parent sets OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1.
"""

import resource
import statistics
import sys
import time

from eager_util import mapped


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    try:
        import torch
    except ImportError as error:
        print("error cannot import torch (%s); run scripts/install-deps.sh --with-torch" % error,
              flush=True)
        return 0
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(n, n)
    out = torch.empty(n, n)
    print("ready torch=%s threads=%d libblas=%s openblas=%s" %
          (torch.__version__, torch.get_num_threads(), mapped("libblas.so"),
           mapped("libopenblas")), flush=True)

    clock = time.perf_counter_ns
    for line in sys.stdin:
        calls = int(line)
        times = [0] * calls
        # The expressions are inlined in the loops (not called through a
        # helper) so that only the eager work and the clock read are timed.
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for i in range(calls):
            start = clock()
            torch.relu(x @ x.T + 1.0)
            times[i] = clock() - start
        alloc_ns = statistics.median(times)
        alloc_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults

        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for i in range(calls):
            start = clock()
            torch.mm(x, x.T, out=out)
            out.add_(1.0).relu_()
            times[i] = clock() - start
        out_ns = statistics.median(times)
        out_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults

        print("alloc_ns=%d out_ns=%d alloc_minflt=%.4f out_minflt=%.4f" %
              (alloc_ns, out_ns, alloc_faults / calls, out_faults / calls), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
