"""//tools/bench:models — real models from torchvision through kiln.compile,
on a private kilnd with an empty cache, at one thread (Kiln's pool and
OpenBLAS's, torch's and its MKL's). For each model:

  first_compile_ms  kiln.compile on an empty cache: trace, compile, load
  trace_ms          the tracing part of it (make_fx, decompositions, JSON)
  speedup           eager / Kiln, medians of timed calls, min/median/max
                    over --repetitions rounds (the two alternate)

The outputs are checked against eager first (relative to the largest
output, 1e-3: any summation order passes).

    bazel run -c opt //tools/bench:models -- --json
"""
import argparse
import json
import os
import statistics
import sys
import time

import bench_kilnd

bench_kilnd.use_package()
# One thread on both sides: Kiln's pool, torch's OpenMP and OpenBLAS's own
# threads (which eager's GEMMs would otherwise use two of).
for variable in ("KILN_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

import torch  # noqa: E402
import torchvision  # noqa: E402

import kiln  # noqa: E402
from kiln import _tracing  # noqa: E402

MODELS = {
    "resnet18": lambda: torchvision.models.resnet18(),
    "mobilenet_v3_large": lambda: torchvision.models.mobilenet_v3_large(),
    "efficientnet_b0": lambda: torchvision.models.efficientnet_b0(),
    "convnext_tiny": lambda: torchvision.models.convnext_tiny(),
    "vit_b_16": lambda: torchvision.models.vit_b_16(),
    "swin_t": lambda: torchvision.models.swin_t(),
    "deeplabv3_mobilenet_v3_large": lambda: torchvision.models.segmentation
    .deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None),
}
INPUTS = {"deeplabv3_mobilenet_v3_large": (1, 3, 256, 256)}


def median_ms(fn, x, calls):
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def first_output(result):
    return result["out"] if isinstance(result, dict) else result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="a JSON object on the last line")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--calls", type=int, default=10, help="timed calls per round")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated")
    args = parser.parse_args()
    torch.set_num_threads(1)
    figures = {}
    with bench_kilnd.private_kilnd("kbm"):
        with torch.no_grad():
            for name in args.models.split(","):
                torch.manual_seed(0)
                model = MODELS[name]().eval()
                x = torch.randn(*INPUTS.get(name, (1, 3, 224, 224)))
                start = time.perf_counter()
                _tracing.trace_graph(model, [x], name)
                trace_ms = 1e3 * (time.perf_counter() - start)
                start = time.perf_counter()
                compiled = kiln.compile(model, [x], name=name)
                first_compile_ms = 1e3 * (time.perf_counter() - start)
                expected, got = first_output(model(x)), first_output(compiled(x))
                scale = expected.abs().max().item()
                torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-3 * scale)
                speedups = []
                for _ in range(args.repetitions):
                    eager_ms = median_ms(model, x, args.calls)
                    kiln_ms = median_ms(compiled, x, args.calls)
                    speedups.append(eager_ms / kiln_ms)
                figures[name] = {"trace_ms": trace_ms, "first_compile_ms": first_compile_ms,
                                 "eager_ms": eager_ms, "kiln_ms": kiln_ms,
                                 "speedup_min": min(speedups),
                                 "speedup": statistics.median(speedups),
                                 "speedup_max": max(speedups)}
                print(f"{name}: traced {trace_ms:.0f} ms, first compile {first_compile_ms:.0f} "
                      f"ms, speedup {min(speedups):.2f} / {statistics.median(speedups):.2f} / "
                      f"{max(speedups):.2f}", file=sys.stderr, flush=True)

    with open("/proc/self/maps") as maps:
        blas = next((line.split()[-1] for line in maps if "blas" in line), "none")
    print(f"\nReal models at one thread: torch {torch.__version__}, torchvision "
          f"{torchvision.__version__}, BLAS {blas} ({bench_kilnd.blas_core()} kernels), "
          f"{os.cpu_count()} CPUs\n")
    print(f"{'model':30} {'trace ms':>9} {'compile ms':>11} {'eager ms':>9} {'kiln ms':>8} "
          f"{'speedup min/median/max':>24}")
    for name, f in figures.items():
        print(f"{name:30} {f['trace_ms']:9.0f} {f['first_compile_ms']:11.0f} {f['eager_ms']:9.2f} "
              f"{f['kiln_ms']:8.2f} {f['speedup_min']:8.2f} {f['speedup']:7.2f} "
              f"{f['speedup_max']:7.2f}")
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
