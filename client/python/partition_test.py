"""Partitioned graphs (kiln/_partition.py): ops Kiln does not compile run
through torch, and Kiln compiles the regions between them (conftest.py
starts the kilnd)."""
import os
import re
import sys
import warnings

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402
from conftest import assert_matches, compiles, fresh_process_result  # noqa: E402


# A library's own ops (torch.library), which Kiln has no lowering for and
# runs through torch: FNet's FFT token mixer and a linear solve.
@torch.library.custom_op("kiln_test::spectral_mix", mutates_args=())
def spectral_mix(x: torch.Tensor) -> torch.Tensor:
    return torch.fft.fft2(x).real


@spectral_mix.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("kiln_test::solve", mutates_args=())
def solve(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.linalg.solve(a, b)


@solve.register_fake
def _(a, b):
    return torch.empty_like(b)


class FourierLayer(torch.nn.Module):
    """A transformer-ish layer whose token mixer is an FFT (FNet), a custom
    op between a norm and an MLP."""

    def __init__(self, width=32, hidden=64):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(width)
        self.norm2 = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, hidden)
        self.down = torch.nn.Linear(hidden, width)

    def forward(self, x):
        x = x + spectral_mix(self.norm1(x))
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))


class DetectionHead(torch.nn.Module):
    """Scores and boxes for each anchor, then the boxes whose score passes a
    threshold (nonzero: a count that depends on the data), decoded."""

    def __init__(self, width=16):
        super().__init__()
        self.score = torch.nn.Linear(width, 1)
        self.box = torch.nn.Linear(width, 4)

    def forward(self, features):
        scores = self.score(features).squeeze(-1).sigmoid()
        keep = torch.nonzero(scores > 0.5).squeeze(1)
        boxes = self.box(features)[keep]
        centers, sizes = boxes[:, :2], boxes[:, 2:].exp()
        return torch.cat([centers - sizes / 2, centers + sizes / 2], 1) * 8.0, scores[keep]


def solved(a, b, w):
    """A linear solve, a custom op, between two regions Kiln compiles."""
    system = a @ a.transpose(-1, -2) + 4.0 * torch.eye(a.shape[-1])
    x = solve(system, torch.tanh(b @ w))
    return torch.relu(x @ w.T) + 1.0


def compiled_quietly(fn, inputs=None, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return kiln.compile(fn, inputs, **options)


def test_a_layer_with_an_fft_mixer_matches_eager():
    torch.manual_seed(0)
    layer = FourierLayer().eval()
    x = torch.randn(2, 8, 32)
    with torch.no_grad():
        compiled = compiled_quietly(layer, [x])
        for _ in range(2):
            assert_matches(compiled(x), layer(x))
        y = torch.randn(2, 8, 32)
        assert_matches(compiled(y), layer(y))
    assert len(compiled.segments) == 2


def test_a_detection_head_with_nonzero_compiles_once_for_every_count():
    torch.manual_seed(0)
    head = DetectionHead().eval()
    with torch.no_grad():
        compiled = compiled_quietly(head, [torch.randn(64, 16)])
        before = compiles()
        counts = set()
        for seed in range(4):
            features = torch.randn(64, 16, generator=torch.Generator().manual_seed(seed))
            got, want = compiled(features), head(features)
            counts.add(want[0].shape[0])
            assert_matches(got, want)
    assert len(counts) > 1, counts
    assert compiles() == before, "one artifact per segment serves every count"


def test_a_linear_solve_in_the_middle_matches_eager():
    torch.manual_seed(0)
    a, b, w = torch.randn(8, 8), torch.randn(8, 6), torch.randn(6, 6)
    compiled = compiled_quietly(solved, [a, b, w])
    assert_matches(compiled(a, b, w), solved(a, b, w))
    a2 = torch.randn(8, 8)
    assert_matches(compiled(a2, b, w), solved(a2, b, w))


@pytest.mark.parametrize("fn, inputs, refused, op", [
    (FourierLayer().eval(), [torch.randn(2, 8, 32)],
     "kiln_test.spectral_mix.default", "kiln_test.spectral_mix.default"),
    (solved, [torch.randn(8, 8), torch.randn(8, 6), torch.randn(6, 6)],
     "kiln_test.solve.default", "kiln_test.solve.default"),
], ids=["fft", "solve"])
def test_strict_refuses_naming_the_op_and_explain_names_why_it_ran_through_torch(fn, inputs,
                                                                                 refused, op):
    with torch.no_grad():
        with pytest.raises(kiln.UnsupportedOpError) as error:
            kiln.compile(fn, inputs, strict=True)
        assert refused in str(error.value)
        compiled = compiled_quietly(fn, inputs)
    explained = kiln.explain(compiled)
    assert f"({op}): " in explained, explained
    assert "through torch" in explained


def test_the_warning_names_the_ops_and_strict_and_is_raised_once():
    torch.manual_seed(0)
    a, b, w = torch.randn(8, 8), torch.randn(8, 6), torch.randn(6, 6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = kiln.compile(solved, [a, b, w])
        for _ in range(3):
            compiled(a, b, w)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    assert "kiln_test.solve.default" in messages[0]
    assert "strict=True" in messages[0]


def test_torch_compile_partitions_a_graph_and_strict_refuses_it():
    torch._dynamo.reset()
    a, b, w = torch.randn(8, 8), torch.randn(8, 6), torch.randn(6, 6)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_matches(torch.compile(solved, backend=kiln.backend)(a, b, w), solved(a, b, w))
        torch._dynamo.reset()
        strict = torch.compile(solved, backend=kiln.backend, options={"strict": True})
        with pytest.raises(kiln.UnsupportedOpError, match=r"kiln_test\.solve\.default"):
            strict(a, b, w)
    torch._dynamo.reset()


THREADS = """
import json, os, sys, time
import torch
sys.path.insert(0, sys.argv[1])
import kiln
torch.set_num_threads(2)
def threads():
    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            names.append(open(f"/proc/self/task/{task}/comm").read().strip())
        except OSError:  # a thread that ended meanwhile
            pass
    return sorted(names)
def cpu_ns():
    spent = {}
    for task in os.listdir("/proc/self/task"):
        try:
            spent[task] = int(open(f"/proc/self/task/{task}/schedstat").read().split()[0])
        except OSError:
            pass
    return spent
def other_threads_share(call):
    # The CPU time other threads spend while this one calls `call` for
    # 0.3 s, over this thread's: ~1 when a loop splits across two threads.
    call()
    time.sleep(0.05)  # torch's idle threads stop spinning and sleep
    before, end = cpu_ns(), time.monotonic() + 0.3
    while time.monotonic() < end:
        call()
    after = cpu_ns()
    spent = {task: ns - before.get(task, 0) for task, ns in after.items()}
    me = spent.pop(str(os.getpid()))
    return max(spent.values(), default=0) / me
def f(x, w):
    return torch.relu(x @ w + 1.0).sum(1)
def g(x):
    return (x * 1.5 + 1.0).tanh() * x
x, w = torch.randn(512, 512), torch.randn(512, 512)
large, small = torch.randn(1024, 1024), torch.randn(4, 64)
with torch.no_grad():
    compiled = kiln.compile(f, [x, w])
    for _ in range(3):
        f(x, w)
    eager = threads()
    for _ in range(3):
        compiled(x, w)
    torch.testing.assert_close(compiled(x, w), f(x, w), rtol=1e-4, atol=1e-3)
    # Rows of symbolic count: the kernel always calls the runtime's
    # parallel_for, which splits it only when it is worth it.
    compiled_g = kiln.compile(g, [large], dynamic={0: [0]})
    torch.testing.assert_close(compiled_g(small), g(small), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(compiled_g(large), g(large), rtol=1e-5, atol=1e-5)
    shares = {"large": other_threads_share(lambda: compiled_g(large)),
              "small": other_threads_share(lambda: compiled_g(small))}
print(json.dumps({"after_eager": eager, "after_kiln": threads(), "shares": shares}))
"""


def test_kilns_kernels_split_across_torchs_threads_when_large_and_start_none_of_their_own():
    # One set of threads for eager ops and Kiln's kernels: at each seam of a
    # partitioned graph, neither side's idle threads spin on the cores the
    # other needs, and torch.set_num_threads governs both. A large kernel
    # splits across torch's two threads; a small one runs on the calling
    # thread and wakes no other.
    result = fresh_process_result(THREADS, HERE)
    assert "kiln-pool" not in result["after_kiln"], result
    # gRPC's own threads (its channel to kilnd) come and go on their own.
    grpc = ("grpc", "event_engine", "default-executo", "timer_manager", "nexting_thread")
    assert [name for name in result["after_kiln"] if not name.startswith(grpc)] == \
        [name for name in result["after_eager"] if not name.startswith(grpc)], result
    assert result["shares"]["large"] > 0.3, result
    assert result["shares"]["small"] < 0.05, result


FORKED = """
import json, os, sys, time
import torch
sys.path.insert(0, sys.argv[1])
import kiln
torch.set_num_threads(2)
def g(x):
    return (x * 1.5 + 1.0).tanh() * x
large = torch.randn(2048, 1024)
with torch.no_grad():
    compiled = kiln.compile(g, [large])
    for _ in range(3):
        compiled(large)  # splits: the parent's OpenMP pool is up
    want = g(large)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        got = compiled(large)
        torch.set_num_threads(1)  # eager's own ops in a child (docs/PYTHON.md)
        os.write(write, b"1" if torch.allclose(got, want, rtol=1e-5, atol=1e-5) else b"0")
        os._exit(0)
    done, deadline = False, time.time() + 60
    while not done and time.time() < deadline:
        done = os.waitpid(pid, os.WNOHANG)[0] == pid
        time.sleep(0.05)
    if not done:  # waiting on the parent's OpenMP pool
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    answer = os.read(read, 1) if done else b""
print(json.dumps({"child_answered": answer.decode()}))
"""


def test_a_child_forked_after_kernels_split_runs_them_on_its_own_thread():
    # libgomp's pool stays behind in the parent: a parallel region in the
    # child would wait forever for it, so the child's loops run inline.
    assert fresh_process_result(FORKED, HERE) == {"child_answered": "1"}


FRESH = """
import json, sys, warnings
import torch
sys.path.insert(0, sys.argv[1])
import kiln
from partition_test import DetectionHead, FourierLayer, solved
torch.manual_seed(0)
warnings.simplefilter("ignore", RuntimeWarning)
keys = []
with torch.no_grad():
    for fn, inputs in [(FourierLayer().eval(), [torch.randn(2, 8, 32)]),
                       (DetectionHead().eval(), [torch.randn(64, 16)]),
                       (solved, [torch.randn(8, 8), torch.randn(8, 6), torch.randn(6, 6)])]:
        compiled = kiln.compile(fn, inputs)
        keys += [segment.compiled.artifact()["key"] for segment in compiled.segments]
print(json.dumps(keys))
"""


class NoisyBlock(torch.nn.Module):
    """A linear layer, rrelu in training (whose draws depend on its input, so
    Kiln leaves them to torch), and noise added: ops that draw random
    numbers between regions Kiln compiles."""

    def __init__(self, width=16):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)

    def forward(self, x):
        hidden = torch.nn.functional.rrelu(self.linear(x), training=True)
        return (hidden + 0.1 * torch.randn_like(hidden)).tanh() * torch.rand(())


def test_random_ops_run_through_torch_drawing_as_eager_and_strict_refuses_them():
    torch.manual_seed(0)
    block, x = NoisyBlock(), torch.randn(4, 16)
    with torch.no_grad():
        with pytest.raises(kiln.UnsupportedOpError, match=r"draws random numbers, and a Kiln "
                           r"artifact is a pure function of its inputs"):
            kiln.compile(block, [x], strict=True)
        compiled = compiled_quietly(block, [x])
        for seed in (1, 2):
            # The same generator state before each: the same draws, in order.
            torch.manual_seed(seed)
            got = compiled(x)
            torch.manual_seed(seed)
            assert_matches(got, block(x))
        assert not torch.equal(got, compiled(x)), "each call draws again"
    assert len(compiled.segments) >= 2
    explained = kiln.explain(compiled)
    assert "(aten.randn_like.default): it draws random numbers" in explained, explained


def reads_values(x, y):
    """Reads tensors' values while tracing: an if on a tensor, .item(), and
    torch.equal."""
    scale = x.abs().max().item() + 1.0
    if (x.sum() > 0).item():
        out = (x * y).sin() / scale
    else:
        out = (x - y).cos() * scale
    return out + 1.0 if torch.equal(x, y) else out - 1.0


def test_a_function_that_reads_values_runs_split_by_dynamo_and_strict_refuses_it():
    torch._dynamo.reset()
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    with pytest.raises(kiln.UnsupportedOpError, match=r"reads a tensor's value while tracing"):
        kiln.compile(reads_values, [x, y], strict=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = kiln.compile(reads_values, [x, y])
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "torch.compile(backend='kiln')" in messages[0], messages
    for a, b in [(x, y), (-x.abs(), y), (x, x.clone())]:
        assert_matches(compiled(a, b), reads_values(a, b))
    explained = kiln.explain(compiled)
    assert explained.startswith("split by torch.compile: "), explained
    assert "compiled by Kiln: artifact " in explained, explained


def sizes_only(x, y):
    return torch.broadcast_shapes(x.shape, y.shape), x.shape[0] * 2


def test_a_function_returning_only_sizes_returns_them():
    torch._dynamo.reset()
    x, y = torch.randn(3, 1), torch.randn(1, 5)
    compiled = compiled_quietly(sizes_only, [x, y])
    assert compiled(x, y) == (torch.Size([3, 5]), 6)
    assert compiled(torch.randn(2, 1), y) == (torch.Size([2, 5]), 4)


def seeded_noise(x):
    """Seeds torch's generator inside the function, as OpInfo's random
    entries do (wrapper_set_seed), then draws what Kiln does not draw itself."""
    torch.manual_seed(42)
    return x.sin() + torch.poisson(x.exp())


def test_a_function_that_seeds_the_generator_runs_split_by_dynamo_drawing_as_eager():
    torch._dynamo.reset()
    x = torch.randn(4, 8)
    with pytest.raises(kiln.UnsupportedOpError, match=r"calls torch.manual_seed while tracing and draws"):
        kiln.compile(seeded_noise, [x], strict=True)
    compiled = compiled_quietly(seeded_noise, [x])
    torch.manual_seed(0)
    got, after = compiled(x), torch.rand(3)
    torch.manual_seed(0)
    assert_matches(got, seeded_noise(x))
    assert_matches(after, torch.rand(3))


def ctc_loss_then_scale(x, w):
    """F.ctc_loss, which fake tensors cannot size, between regions."""
    targets, lengths = torch.tensor([[1, 2], [3, 3]]), torch.tensor([6, 5])
    losses = torch.nn.functional.ctc_loss(x.log_softmax(2), targets, lengths,
                                          torch.tensor([2, 2]), reduction="none")
    return (losses.unsqueeze(1) * w).relu().sum(0)


def test_an_op_fake_tensors_cannot_run_runs_through_torch():
    x, w = torch.randn(6, 2, 4), torch.randn(2, 3)
    compiled = compiled_quietly(ctc_loss_then_scale, [x, w])
    assert_matches(compiled(x, w), ctc_loss_then_scale(x, w))
    assert len(compiled.segments) == 2
    assert "(aten._ctc_loss.Tensor)" in kiln.explain(compiled)


def masked_rows_written(x, mask, v):
    y = x.exp()
    y[mask] = v
    return y * 2.0


def integer_division(a, b):
    return (a * 3) // b + 1


@pytest.mark.parametrize("fn, inputs, why", [
    (masked_rows_written,
     [torch.randn(5, 6), torch.tensor([True, False, False, True, False]), torch.randn(2, 6)],
     "x[mask] = v with a v that does not broadcast to every count of elements the mask "
     "selects"),
    (integer_division, [torch.arange(1, 9), torch.tensor([1, 2, -3, 4, 5, 6, 7, 8])],
     "an integer division by a tensor or a size"),
], ids=["index_put", "floor_divide"])
def test_a_call_kiln_takes_only_some_forms_of_runs_through_torch(fn, inputs, why):
    with pytest.raises(kiln.UnsupportedOpError, match=re.escape(why)):
        kiln.compile(fn, inputs, strict=True)
    compiled = compiled_quietly(fn, inputs)
    torch.testing.assert_close(compiled(*inputs), fn(*inputs), rtol=1e-5, atol=1e-5)
    assert why in kiln.explain(compiled)


def doubled_to_sparse(x):
    return (x * 2.0).to_sparse()


def test_sparse_results_and_inputs_run_through_torch():
    torch._dynamo.reset()
    x = torch.randn(3, 4).relu()
    compiled = compiled_quietly(doubled_to_sparse, [x])
    got = compiled(x)
    assert got.layout == torch.sparse_coo
    torch.testing.assert_close(got, doubled_to_sparse(x), rtol=0, atol=0)
    sparse, dense = x.to_sparse_csr(), torch.randn(4, 5)
    with pytest.raises(kiln.UnsupportedOpError, match=r"input 0 is a torch.sparse_csr tensor: "
                       r"Kiln compiles dense \(strided\) tensors"):
        kiln.compile(torch.mm, [sparse, dense], strict=True)
    compiled = compiled_quietly(torch.mm, [sparse, dense])
    assert_matches(compiled(sparse, dense), torch.mm(sparse, dense))


def test_an_exported_program_is_partitioned_its_dims_symbolic():
    torch.manual_seed(0)
    layer = FourierLayer().eval()
    batch = torch.export.Dim("batch", min=1, max=16)
    program = torch.export.export(layer, (torch.randn(4, 8, 32),),
                                  dynamic_shapes=({0: batch},))
    with pytest.raises(kiln.UnsupportedOpError, match=r"kiln_test\.spectral_mix\.default"):
        kiln.compile(program, strict=True)
    with torch.no_grad():
        compiled = compiled_quietly(program)
        before = compiles()
        for size in (4, 3, 9):
            x = torch.randn(size, 8, 32)
            assert_matches(compiled(x), layer(x))
    assert compiles() == before, "one artifact per segment serves every batch"
    assert len(compiled.segments) == 2
    assert "(kiln_test.spectral_mix.default): " in kiln.explain(compiled)


def test_a_fresh_process_hits_every_segment():
    keys = fresh_process_result(FRESH, HERE)
    assert len(keys) >= 6 and len(set(keys)) == len(keys), keys
    before = compiles()
    assert fresh_process_result(FRESH, HERE) == keys
    assert compiles() == before, "the fresh process hit every segment"



# The seam's per-call work (kiln/_partition.py Partitioned.__call__).
def test_a_seam_runs_no_argument_flattening_nor_autograd_and_another_layout_raises():
    torch.manual_seed(0)
    a, b, w = torch.randn(8, 8), torch.randn(8, 6), torch.randn(6, 6)
    compiled = compiled_quietly(solved, [a, b, w])
    compiled(a, b, w)
    called = set()

    def record(frame, event, _):
        if event == "call":
            called.add((os.path.basename(frame.f_code.co_filename), frame.f_code.co_name))
    sys.setprofile(record)
    try:
        got = compiled(a, b, w)
    finally:
        sys.setprofile(None)
    assert_matches(got, solved(a, b, w))
    # No layout of the arguments (kiln/_arguments.py, its JSON key), and the
    # custom op below autograd, as make_fx traced it (torch/_library/autograd.py).
    assert not {file for file, _ in called} & {"_arguments.py", "encoder.py"}, sorted(called)
    assert ("autograd.py", "autograd_impl") not in called, sorted(called)
    assert_matches(compiled(a, b=b, w=w), solved(a, b, w))  # the same layout, by keyword
    with pytest.raises(kiln.GuardError, match=re.escape(
            "argument 'w' is 3; it was traced as a tensor: a partitioned graph runs the "
            "arguments it was compiled with; compile one for each")):
        compiled(a, b, 3)


def bumped_and_mixed(x, w):
    """Writes its argument in place around an op through torch."""
    x.mul_(2.0)
    return spectral_mix(x @ w).relu() + x


def test_an_argument_written_in_place_around_a_torch_op_is_written_as_in_eager():
    torch.manual_seed(0)
    x, w = torch.randn(8, 16), torch.randn(16, 16)
    compiled = compiled_quietly(bumped_and_mixed, [x.clone(), w])
    assert compiled.torch_ops, "spectral_mix runs through torch"
    mine, theirs = x.clone(), x.clone()
    assert_matches(compiled(mine, w), bumped_and_mixed(theirs, w))
    torch.testing.assert_close(mine, theirs, rtol=0, atol=0)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
