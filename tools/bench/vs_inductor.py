"""//tools/bench:vs_inductor — Kiln beside Inductor, on the same machine, in
the same run, with the same torch and the same threads (--threads: torch's
intra-op threads, OpenMP's, MKL's, OpenBLAS's and Kiln's pool), both caches
on disk. For each model and each route:

  cold_ms        a process with every cache empty (a fresh
                 TORCHINDUCTOR_CACHE_DIR, a fresh KILN_CACHE_DIR and
                 kilnd): compile, load, first result
  fresh_warm_ms  a fresh process with the caches the cold one left: the
                 same code, to the first result (Inductor's FxGraphCache
                 and AOTAutogradCache hit; Kiln's local index hits)
  warm_call_us   the median of timed calls in that process

Each process's clock starts when `import torch` has returned and the model
and its inputs are built (the user's code, the same for every route), and
stops at the first result: importing kiln, torch._dynamo and
torch._inductor is inside it. Every first result is checked against eager.
Figures are min/median/max over --repetitions warm processes and
--cold_repetitions cold ones, the routes interleaved, after
--warmup_processes unmeasured warm ones of each route.

Routes (ROUTES): kiln_compile (kiln.compile), kiln_package (kiln.save in
the cold process, kiln.load in each), kiln_dynamo (torch.compile with
Kiln's backend), kiln_export (torch.export and kiln.save of the program in
the cold process, kiln.load in each), inductor (torch.compile), aoti
(torch.export and aoti_compile_and_package in the cold process,
aoti_load_package in each) and eager. inductor291 and aoti291 are inductor
and aoti in torch 2.9.1's interpreter (--inductor291_python, by default the
checkout's .venv-torch291 from scripts/install-deps.sh --with-torch291);
without it their figures are null and the fact `inductor291` says why.
KILN_SIDE names the routes Kiln's own figures come from. With --json the
last line is one flat JSON object: MODEL_ROUTE_FIGURE for every route,
MODEL_kiln_FIGURE, MODEL_eager_warm_call_us, the ratios Inductor / Kiln next
to their targets (RATIO_target), each user route's ratios: Inductor /
kiln_dynamo (MODEL_dynamo_FIGURE_ratio) and AOTInductor / kiln_export
(MODEL_export_FIGURE_ratio), and torch 2.9.1's over Kiln's as inductor's and
aoti's are (MODEL_{inductor291,aoti291}_{fresh_warm,cold}_ratio).

    bazel run -c opt //tools/bench:vs_inductor -- --json
"""
import argparse
import compileall
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import bench_kilnd

PACKAGE = bench_kilnd.use_package()

import torch  # noqa: E402

MODELS = ("f", "transformer", "resnet18", "bert")
FIGURES = ("cold_ms", "fresh_warm_ms", "warm_call_us")
# The routes Kiln's figures (MODEL_kiln_FIGURE) come from.
KILN_SIDE = {"cold_ms": "kiln_compile", "fresh_warm_ms": "kiln_package",
             "warm_call_us": "kiln_compile"}
# The ratios Inductor / Kiln, and their targets (issue 35).
TARGETS = {"f_fresh_warm_ratio": 100, "transformer_fresh_warm_ratio": 30, "cold_ratio_min": 10,
           "warm_call_ratio_min": 1.0, "warm_call_ratio_geomean": 1.2}


class FModule(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x @ x.T + 1.0)


class LastHiddenState(torch.nn.Module):
    """A Hugging Face model's last hidden state: one tensor, for every route."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


def build_model(name):
    """(module in eval mode, inputs, tolerance relative to the largest output)."""
    torch.manual_seed(0)
    if name == "f":
        return FModule(), [torch.randn(64, 64)], 1e-4
    if name == "transformer":
        layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                                 batch_first=True)
        return layer.eval(), [torch.randn(2, 16, 64)], 1e-4
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18().eval(), [torch.randn(1, 3, 224, 224)], 1e-3
    if name == "bert":
        import transformers
        config = transformers.BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2,
                                         num_attention_heads=2, intermediate_size=256,
                                         max_position_embeddings=64)
        bert = LastHiddenState(transformers.BertModel(config))
        return bert.eval(), [torch.randint(0, 1000, (1, 32))], 1e-3
    raise ValueError(f"no model {name!r}: the models are {', '.join(MODELS)}")


# ---- The routes: each returns the callable a process runs the model with.
# `cold`: the process with empty caches, which writes what later ones load
# into `directory`.

def kiln_compile(model, inputs, directory, cold):
    import kiln
    return kiln.compile(model, inputs)


def kiln_package(model, inputs, directory, cold):
    import kiln
    path = os.path.join(directory, "model.kiln")
    if cold:
        kiln.save(model, inputs, path)
    return kiln.load(path)


def kiln_dynamo(model, inputs, directory, cold):
    import kiln
    return torch.compile(model, backend=kiln.backend)  # what backend="kiln" names


def kiln_export(model, inputs, directory, cold):
    import kiln
    path = os.path.join(directory, "model.kiln")
    if cold:
        kiln.save(torch.export.export(model, tuple(inputs)), path)
    return kiln.load(path)


def inductor(model, inputs, directory, cold):
    return torch.compile(model)


def aoti(model, inputs, directory, cold):
    path = os.path.join(directory, "model.pt2")
    if cold:
        program = torch.export.export(model, tuple(inputs))
        torch._inductor.aoti_compile_and_package(program, package_path=path)
    return torch._inductor.aoti_load_package(path)


def eager(model, inputs, directory, cold):
    return model


ROUTES = {route.__name__: route for route in (kiln_compile, kiln_package, kiln_dynamo, kiln_export,
                                              inductor, aoti, eager)}
# The routes run in torch 2.9.1's interpreter: ROUTE291 is ROUTE there.
TORCH291_ROUTES = ("inductor291", "aoti291")


def median_call_us(fn, inputs):
    """The median of timed calls of fn, as many as fit in about 0.5 s (10
    to 5,000), after a second of untimed ones (at least 3): on a loaded
    machine an OpenMP pool's first calls can be far slower than later ones."""
    warmup_end, calls = time.perf_counter() + 1.0, 0
    while calls < 3 or time.perf_counter() < warmup_end:
        fn(*inputs)
        calls += 1
    start = time.perf_counter()
    fn(*inputs)
    calls = min(5000, max(10, int(0.5 / max(time.perf_counter() - start, 1e-7))))
    times = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        fn(*inputs)
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e3


def run_child(args):
    """One process of one route: prints what it measured as one JSON line."""
    torch.set_num_threads(args.threads)
    model, inputs, tolerance = build_model(args.model)
    with torch.no_grad():
        start = time.perf_counter()
        compiled = ROUTES[args.route.removesuffix("291")](model, inputs, args.directory,
                                                          args.cold)
        result = compiled(*inputs)
        first_ms = 1e3 * (time.perf_counter() - start)
        expected = model(*inputs)
        scale = float(expected.abs().max())
        torch.testing.assert_close(result, expected, rtol=tolerance, atol=tolerance * scale)
        report = {"first_ms": first_ms, "max_abs_err": float((result - expected).abs().max()),
                  "tolerance": tolerance * scale, "torch": torch.__version__,
                  "torch_threads": torch.get_num_threads()}
        if not args.cold:
            report["warm_call_us"] = median_call_us(compiled, inputs)
    if args.route.startswith("kiln"):
        import kiln
        daemon = kiln._default_client().daemon()
        report["kilnd_pid"] = int(daemon["pid"])
        report["kilnd_compiles"] = kiln.stats()["daemon"]["compiles"]
    if args.route.startswith("inductor"):
        from torch._dynamo.utils import counters
        report["inductor_counters"] = {**counters["inductor"], **counters["aot_autograd"]}
    print(json.dumps(report))


class Bench:
    """Runs the processes of one bench and keeps what they measured."""

    def __init__(self, args, root):
        self.args = args
        self.root = root
        self.samples = {}  # (model, route, figure) -> [values]
        self.errors = {}  # (model, route) -> (largest error from eager, its tolerance)
        self.kilnd_pids = set()
        self.torch = None
        self.routes = list(ROUTES)
        self.python = {route: sys.executable for route in ROUTES}
        self.env = dict(os.environ)
        for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                         "KILN_NUM_THREADS"):
            self.env[variable] = str(args.threads)
        self.env.update({
            "HF_HUB_OFFLINE": "1",
            "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
            "TORCHINDUCTOR_AUTOGRAD_CACHE": "1",
        })
        self.cxx = {sys.executable: self._compiler_with_torch_libraries(
            "g++", os.path.dirname(torch.__file__))}
        self.torch291 = self._find_torch291(args.inductor291_python)
        # Every process runs bytecode compiled ahead, as an installed
        # package's is (torch's is, in its site-packages).
        compileall.compile_dir(os.path.join(PACKAGE, "kiln"), quiet=1)

    def _compiler_with_torch_libraries(self, name, torch_directory):
        """g++ with the libraries of the torch in torch_directory first on the
        link path: Inductor puts Python's LIBDIR there first, where Debian's
        python3-torch keeps a libtorch 1.13 that AOTInductor's wrapper would
        otherwise link."""
        path = os.path.join(self.root, name)
        libraries = os.path.join(torch_directory, "lib")
        with open(path, "w") as script:
            script.write(f'#!/bin/sh\nexec {shutil.which("g++")} -L{libraries} "$@"\n')
        os.chmod(path, 0o755)
        return path

    def _find_torch291(self, python):
        """Adds TORCH291_ROUTES, run by `python`, when it has torch 2.9.1.
        The fact `inductor291`: the torch that ran them, or why none did."""
        if not os.path.exists(python):
            return (f"not measured: no {python} (scripts/install-deps.sh --with-torch291 "
                    f"creates .venv-torch291 in the checkout)")
        probe = subprocess.run(
            [python, "-c", "import importlib.metadata, importlib.util; "
             "print(importlib.metadata.version('torch'), "
             "importlib.util.find_spec('torch').submodule_search_locations[0])"],
            capture_output=True, text=True)
        if probe.returncode != 0:
            return f"not measured: {python} has no torch: {probe.stderr.strip()[-500:]}"
        version, directory = probe.stdout.strip().split(" ", 1)
        if not version.startswith("2.9.1"):
            return f"not measured: {python} has torch {version}, not 2.9.1"
        self.routes += TORCH291_ROUTES
        self.python.update(dict.fromkeys(TORCH291_ROUTES, python))
        self.cxx[python] = self._compiler_with_torch_libraries("g++291", directory)
        return f"torch {version} from {python}"

    def child(self, model, route, directory, cold):
        """Runs one process of `route`; its report."""
        python = self.python[route]
        env = dict(self.env, TORCHINDUCTOR_CACHE_DIR=os.path.join(directory, "inductor"),
                   KILN_CACHE_DIR=os.path.join(directory, "kiln"),
                   KILN_SOCKET=os.path.join(directory, "s"), CXX=self.cxx[python])
        command = [python, os.path.abspath(__file__), "--child", route, "--model", model,
                   "--directory", directory, "--threads", str(self.args.threads)]
        kind = "cold" if cold else "warm"
        start = time.perf_counter()
        out = subprocess.run(command + (["--cold"] if cold else []), env=env,
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"the {kind} process of {route} on {model} failed (exit "
                               f"{out.returncode}):\n{out.stderr[-4000:]}")
        report = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{model} {route} {kind}: first result {report['first_ms']:.1f} ms "
              f"(process {time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)
        if "kilnd_pid" in report:
            self.kilnd_pids.add(report["kilnd_pid"])
        if route not in TORCH291_ROUTES:
            self.torch = report["torch"], report["torch_threads"]
        error, tolerance = self.errors.get((model, route), (0.0, 0.0))
        self.errors[model, route] = (max(error, report["max_abs_err"]),
                                     max(tolerance, report["tolerance"]))
        return report

    def stop_kilnd(self, report):
        """Stops the kilnd a process started and waits (up to 10 s) until it
        has exited: it removes its socket and metrics files on the way."""
        pid = report.get("kilnd_pid")
        if pid not in self.kilnd_pids:
            return
        self.kilnd_pids.discard(pid)
        try:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                os.kill(pid, 0)
                time.sleep(0.01)
        except ProcessLookupError:
            pass

    def stop(self):
        for pid in list(self.kilnd_pids):
            self.stop_kilnd({"kilnd_pid": pid})

    def measure(self, model):
        """Cold processes of every route, then warm ones in the caches the
        last cold process of each left, the routes interleaved."""
        directories, cold_reports = {"eager": self.root}, {}
        for repetition in range(self.args.cold_repetitions):
            for route in self.routes:
                if route == "eager":
                    continue
                directory = os.path.join(self.root, f"{model}-{route}-{repetition}")
                os.mkdir(directory, mode=0o700)  # kilnd's socket is here: the user's only
                report = self.child(model, route, directory, cold=True)
                self.samples.setdefault((model, route, "cold_ms"), []).append(report["first_ms"])
                if route in directories:
                    self.stop_kilnd(cold_reports[route])
                    shutil.rmtree(directories[route])
                directories[route], cold_reports[route] = directory, report
        for repetition in range(-self.args.warmup_processes, self.args.repetitions):
            for route in self.routes:
                report = self.child(model, route, directories[route], cold=False)
                check_warm(model, route, report, cold_reports.get(route))
                if repetition < 0:
                    continue
                figures = ("warm_call_us",) if route == "eager" else ("fresh_warm_ms",
                                                                      "warm_call_us")
                for figure in figures:
                    value = report["first_ms" if figure == "fresh_warm_ms" else figure]
                    self.samples.setdefault((model, route, figure), []).append(value)

    def summary(self, models):
        """The flat JSON object: every figure's median, _min and _max, the
        errors from eager, Kiln's side, and the ratios with their targets."""
        result = {}
        for (model, route, figure), values in self.samples.items():
            key = f"{model}_{route}_{figure}"
            result[key] = statistics.median(values)
            result[key + "_min"], result[key + "_max"] = min(values), max(values)
        for (model, route), (error, tolerance) in self.errors.items():
            result[f"{model}_{route}_max_abs_err"] = error
            result[f"{model}_{route}_tolerance"] = tolerance
        cold_ratios, warm_call_ratios = [], []
        for model in models:
            for figure, route in KILN_SIDE.items():
                for suffix in ("", "_min", "_max"):
                    result[f"{model}_kiln_{figure}{suffix}"] = result[
                        f"{model}_{route}_{figure}{suffix}"]

            def ratio(baseline, kiln, figure):
                return result[f"{model}_{baseline}_{figure}"] / result[f"{model}_{kiln}_{figure}"]
            result[f"{model}_fresh_warm_ratio"] = ratio("inductor", "kiln", "fresh_warm_ms")
            result[f"{model}_cold_ratio"] = ratio("inductor", "kiln", "cold_ms")
            result[f"{model}_warm_call_ratio"] = ratio("inductor", "kiln", "warm_call_us")
            result[f"{model}_eager_warm_call_ratio"] = ratio("eager", "kiln", "warm_call_us")
            result[f"{model}_aoti_fresh_warm_ratio"] = ratio("aoti", "kiln_package",
                                                             "fresh_warm_ms")
            result[f"{model}_aoti_cold_ratio"] = ratio("aoti", "kiln_package", "cold_ms")
            for figure in FIGURES:
                name = figure.removesuffix("_ms").removesuffix("_us")
                result[f"{model}_dynamo_{name}_ratio"] = ratio("inductor", "kiln_dynamo", figure)
                result[f"{model}_export_{name}_ratio"] = ratio("aoti", "kiln_export", figure)
            for route, kiln in (("inductor291", "kiln"), ("aoti291", "kiln_package")):
                measured = route in self.routes
                if not measured:
                    result.update({f"{model}_{route}_{figure}": None for figure in FIGURES})
                for figure in ("fresh_warm_ms", "cold_ms"):
                    result[f"{model}_{route}_{figure.removesuffix('_ms')}_ratio"] = (
                        ratio(route, kiln, figure) if measured else None)
            cold_ratios.append(result[f"{model}_cold_ratio"])
            warm_call_ratios.append(result[f"{model}_warm_call_ratio"])
        result["cold_ratio_min"] = min(cold_ratios)
        result["warm_call_ratio_min"] = min(warm_call_ratios)
        result["warm_call_ratio_geomean"] = math.exp(
            statistics.mean(math.log(ratio) for ratio in warm_call_ratios))
        for key, target in TARGETS.items():
            if key in result:
                result[key + "_target"] = target
        result["torch"], result["threads"] = self.torch[0], self.torch[1]
        result["inductor291"] = self.torch291
        result["cpus"] = os.cpu_count()
        return result


def check_warm(model, route, report, cold_report):
    """Raises unless the warm process hit the caches the cold one filled."""
    if route == "inductor":
        counters = report["inductor_counters"]
        if counters.get("fxgraph_cache_miss") or not counters.get("fxgraph_cache_hit") or \
                not counters.get("autograd_cache_hit"):
            raise RuntimeError(f"the warm Inductor process of {model} missed its caches: "
                               f"{counters}")
    if route.startswith("kiln") and report["kilnd_compiles"] != cold_report["kilnd_compiles"]:
        raise RuntimeError(f"the warm process of {route} on {model} compiled (kilnd's compiles "
                           f"went from {cold_report['kilnd_compiles']} to "
                           f"{report['kilnd_compiles']})")


def cpu_name():
    with open("/proc/cpuinfo") as cpuinfo:
        return next((line.split(":", 1)[1].strip() for line in cpuinfo
                     if line.startswith("model name")), "unknown CPU")


def print_tables(result, models):
    torch_version, threads = result["torch"], result["threads"]
    print(f"\nKiln beside Inductor: torch {torch_version}, {threads} threads, {cpu_name()}, "
          f"{result['cpus']} CPUs, load average {result['load_1m_start']:.1f} at the start, "
          f"{result['load_1m_end']:.1f} at the end\n")
    print(f"{'model':12} {'route':13} {'cold ms min/median/max':>28} "
          f"{'fresh warm ms min/median/max':>30} {'warm call us min/median/max':>30}")

    def cell(key, width):
        if result.get(key) is None:
            return " " * (width - 1) + "-"
        text = f"{result[key + '_min']:.4g} / {result[key]:.4g} / {result[key + '_max']:.4g}"
        return f"{text:>{width}}"
    for model in models:
        for route in list(ROUTES) + list(TORCH291_ROUTES):
            print(f"{model:12} {route:13} {cell(f'{model}_{route}_cold_ms', 28)} "
                  f"{cell(f'{model}_{route}_fresh_warm_ms', 30)} "
                  f"{cell(f'{model}_{route}_warm_call_us', 30)}")
    sources = ", ".join(f"{figure} from {route}" for figure, route in KILN_SIDE.items())
    print(f"\nKiln's figures: {sources}; inductor291 and aoti291: {result['inductor291']}\n")
    for key, target in TARGETS.items():
        if key in result:
            verdict = "met" if result[key] >= target else f"missed by {target / result[key]:.2f}x"
            print(f"{key:28} {result[key]:10.4g}   target >= {target:<5} {verdict}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="a JSON object on the last line")
    parser.add_argument("--repetitions", type=int, default=3, help="warm processes per route")
    parser.add_argument("--cold_repetitions", type=int, default=3,
                        help="cold processes per route")
    parser.add_argument("--warmup_processes", type=int, default=1,
                        help="unmeasured warm processes per route, before the measured ones")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="threads of torch, OpenMP, MKL, OpenBLAS and Kiln's pool")
    parser.add_argument("--inductor291_python", default=os.path.join(
        os.environ.get("BUILD_WORKSPACE_DIRECTORY", os.getcwd()), ".venv-torch291", "bin",
        "python3"), help="the interpreter of torch 2.9.1's Inductor (default: the checkout's, "
                         "from scripts/install-deps.sh --with-torch291)")
    parser.add_argument("--child", choices=list(ROUTES) + list(TORCH291_ROUTES),
                        help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--directory", help=argparse.SUPPRESS)
    parser.add_argument("--cold", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.route = args.child
        return run_child(args)
    models = args.models.split(",")
    unknown = [model for model in models if model not in MODELS]
    if unknown:
        parser.error(f"no model {', '.join(unknown)}: the models are {', '.join(MODELS)}")
    if args.repetitions < 1 or args.cold_repetitions < 1 or args.warmup_processes < 0:
        parser.error("--repetitions and --cold_repetitions are at least 1, "
                     "--warmup_processes at least 0")
    root = tempfile.mkdtemp(prefix="kvi", dir="/tmp")  # short: kilnd's sockets live here
    bench = Bench(args, root)
    load_start = os.getloadavg()[0]
    try:
        for model in models:
            bench.measure(model)
    finally:
        bench.stop()
        shutil.rmtree(root, ignore_errors=True)
    result = bench.summary(models)
    # Other users' processes on the machine: OpenMP's barriers (eager's and
    # Inductor's) wait milliseconds for a thread the scheduler gave away.
    result["load_1m_start"], result["load_1m_end"] = load_start, os.getloadavg()[0]
    print_tables(result, models)
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
