"""//tools/bench:python — Kiln from Python (docs/PYTHON.md), on a private
kilnd with an empty cache. Figures, each min/median/max over --repetitions:

  py_call_overhead_us     a Python call of f (relu(x @ x.T + 1), 64x64
                          float32, outputs allocated) minus the C++ Run of
                          the same artifact with outputs allocated
  py_dlpack_export_us     torch's x.__dlpack__() for that x: what each
                          input would add to a call if tensors crossed into
                          the extension as DLPack capsules (docs/PYTHON.md)
  py_f_speedup            eager f / Kiln's f, both called from Python
  py_transformer_speedup  the same for the public transformer layer
                          (16 x 2 x 64)
  py_transformer_speedup_eager_1blas  the same with eager's OpenBLAS at one
                          thread (faster for its small GEMMs here)
  py_decode_step_{256,2048,8192}_speedup  eager's per-token time ÷ Kiln's
                          for a GPT-style decoder (decoding.py: 4 layers,
                          width 256, 4 heads, one sequence) with a static
                          cache of 256, 2,048 or 8,192 positions written
                          by index_copy_ at a position tensor
  decode_growth           Kiln's per-token time at 8,192 positions ÷ at 256
  eager_decode_growth     the same for eager, in the same run
  decode_bytes_written_per_step  the bytes of the cache pages one Kiln step
                          at 8,192 positions writes, counted by the kernel
                          (decoding.PagesWritten: copy-on-write pages)
  py_decode_paged_speedup  eager's time ÷ Kiln's for a step of 8 sequences
                          at lengths 64 to 4,000 through a block table
                          into one pool (decoding.PagedDecoder, the same
                          sizes, blocks of 16 positions, a symbolic batch)
  py_sgd_step_speedup     the same for a whole training step of the public
                          MLP (256 -> 1024 -> 256, GELU, batch 64, MSE):
                          loss, gradients and SGD on the module's own
                          parameters, which Kiln copies back after each call
  py_fresh_worker_ms      a fresh Python process: from `import torch` done
                          to the first result of a kiln.load'ed transformer
                          layer, on a cache hit (the package's bytecode
                          cached, as an installed package's is)
  py_fresh_worker_faults  the page faults that takes
  page_fault_us           what one page fault costs on this machine (a
                          file-backed page, then an anonymous one): on
                          some VMs it is 20-70 us, where hardware takes ~1
  py_partitioned_fraction  a model with one op Kiln lacks in the middle
                          (four pre-norm MLP blocks around an FFT token
                          mixer, FNet's, 8 x 32 x 128, as a custom op), run
                          partitioned (the mixer through torch), against
                          the best partitioning can do: the same model
                          without the mixer compiled whole, plus the
                          mixer's own eager time. That sum / its time, so a
                          speed ratio (1 = the seams cost nothing)
  py_partitioned_overhead_us  the partitioned model's time minus that sum:
                          what the partition's seams cost
  py_partitioned_mixer_share  the mixer's eager time / the model's without it
  py_partitioned_vs_native  the same model with the mixer as torch.fft
                          (which Kiln compiles) compiled whole / the
                          partitioned one's time
                          (these and py_detection_fraction: one call of
                          each model in turn, so each sees the same load,
                          and the mixer finds the caches as a model leaves
                          them; interleaved_us)
  py_detection_fraction   a model with an op whose output's size depends
                          on its input's values in the middle: a detection
                          head (two pre-norm MLP blocks over 512 anchors of
                          width 128, a score per anchor, the anchors scoring
                          above 0 selected by nonzero as a custom op, two
                          blocks and a box regression over them), run
                          partitioned (the selection through torch, the
                          blocks after it on a symbolic count), against
                          the same model given those indices as an input,
                          compiled whole, plus the selection's own eager
                          time: that sum / its time
  py_trace_ms             kiln's tracing of the transformer layer (make_fx,
                          lifting, graph JSON)
  eager_slowdown_after_import  the eager transformer layer after importing
                          kiln and running a Kiln call / before, in one
                          process; over the same ratio in a process that
                          runs no Kiln between its two timings
  eager_matmul_slowdown_after_import  the same for an eager 1024 x 1024
                          matmul, which runs on OpenBLAS's threads

    bazel run -c opt //tools/bench:python -- --json [--threads N] [--only KEY,...]
"""
import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

import bench_kilnd

PACKAGE = bench_kilnd.use_package()

import torch  # noqa: E402

import decoding  # noqa: E402
import kiln  # noqa: E402
from kiln import _tracing  # noqa: E402


@torch.library.custom_op("kiln_bench::fourier_mix", mutates_args=())
def fourier_mix(x: torch.Tensor) -> torch.Tensor:
    """FNet's token mixer as a library's own op: one Kiln has no lowering
    for, whichever ops Kiln compiles."""
    return torch.fft.fft2(x).real


@fourier_mix.register_fake
def _(x):
    return torch.empty_like(x)


class FourierModel(torch.nn.Module):
    """Pre-norm MLP blocks around one FFT token mixer (FNet's): the custom
    op; with `mixer=False` left out (the block adds the norm); with
    `mixer="fft"` torch.fft's, which Kiln compiles."""

    def __init__(self, width=128, hidden=256, blocks=4, mixer=True):
        super().__init__()
        self.mixer = mixer
        self.norm = torch.nn.LayerNorm(width)
        self.blocks = torch.nn.ModuleList(torch.nn.Sequential(
            torch.nn.LayerNorm(width), torch.nn.Linear(width, hidden), torch.nn.GELU(),
            torch.nn.Linear(hidden, width)) for _ in range(blocks))

    def forward(self, x):
        half = len(self.blocks) // 2
        for block in self.blocks[:half]:
            x = x + block(x)
        mixed = self.norm(x)
        if self.mixer == "fft":
            x = x + torch.fft.fft2(mixed).real
        else:
            x = x + (fourier_mix(mixed) if self.mixer else mixed)
        for block in self.blocks[half:]:
            x = x + block(x)
        return x


@torch.library.custom_op("kiln_bench::above", mutates_args=())
def above(scores: torch.Tensor, threshold: float) -> torch.Tensor:
    """The indices of the 1-D `scores` above `threshold`, by nonzero, as a
    library's own op: one whose output's size depends on its input's values
    and that runs through torch whichever ops Kiln compiles."""
    return torch.nonzero(scores > threshold).flatten()


@above.register_fake
def _(scores, threshold):
    return scores.new_empty(torch.library.get_ctx().new_dynamic_size(), dtype=torch.int64)


class DetectionHead(torch.nn.Module):
    """Pre-norm MLP blocks over anchors, a score per anchor, the anchors
    scoring above 0 selected (`above`), then blocks and a box regression
    over the selected ones. Called with `keep`, it selects those indices
    instead: the same model without the data-dependent op."""

    def __init__(self, width=128, hidden=256, blocks=2):
        super().__init__()
        def block():
            return torch.nn.Sequential(torch.nn.LayerNorm(width), torch.nn.Linear(width, hidden),
                                       torch.nn.GELU(), torch.nn.Linear(hidden, width))
        self.trunk = torch.nn.ModuleList(block() for _ in range(blocks))
        self.score = torch.nn.Linear(width, 1)
        self.refine = torch.nn.ModuleList(block() for _ in range(blocks))
        self.box = torch.nn.Linear(width, 4)

    def forward(self, anchors, keep=None):
        x = anchors
        for block in self.trunk:
            x = x + block(x)
        if keep is None:
            keep = above(self.score(x).squeeze(-1), 0.0)
        x = x.index_select(0, keep)
        for block in self.refine:
            x = x + block(x)
        return self.box(x)


def median_us(fn, calls):
    """The median of `calls` timed calls of fn, in microseconds."""
    times = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e3


def interleaved_us(calls, rounds):
    """{name: the lower decile of `rounds` timed calls, in microseconds} of
    the calls {name: fn}, one call of each in turn: on a shared machine each
    sees the same load, and the lower decile is a call's time when the
    scheduler let it run (the median of a 2 ms call on a loaded machine is
    whether half its calls were descheduled)."""
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            start = time.perf_counter_ns()
            fn()
            times[name].append(time.perf_counter_ns() - start)
    return {name: sorted(spent)[rounds // 10] / 1e3 for name, spent in times.items()}


def transformer():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128).eval()
    return layer, torch.randn(16, 2, 64)


class SgdStep(torch.nn.Module):
    """One SGD step of an MLP on its own parameters; returns the loss."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(),
                                       torch.nn.Linear(1024, 256))

    def forward(self, x, target):
        parameters = list(self.net.parameters())
        loss = torch.nn.functional.mse_loss(self.net(x), target)
        with torch.no_grad():
            for parameter, gradient in zip(parameters, torch.autograd.grad(loss, parameters)):
                parameter.sub_(1e-3 * gradient)
        return loss


def decoders():
    """{positions: (eager, compiled, module)}: the decoder at each cache
    length, eager and compiled, which generate the same tokens."""
    made = {}
    for positions in (256, 2048, 8192):
        torch.manual_seed(0)
        decoder = decoding.Decoder(vocab=256, width=256, heads=4, layers=4,
                                   positions=positions).eval()
        eager = copy.deepcopy(decoder)
        compiled = kiln.compile(decoder, (torch.tensor([0]), torch.tensor([0])), strict=True)
        assert decoding.greedy(compiled, 1, 0, 8) == decoding.greedy(eager, 1, 0, 8)
        made[positions] = (eager, compiled, decoder)
    return made


def paged_decoder():
    """The paged decoder, eager and compiled (batch symbolic), and a step's
    inputs: 8 sequences at lengths 64 to 4,000."""
    torch.manual_seed(0)
    decoder = decoding.PagedDecoder(vocab=256, width=256, heads=4, layers=4, blocks=8 * 256,
                                    block=16, positions=4096).eval()
    eager = copy.deepcopy(decoder)
    inputs = (torch.arange(8), torch.linspace(64, 4000, 8).to(torch.int64),
              torch.randperm(8 * 256).to(torch.int32).view(8, 256))
    compiled = kiln.compile(decoder, inputs, dynamic={0: {0: "B"}, 1: {0: "B"}, 2: {0: "B"}},
                            strict=True)
    assert compiled(*inputs).argmax(-1).tolist() == eager(*inputs).argmax(-1).tolist()
    return eager, compiled, inputs


def decoding_figures(made):
    """{positions: (eager's, Kiln's per-token microseconds)}, and the bytes
    a Kiln step writes at the longest cache."""
    figures = {}
    for positions, (eager, compiled, decoder) in made.items():
        places = iter(range(10**9))

        def step(model):
            return lambda: model(torch.tensor([1]), torch.tensor([next(places) % positions]))
        calls = max(20, 1000 * 256 // positions)
        figures[positions] = (median_us(step(eager), calls), median_us(step(compiled), calls))
    with decoding.PagesWritten(decoder.caches()) as pages:
        compiled(torch.tensor([1]), torch.tensor([positions // 2]))
        written = pages.bytes()
    return figures, written


FRESH_WORKER = """
import resource, sys, time
import torch
ready = time.perf_counter()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
sys.path.insert(0, {package!r})
import kiln
with torch.no_grad():
    y = kiln.load({path!r})(torch.ones(16, 2, 64))
print(1e3 * (time.perf_counter() - ready),
      resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults, float(y.sum()))
"""

# Touches one byte 64 KiB apart (past the kernel's fault-around) in up to
# 256 pages of a file in the page cache, then of anonymous memory:
# microseconds per fault, the mean of the two.
PAGE_FAULT = """
import mmap, resource, sys, time
def per_fault(memory, pages, touch):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    for page in range(pages):
        touch(memory, page * 65536)
    elapsed = time.perf_counter() - start
    return elapsed / max(1, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
with open(sys.executable, "rb") as file:
    pages = min(256, len(file.read()) // 65536)
    file_us = per_fault(mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ), pages,
                        lambda memory, at: memory[at])
anonymous_us = per_fault(mmap.mmap(-1, 256 * 65536), 256,
                         lambda memory, at: memory.__setitem__(at, 1))
print(1e6 * (file_us + anonymous_us) / 2)
"""

# Eager PyTorch in a fresh process, timed before and after a step: with
# Kiln, importing kiln and running a Kiln call with a GEMM (the extension,
# the runtime, its pool and its OpenBLAS handling); without, nothing. The
# after/before ratios of the median microseconds of the transformer layer
# and of a 1024 x 1024 matmul (large enough for OpenBLAS's threads). Timing
# both in one process keeps its memory layout out of the ratio; the process
# without Kiln takes out what running longer changes by itself.
EAGER = """
import statistics, sys, time
import torch
sys.path.insert(0, {package!r})
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128).eval()
x = torch.randn(16, 2, 64)
a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
def median_us(f, warmup, calls):
    with torch.no_grad():
        for _ in range(warmup):
            f()
        times = []
        for _ in range(calls):
            start = time.perf_counter_ns()
            f()
            times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e3
def eager():
    return median_us(lambda: layer(x), 50, 300), median_us(lambda: a @ b, 3, 30)
before = eager()
if {with_kiln}:
    import kiln
    with torch.no_grad():
        y = torch.randn(256, 256)
        kiln.compile(lambda t: torch.relu(t @ t.T + 1.0), [y])(y)
after = eager()
print(after[0] / before[0], after[1] / before[1])
"""


KEYS = ("py_call_overhead_us", "py_dlpack_export_us", "py_f_speedup", "py_transformer_speedup",
        "py_transformer_speedup_eager_1blas", "py_decode_step_256_speedup",
        "py_decode_step_2048_speedup", "py_decode_step_8192_speedup", "decode_growth",
        "eager_decode_growth", "decode_bytes_written_per_step", "py_decode_paged_speedup",
        "py_sgd_step_speedup", "py_fresh_worker_ms", "py_fresh_worker_faults", "page_fault_us",
        "py_partitioned_fraction", "py_partitioned_overhead_us", "py_partitioned_mixer_share",
        "py_partitioned_vs_native", "py_detection_fraction",
        "py_trace_ms", "eager_slowdown_after_import", "eager_matmul_slowdown_after_import")


def partitioned_models():
    """The Fourier model partitioned around its mixer, without the mixer and
    with torch.fft's compiled whole, the detection head partitioned around
    its selection and given the selection compiled whole, each checked
    against eager; and a timed call of each by name."""
    torch.manual_seed(0)
    fourier, tokens = FourierModel().eval(), torch.randn(8, 32, 128)
    without_mixer = FourierModel(mixer=False).eval()
    without_mixer.load_state_dict(fourier.state_dict())
    native_mixer = FourierModel(mixer="fft").eval()
    native_mixer.load_state_dict(fourier.state_dict())
    head, anchors = DetectionHead().eval(), torch.randn(512, 128)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the partitioning's own
        partitioned = kiln.compile(fourier, [tokens])
        head_partitioned = kiln.compile(head, [anchors])
    x = anchors
    for block in head.trunk:
        x = x + block(x)
    keep = above(head.score(x).squeeze(-1), 0.0)
    whole = kiln.compile(without_mixer, [tokens], strict=True)
    native = kiln.compile(native_mixer, [tokens], strict=True)
    head_whole = kiln.compile(head, [anchors, keep], strict=True)
    torch.testing.assert_close(native(tokens), fourier(tokens), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(partitioned(tokens), fourier(tokens), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(head_partitioned(anchors), head(anchors), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(head_whole(anchors, keep), head(anchors), rtol=1e-4, atol=1e-4)
    mixed, scores = fourier.norm(tokens), head.score(x).squeeze(-1)
    return {"partitioned": lambda: partitioned(tokens), "whole": lambda: whole(tokens),
            "mixer": lambda: fourier_mix(mixed), "native": lambda: native(tokens),
            "head_partitioned": lambda: head_partitioned(anchors),
            "head_whole": lambda: head_whole(anchors, keep),
            "selection": lambda: above(scores, 0.0)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="a JSON object on the last line")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0,
                        help="torch's intra-op threads, on which Kiln's kernels run too "
                             "(default: torch's own count)")
    parser.add_argument("--only", default="",
                        help="comma-separated figure keys: measure these alone")
    args = parser.parse_args()
    only = [key for key in args.only.split(",") if key]
    unknown = [key for key in only if key not in KEYS]
    if unknown:
        parser.error(f"--only: no figure {', '.join(unknown)}; the figures: {', '.join(KEYS)}")
    if args.threads:
        torch.set_num_threads(args.threads)

    def wanted(*keys):
        return not only or any(key in only for key in keys)

    openblas = bench_kilnd.openblas()
    samples = {key: [] for key in KEYS}
    with bench_kilnd.private_kilnd("kbp") as root:
        with torch.no_grad():
            def f(t):
                return torch.relu(t @ t.T + 1.0)
            x = torch.randn(64, 64)
            compiled_f = kiln.compile(f, [x])
            layer, src = transformer()
            compiled_layer = kiln.compile(layer, [src])
            package = os.path.join(root, "layer.kiln")
            kiln.save(layer, [src], package, dynamic={0: {0: "S", 1: "B"}})
            kiln.load(package)(src)  # compiled here, so fresh workers hit
            torch.testing.assert_close(compiled_f(x), f(x), rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(compiled_layer(src), layer(src), rtol=1e-4, atol=1e-4)
            decoding_keys = [key for key in KEYS if "decode" in key]
            if wanted(*decoding_keys):
                made = decoders()
                eager_paged, compiled_paged, paged_inputs = paged_decoder()
            sgd, eager_sgd = SgdStep(), SgdStep()
            eager_sgd.load_state_dict(sgd.state_dict())
            batch, target = torch.randn(64, 256), torch.randn(64, 256)
            with torch.enable_grad():  # the step takes its own gradients
                compiled_sgd = kiln.compile(sgd, [batch, target])
                torch.testing.assert_close(compiled_sgd(batch, target), eager_sgd(batch, target),
                                           rtol=1e-4, atol=1e-5)
            seams = partitioned_models()
            for _ in range(args.repetitions):
                if wanted("py_partitioned_fraction", "py_partitioned_overhead_us",
                          "py_partitioned_mixer_share", "py_partitioned_vs_native",
                          "py_detection_fraction"):
                    us = interleaved_us(seams, 500)
                    samples["py_partitioned_fraction"].append(
                        (us["whole"] + us["mixer"]) / us["partitioned"])
                    samples["py_partitioned_vs_native"].append(us["native"] / us["partitioned"])
                    samples["py_partitioned_overhead_us"].append(
                        us["partitioned"] - us["whole"] - us["mixer"])
                    samples["py_partitioned_mixer_share"].append(us["mixer"] / us["whole"])
                    samples["py_detection_fraction"].append(
                        (us["head_whole"] + us["selection"]) / us["head_partitioned"])
                if wanted("py_call_overhead_us", "py_dlpack_export_us", "py_f_speedup"):
                    python_us = median_us(lambda: compiled_f(x), 5000)
                    cpp_us = compiled_f._native._median_cpp_run_ns([x], 5000) / 1e3
                    samples["py_call_overhead_us"].append(python_us - cpp_us)
                    samples["py_dlpack_export_us"].append(median_us(lambda: x.__dlpack__(), 5000))
                    samples["py_f_speedup"].append(median_us(lambda: f(x), 2000) / python_us)
                if wanted("py_transformer_speedup", "py_transformer_speedup_eager_1blas"):
                    kiln_us = median_us(lambda: compiled_layer(src), 500)
                    samples["py_transformer_speedup"].append(
                        median_us(lambda: layer(src), 500) / kiln_us)
                    # Small GEMMs run faster in OpenBLAS at one thread: eager
                    # at its best setting here too.
                    openblas_threads = openblas.openblas_get_num_threads()
                    openblas.openblas_set_num_threads(1)
                    samples["py_transformer_speedup_eager_1blas"].append(
                        median_us(lambda: layer(src), 500) / kiln_us)
                    openblas.openblas_set_num_threads(openblas_threads)
                if wanted(*decoding_keys):
                    figures, written = decoding_figures(made)
                    for positions, (eager_us, kiln_us) in figures.items():
                        samples[f"py_decode_step_{positions}_speedup"].append(eager_us / kiln_us)
                    samples["decode_growth"].append(figures[8192][1] / figures[256][1])
                    samples["eager_decode_growth"].append(figures[8192][0] / figures[256][0])
                    samples["decode_bytes_written_per_step"].append(written)
                    samples["py_decode_paged_speedup"].append(
                        median_us(lambda: eager_paged(*paged_inputs), 10)
                        / median_us(lambda: compiled_paged(*paged_inputs), 10))
                if wanted("py_sgd_step_speedup"):
                    with torch.enable_grad():
                        samples["py_sgd_step_speedup"].append(
                            median_us(lambda: eager_sgd(batch, target), 200)
                            / median_us(lambda: compiled_sgd(batch, target), 200))
                if wanted("py_trace_ms"):
                    start = time.perf_counter()
                    _tracing.trace_graph(layer, [src], "layer")
                    samples["py_trace_ms"].append(1e3 * (time.perf_counter() - start))
        # A worker runs an installed package, whose bytecode is compiled:
        # this one's goes to a cache of the bench's own (the first run).
        worker_env = {**os.environ, "PYTHONPYCACHEPREFIX": os.path.join(root, "pycache")}
        worker_env.pop("PYTHONDONTWRITEBYTECODE", None)
        worker = [sys.executable, "-c", FRESH_WORKER.format(package=PACKAGE, path=package)]
        processes = ("py_fresh_worker_ms", "py_fresh_worker_faults", "page_fault_us",
                     "eager_slowdown_after_import", "eager_matmul_slowdown_after_import")
        if wanted(*processes):
            subprocess.run(worker, env=worker_env, capture_output=True, check=True)
        for _ in range(args.repetitions if wanted(*processes) else 0):
            out = subprocess.run(worker, env=worker_env, capture_output=True, text=True, check=True)
            samples["py_fresh_worker_ms"].append(float(out.stdout.split()[0]))
            samples["py_fresh_worker_faults"].append(int(out.stdout.split()[1]))
            out = subprocess.run([sys.executable, "-c", PAGE_FAULT], capture_output=True,
                                 text=True, check=True)
            samples["page_fault_us"].append(float(out.stdout))
            eager = {}
            for with_kiln in (False, True):
                out = subprocess.run([sys.executable, "-c",
                                      EAGER.format(package=PACKAGE, with_kiln=with_kiln)],
                                     capture_output=True, text=True, check=True)
                eager[with_kiln] = [float(value) for value in out.stdout.split()]
            samples["eager_slowdown_after_import"].append(eager[True][0] / eager[False][0])
            samples["eager_matmul_slowdown_after_import"].append(eager[True][1] / eager[False][1])

    core = bench_kilnd.blas_core()
    print(f"\nKiln from Python: torch {torch.__version__}, {torch.get_num_threads()} torch "
          f"threads, {openblas.openblas_get_num_threads()} OpenBLAS threads ({core} kernels), "
          f"{os.cpu_count()} CPUs\n")
    print(f"{'figure':32} {'min':>10} {'median':>10} {'max':>10}")
    summary = {}
    for key, values in samples.items():
        if not wanted(key) or not values:
            continue
        summary[key] = statistics.median(values)
        summary[key + "_min"] = min(values)
        summary[key + "_max"] = max(values)
        print(f"{key:32} {min(values):10.4g} {statistics.median(values):10.4g} "
              f"{max(values):10.4g}")
    summary["torch_threads"] = torch.get_num_threads()
    summary["openblas_threads"] = openblas.openblas_get_num_threads()
    summary["openblas_core"] = core
    summary["cpus"] = os.cpu_count()
    if args.json:
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
