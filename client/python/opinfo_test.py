"""PyTorch's OpInfo suite through kiln.compile.

Every entry of op_db that runs on the CPU in float32, float64, int64 or bool
(the first of these it supports) is run with up to SAMPLES of its samples,
chosen by a fixed seed, through kiln.compile(strict=True) and compared with
eager. Each sample passes, or is refused (Kiln's error, normalized) and then
runs partitioned, the ops Kiln refuses through torch, or is wrong; a wrong
result, a crash, a refusal not in opinfo_refusals.txt and a line of that file
that the run does not produce all fail the test, as does a docs/OPS.md whose
coverage section differs from the run.

    opinfo_test.py                    the test (what Bazel runs)
    opinfo_test.py --write-docs       the test, then docs/OPS.md's coverage section rewritten
    opinfo_test.py --write-refusals   the test, then opinfo_refusals.txt rewritten from the run
    opinfo_test.py --only NAME        the entries named so (no file checks): for debugging

Samples run in worker processes (one kilnd for the run, a fresh cache), so a
worker that crashes is named with its sample and the run goes on in a new one.
A worker compiles an entry's samples as one graph, and each alone when that
is refused or wrong. Under Bazel's sharding each shard runs every n-th entry;
the first also checks docs/OPS.md, from eager's samples and the refusals list.
"""
import argparse
import collections
import json
import os
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REFUSALS = os.path.join(HERE, "opinfo_refusals.txt")
SAMPLES = 3
WORKERS = 2  # unsharded; a shard runs one (Bazel runs shards side by side)
DTYPES = ("float32", "float64", "int64", "bool")
COVERAGE_END = "<!-- end of the OpInfo coverage (client/python/opinfo_test.py) -->\n"

# Entries whose values are uninitialized: their shape and dtype are
# compared, not their values. (Random ones are compared: eager and Kiln's
# call start from the same generator state, see _eager and _run.)
UNCHECKED_VALUES = {
    "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided",
}



def _signs(got, want):
    """The sign of each column of `got` (vectors along dim -2) that makes it
    agree with `want`'s."""
    import torch
    return torch.where((got * want).sum(-2, keepdim=True) < 0, -1, 1).to(got.dtype)


def _svd_form(vectors_as_rows):
    """(U, S, V or Vh) as what is unique: S; the first k = len(S) columns of
    U and of V, each pair's sign aligned to eager's U (flipping U's column
    and V's flips neither U diag(S) V^T nor the match); and the projector
    onto the rest of each (full_matrices' complement, any basis of it)."""
    def form(got, want):
        u, s, v = got
        want_u = want[0]
        if vectors_as_rows:
            v = v.mT
        k = s.shape[-1]
        signs = _signs(u[..., :k], want_u[..., :k])
        return (s, u[..., :k] * signs, v[..., :k] * signs, u[..., k:] @ u[..., k:].mT,
                v[..., k:] @ v[..., k:].mT)
    return form


def _eigh_form(got, want):
    """(eigenvalues, eigenvectors) with each vector's sign aligned to eager's."""
    values, vectors = got
    return values, vectors * _signs(vectors, want[1])


def _eig_form(got, want):
    """(eigenvalues, eigenvectors) with each vector times the unit complex
    factor that aligns it to eager's (geev's are unique up to one)."""
    values, vectors = got
    inner = (want[1].conj() * vectors).sum(-2, keepdim=True)
    return values, vectors * (inner.conj() / inner.abs())


def _low_rank_form(got, want):
    """(S, U diag(S) V^T) of a low-rank SVD (svd_lowrank, pca_lowrank): its
    vectors of equal or zero singular values are any basis of their space,
    which draws a few units in the last place apart choose differently."""
    u, s, v = got
    return s, (u * s.unsqueeze(-2)) @ v.mT


# Results unique only up to the sign of each singular or eigen vector:
# eager's LAPACK (MKL in the pip wheels) and Kiln's (OpenBLAS) choose
# differently, so these compare as torch's own test_linalg does, in the form
# the entry's function gives (got and eager's want -> what is unique), both
# sides alike.
UP_TO_SIGN = {
    "linalg.svd": _svd_form(vectors_as_rows=True),
    "svd": _svd_form(vectors_as_rows=False),
    "linalg.eigh": _eigh_form,
    "linalg.eig": _eig_form,
    "svd_lowrank": _low_rank_form,
    "pca_lowrank": _low_rank_form,
}


def _normwise(got, want):
    """Each matrix over the largest magnitude in eager's (at least 1), so
    that OpInfo's tolerance allows every element a few float32 roundings of
    the largest: reordering eager's own sums moves a matrix function's
    cancelling elements that far."""
    if want.numel() == 0:
        return got
    return got / want.abs().amax((-2, -1), keepdim=True).clamp_min(1)


# Matrix functions whose float32 results eager itself gives only to a few
# roundings of the matrix's largest element; compared in that form.
NORMWISE = {"matrix_exp": _normwise}

# Families for docs/OPS.md: the first pattern an entry's name matches.
FAMILIES = [
    ("linear algebra", r"^(linalg\.|cholesky|geqrf|inverse|logdet|lu|matrix_exp|ormqr|pinverse"
                       r"|qr|svd|triangular_solve|det|slogdet|symeig|eig|lstsq|addr?$|"
                       r"addbmm|addmm|addmv|baddbmm|bmm|mm|mv|matmul|dot|vdot|inner|outer|"
                       r"ger|tensordot|einsum|chain_matmul|kron|cross|trace|tril|triu)"),
    ("fft", r"^fft\."),
    ("special functions", r"^(special\.|erf|erfc|erfinv|lgamma|digamma|polygamma|mvlgamma|"
                          r"i0|igamma|igammac|sinc|xlogy|logit|nextafter|frexp|ldexp)"),
    ("convolution and pooling", r"^nn\.functional\.(conv|.*pool|unfold|fold|pixel_|"
                                r"interpolate|upsample|grid_sample|affine_grid|pad)"),
    ("losses", r"^nn\.functional\..*(loss|entropy|nll|kl_div)"),
    ("normalization", r"^(nn\.functional\..*norm|native_.*norm|renorm|norm|_batch_norm)"),
    ("neural network", r"^(nn\.functional\.|_softmax|softmax|log_softmax|_log_softmax|"
                       r"sigmoid|logsigmoid)"),
    ("index and scatter", r"(index|scatter|gather|take|put|masked|select|nonzero|where|"
                          r"diagonal|diag|narrow|slice|embedding|searchsorted|bucketize)"),
    ("sorting and selection", r"^(sort|argsort|msort|topk|kthvalue|median|nanmedian|mode|"
                              r"quantile|nanquantile|unique|histc|histogram|bincount|"
                              r"cummax|cummin)"),
    ("reductions", r"^(sum|prod|mean|nansum|nanmean|amax|amin|max|min|argmax|argmin|std|var|"
                   r"all|any|count_nonzero|logsumexp|aminmax|cumsum|cumprod|"
                   r"cumulative_trapezoid|trapz|trapezoid|logcumsumexp|dist|var_mean|"
                   r"std_mean|_segment_reduce|masked\.)"),
    ("complex", r"(complex|polar|angle|real|imag|conj|view_as_real)"),
    ("creation and views", r"^(new_|.*_like$|empty|zeros|ones|full|arange|linspace|logspace|"
                           r"eye|randn?|view|reshape|flatten|unflatten|squeeze|unsqueeze|"
                           r"expand|permute|transpose|t$|T$|H$|mT$|mH$|movedim|moveaxis|"
                           r"swap|cat|concat|stack|hstack|vstack|dstack|column_stack|"
                           r"row_stack|split|chunk|tensor_split|hsplit|vsplit|dsplit|unbind|"
                           r"repeat|tile|roll|rot90|flip|broadcast|atleast|block_diag|"
                           r"meshgrid|cartesian_prod|combinations|clone|contiguous|"
                           r"as_strided|alias|unfold|resize|to$|type_as|"
                           r"byte|char|short|int|long|half|float|double|bool|bfloat16|cdouble|"
                           r"cfloat|chalf|item|fill|zero_)"),
]


def family(name):
    for label, pattern in FAMILIES:
        if re.search(pattern, name):
            return label
    return "elementwise"


def entry_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def normalize(message):
    """A refusal's reason, stable across runs: its first line, with node
    numbers, generated names and sizes made generic."""
    line = str(message).strip().splitlines()[0] if str(message).strip() else "(no message)"
    line = re.sub(r"node \d+ '[^']*'", "node", line)
    line = re.sub(r"0x[0-9a-f]+", "0x", line)
    line = re.sub(r"\b\d+\b", "N", line)
    return line[:200]


# --- the worker: runs one entry's samples, one JSON line per event ---------


def _choose_samples(op, dtype):
    import torch
    torch.manual_seed(0)
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))
    except Exception:  # OpInfo cannot make them: nothing eager runs
        return []
    indices = list(range(len(samples)))
    random.Random(entry_name(op)).shuffle(indices)
    return [(i, samples[i]) for i in sorted(indices[:SAMPLES])]


def _as_call(op, sample):
    """(a function of the sample's tensors that calls the op, those tensors)."""
    import torch
    import torch.utils._pytree as pytree
    leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    places = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]

    def call(*tensors):
        given = list(leaves)
        for place, tensor in zip(places, tensors):
            given[place] = tensor
        first, args, kwargs = pytree.tree_unflatten(given, spec)
        return op.op(first, *args, **kwargs)

    return call, [leaves[p] for p in places]


def _eager(call, inputs):
    """call's result on copies of inputs, or None when eager raises."""
    import torch
    try:
        torch.manual_seed(0)
        return call(*[t.clone() for t in inputs])
    except Exception:
        return None


NO_FALLBACK = "not even through torch: "


def _run(calls, wants, unchecked, strict=True, form=None):
    """'pass', ['torch', reason] (refused natively for reason, then run
    partitioned through torch and matching), ['refused', reason] or ['wrong',
    what differs] for calls (a list of (function, inputs)) compiled as one
    graph, against eager's wants; each compared in `form` (UP_TO_SIGN) if
    given."""
    import torch
    import kiln

    counts = [len(inputs) for _, inputs in calls]

    def together(*tensors):
        results, at = [], 0
        for (call, _), count in zip(calls, counts):
            results.append(call(*tensors[at:at + count]))
            at += count
        return results

    inputs = [t for _, given in calls for t in given]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the partitioned graph's note
            compiled = kiln.compile(together, [t.clone() for t in inputs], name="opinfo",
                                    strict=strict)
            # Seeded as _eager seeds eager's call: random ops (run through
            # torch) draw what eager draws, as Inductor's OpInfo test does
            # with config.fallback_random.
            torch.manual_seed(0)
            got = compiled(*[t.clone() for t in inputs])
    except Exception as error:  # the tracer's and kilnd's refusals, and any other error
        reason = normalize(f"{type(error).__name__}: {error}")
        return ["refused", reason if strict else NO_FALLBACK + reason]
    if form is not None:
        got = [form(g, w) for g, w in zip(got, wants)]
        wants = [form(w, w) for w in wants]
    try:
        _compare(got, wants, unchecked)
    except AssertionError as error:
        where = "" if strict else "through torch: "
        return ["wrong", where + str(error).strip().splitlines()[0][:300]]
    return "pass"


def _run_sample(calls, wants, unchecked, form):
    """_run natively, and when that is refused, partitioned."""
    result = _run(calls, wants, unchecked, form=form)
    if result == "pass" or result[0] != "refused":
        return result
    fallback = _run(calls, wants, unchecked, strict=False, form=form)
    return ["torch", result[1]] if fallback == "pass" else fallback


def _compare(got, want, unchecked):
    """Eager's result within what any summation order allows: OpInfo's
    samples reduce at most a few thousand terms, whose reordering moves a
    float32 result by at most n * 2^-24 * sum|x| (under 1e-4 relative for
    n < 1700) and a float64 one by far less; integers and bools match
    exactly. Uninitialized results: shape and dtype only."""
    import torch
    import torch.utils._pytree as pytree
    tolerances = {torch.float32: 1e-4, torch.float64: 1e-10,
                  torch.complex64: 1e-4, torch.complex128: 1e-10}
    got_leaves, want_leaves = pytree.tree_leaves(got), pytree.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves), (
        f"{len(got_leaves)} outputs where eager returns {len(want_leaves)}")
    for g, w in zip(got_leaves, want_leaves):
        if not isinstance(w, torch.Tensor):
            w = torch.tensor(w)
            g = torch.tensor(g) if not isinstance(g, torch.Tensor) else g
        if unchecked:
            assert g.shape == w.shape and g.dtype == w.dtype, (
                f"{g.dtype}{list(g.shape)} where eager returns {w.dtype}{list(w.shape)}")
            continue
        tolerance = tolerances.get(w.dtype, 0)
        torch.testing.assert_close(g, w, rtol=tolerance, atol=tolerance, equal_nan=True)


def worker():
    # The protocol has stdout's descriptor to itself: what the ops under test
    # print (Python or C++) goes to stderr.
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def say(event):
        protocol.write(json.dumps(event) + "\n")
        protocol.flush()

    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    sys.path.insert(0, HERE)
    by_name = {(entry_name(op)): op for op in op_db}
    for line in sys.stdin:
        task = json.loads(line)
        op = by_name[task["entry"]]
        dtype = getattr(torch, task["dtype"])
        unchecked = op.name in UNCHECKED_VALUES
        form = UP_TO_SIGN.get(op.name, NORMWISE.get(op.name))
        samples = [(index, *_as_call(op, sample)) for index, sample in _choose_samples(op, dtype)
                   if index not in task["skip"]]
        wants = [_eager(call, inputs) for _, call, inputs in samples]
        samples = [(s, want) for s, want in zip(samples, wants) if want is not None]
        # All samples in one graph first (one compile), each alone when that fails.
        if task["together"] and len(samples) > 1:
            say({"start": "together"})
            result = _run([(call, inputs) for (_, call, inputs), _ in samples],
                          [want for _, want in samples], unchecked, form=form)
            if result == "pass":
                for (index, _, _), _ in samples:
                    say({"index": index, "result": "pass"})
                samples = []
        for (index, call, inputs), want in samples:
            say({"start": index})
            result = _run_sample([(call, inputs)], [want], unchecked, form)
            say({"index": index, "result": result})
        say({"done": task["entry"]})


# --- the parent: hands out entries, restarts crashed workers --------------


def entries(only=None):
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    chosen = []
    for op in op_db:
        supported = op.supported_dtypes("cpu")
        dtype = next((d for d in DTYPES if getattr(torch, d) in supported), None)
        if dtype and (only is None or entry_name(op) in only):
            chosen.append((entry_name(op), dtype))
    return chosen


def _worker_process():
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.DEVNULL, env=os.environ)


def run(chosen, workers):
    """{(entry, dtype): {sample index: result}} for every chosen entry, run
    by `workers` worker processes."""
    tasks = queue.Queue()
    for item in chosen:
        tasks.put(item)
    results, lock, began = {}, threading.Lock(), time.monotonic()

    def serve():
        process = _worker_process()
        while True:
            try:
                name, dtype = tasks.get_nowait()
            except queue.Empty:
                break
            outcome, skip, together = {}, [], True
            while True:
                task = {"entry": name, "dtype": dtype, "skip": skip, "together": together}
                process.stdin.write(json.dumps(task) + "\n")
                process.stdin.flush()
                started = None
                for line in process.stdout:
                    event = json.loads(line)
                    if "start" in event:
                        started = event["start"]
                    elif "index" in event:
                        if event["result"] is not None:
                            outcome[event["index"]] = event["result"]
                        started = None
                    else:
                        break
                else:  # the worker died: name the sample it was running
                    code = process.wait()
                    process = _worker_process()
                    if started == "together":  # again, each sample alone
                        together = False
                        continue
                    crash = ("crash", f"the worker died (exit {code})")
                    if started is None:  # making or running the samples in eager
                        outcome[-1] = crash
                        break
                    outcome[started] = crash
                    skip = sorted(set(skip) | set(outcome))
                    continue
                break
            with lock:
                results[(name, dtype)] = outcome
                if len(results) % 50 == 0:
                    print(f"opinfo: {len(results)} of {len(chosen)} entries, "
                          f"{time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
        process.stdin.close()
        process.wait()

    threads = [threading.Thread(target=serve) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lost = [f"{name} {dtype}" for name, dtype in chosen if (name, dtype) not in results]
    if lost:  # a serving thread died: its entries have no results
        raise RuntimeError(f"no results for {len(lost)} entries: {', '.join(lost)}")
    return results


def refusal_lines(results):
    """The expected-refusals lines a run makes: `entry dtype samples: reason`,
    samples `*` when the reason holds for every sample eager runs."""
    lines = []
    for (name, dtype), outcome in sorted(results.items()):
        reasons = collections.defaultdict(list)
        for index, result in sorted(outcome.items()):
            if isinstance(result, list) and result[0] in ("torch", "refused"):
                reasons[result[1]].append(index)
        for reason, indices in sorted(reasons.items()):
            which = "*" if len(indices) == len(outcome) else ",".join(map(str, indices))
            lines.append(f"{name} {dtype} {which}: {reason}")
    return lines


def write_refusals(lines):
    """opinfo_refusals.txt with its header kept and lines as its list."""
    with open(REFUSALS) as file:
        header = [line for line in file if line.startswith("#")]
    path = REFUSALS
    workspace = os.environ.get("BUILD_WORKSPACE_DIRECTORY")
    if workspace:
        path = os.path.join(workspace, "client", "python", os.path.basename(REFUSALS))
    with open(path, "w") as file:
        file.writelines(header + [line + "\n" for line in lines])


def read_refusals():
    """{(entry, dtype): [line]} of opinfo_refusals.txt."""
    listed = collections.defaultdict(list)
    with open(REFUSALS) as file:
        for line in file:
            if line.strip() and not line.startswith("#"):
                name, dtype, _ = line.split(" ", 2)
                listed[(name, dtype)].append(line.rstrip("\n"))
    return listed


def eager_samples(chosen):
    """{(entry, dtype): [the indices of the chosen samples that eager runs]}."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    by_name = {entry_name(op): op for op in op_db}
    runs = {}
    warnings.simplefilter("ignore")  # eager's deprecation notes, once per op
    for name, dtype in chosen:
        op = by_name[name]
        runs[(name, dtype)] = [index for index, sample in _choose_samples(op, getattr(torch, dtype))
                               if _eager(*_as_call(op, sample)) is not None]
    return runs


def listed_results(runs, listed):
    """What the run of every entry gives when opinfo_refusals.txt is right:
    {(entry, dtype): {index: result}}, the listed samples refused, the rest passing."""
    results = {}
    for key, indices in runs.items():
        outcome = {index: "pass" for index in indices}
        for line in listed.get(key, []):
            which, reason = line.split(" ", 2)[2].split(": ", 1)
            kind = "refused" if reason.startswith(NO_FALLBACK) else "torch"
            for index in indices if which == "*" else map(int, which.split(",")):
                outcome[index] = [kind, reason]
        results[key] = outcome
    return results


def coverage(results):
    """docs/OPS.md's coverage section, from a run."""
    by_family = collections.defaultdict(collections.Counter)
    total = collections.Counter()
    reasons = collections.Counter()
    for (name, _), outcome in results.items():
        counts = by_family[family(name)]
        counts["entries"] += 1
        kinds = [r if isinstance(r, str) else r[0] for r in outcome.values()]
        counts["samples"] += len(kinds)
        total["samples"] += len(kinds)
        counts.update(kinds)
        total.update(kinds)
        if kinds and all(kind == "pass" for kind in kinds):
            counts["entries passing"] += 1
        reasons.update(r[1] for r in outcome.values() if not isinstance(r, str))
    ran = total["pass"] + total["torch"]
    rate = 100.0 * total["pass"] / max(total["samples"], 1)
    text = ["# Op coverage: PyTorch's OpInfo suite\n\n",
            f"**{total['pass']} of {total['samples']} samples pass natively ({rate:.1f}%)**; "
            f"with the ops Kiln refuses run through torch (partitioned graphs), {ran} "
            f"({100.0 * ran / max(total['samples'], 1):.1f}%) run and match; "
            f"{total['refused']} run neither way, 0 wrong, 0 crash. "
            f"{len(results)} OpInfo entries (torch's `op_db`) that run on the CPU in float32, "
            "float64, int64 or bool (the first each supports), up to "
            f"{SAMPLES} samples each (those eager runs), through `kiln.compile`, compared with "
            "eager by `//client/python:opinfo_test`; the refusals it expects, with Kiln's "
            "reasons, are `client/python/opinfo_refusals.txt`. Regenerate this section: "
            "`bazel run //client/python:opinfo_test -- --write-docs`.\n\n",
            "| family | entries | entries passing | samples | native | through torch | "
            "refused |\n",
            "| --- | --- | --- | --- | --- | --- | --- |\n"]
    for label in sorted(by_family):
        counts = by_family[label]
        text.append(f"| {label} | {counts['entries']} | {counts['entries passing']} | "
                    f"{counts['samples']} | {counts['pass']} | {counts['torch']} | "
                    f"{counts['refused']} |\n")
    text.append("\nThe most frequent reasons for a native refusal:\n\n| samples | reason |\n"
                "| --- | --- |\n")
    for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0]))[:15]:
        text.append(f"| {count} | `{reason.replace('|', '/')}` |\n")
    text.append("\n" + COVERAGE_END + "\n")
    return "".join(text)


def docs_path():
    workspace = os.environ.get("BUILD_WORKSPACE_DIRECTORY")
    return os.path.join(workspace or os.path.dirname(os.path.dirname(HERE)), "docs", "OPS.md")


def split_docs(text):
    """(coverage section, the rest) of docs/OPS.md."""
    head, marker, rest = text.partition(COVERAGE_END)
    if not marker:
        return "", text
    return head + marker + "\n", rest[1:] if rest.startswith("\n") else rest


def _refusals_of_this_torch(results):
    """The refusal lines of a run that the list leaves out, as they depend on
    the torch build and CPU: where this torch draws bernoulli_(p) through MKL
    (docs/OPS.md "Random numbers"), those draws run through torch."""
    from kiln import _random_draws
    if _random_draws.scalar_bernoulli_drawn_as_default():
        return []
    return [line for line in refusal_lines(results) if _random_draws.MKL_BERNOULLI[:48] in line]


def check_run(results, listed):
    """The problems of a run: wrong results, crashes, and refusals that differ
    from opinfo_refusals.txt's lines for the entries run."""
    problems = []
    for (name, dtype), outcome in sorted(results.items()):
        for index, result in sorted(outcome.items()):
            if not isinstance(result, str) and result[0] in ("wrong", "crash"):
                problems.append(f"{result[0]}: {name} {dtype} sample {index}: {result[1]}")
    made = set(refusal_lines(results)) - set(_refusals_of_this_torch(results))
    expected = {line for key in results for line in listed.get(key, [])}
    for line in sorted(made - expected):
        problems.append(f"refused, not in {os.path.basename(REFUSALS)}: {line}")
    for line in sorted(expected - made):
        problems.append(f"{os.path.basename(REFUSALS)} lists a refusal this run does not make "
                        f"(it passes now, or is refused otherwise): delete the line: {line}")
    return problems


def check_docs(chosen, listed, write):
    """docs/OPS.md's coverage section against what every entry gives when
    opinfo_refusals.txt is right (each shard's run checks that it is)."""
    section = coverage(listed_results(eager_samples(chosen), listed))
    path = docs_path()
    with open(path) as file:
        current, rest = split_docs(file.read())
    if write:
        with open(path, "w") as file:
            file.write(section + rest)
        return []
    if current != section:
        return ["docs/OPS.md's coverage section differs from this run: "
                "bazel run //client/python:opinfo_test -- --write-docs"]
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--write-docs", action="store_true",
                        help="rewrite docs/OPS.md's coverage section from the run")
    parser.add_argument("--write-refusals", action="store_true",
                        help="rewrite opinfo_refusals.txt from the run (every entry)")
    parser.add_argument("--only", nargs="+", help="run only these entries; check no files")
    parser.add_argument("--json", help="write every sample's result to this file")
    flags = parser.parse_args()
    if flags.worker:
        return worker()
    sys.path.insert(0, HERE)
    import kiln
    chosen = entries(flags.only)
    # Bazel's shards: each runs every n-th entry; the first also checks the docs.
    shards = int(os.environ.get("TEST_TOTAL_SHARDS", "1"))
    shard = int(os.environ.get("TEST_SHARD_INDEX", "0"))
    if os.environ.get("TEST_SHARD_STATUS_FILE"):
        open(os.environ["TEST_SHARD_STATUS_FILE"], "w").close()
    root = tempfile.mkdtemp(prefix="kop", dir="/tmp")
    os.environ["KILN_SOCKET"] = os.path.join(root, "s")
    os.environ["KILN_CACHE_DIR"] = os.path.join(root, "cache")
    pid = int(kiln._default_client().daemon()["pid"])
    try:
        results = run(chosen[shard::shards], 1 if shards > 1 else WORKERS)
        daemon = kiln._default_client().daemon()
        compiles = kiln.stats()["daemon"]
    finally:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        shutil.rmtree(root, ignore_errors=True)
    if flags.json:
        with open(flags.json, "w") as file:
            json.dump({f"{n} {d}": o for (n, d), o in sorted(results.items())}, file, indent=1)
    kinds = collections.Counter(r if isinstance(r, str) else r[0]
                                for outcome in results.values() for r in outcome.values())
    print(f"{len(results)} entries, {sum(kinds.values())} samples: " +
          ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items())) +
          f"; kilnd compiled {compiles['compiles']} graphs in "
          f"{compiles['compile_ms_total'] / 1000:.0f} s")
    problems = [] if int(daemon["pid"]) == pid else ["kilnd died during the run"]
    if flags.only:
        print("\n".join(problems + refusal_lines(results)))
        return 0
    if flags.write_refusals:
        write_refusals(refusal_lines(results))
    listed = read_refusals()
    problems += check_run(results, listed)
    if shard == 0:
        problems += check_docs(chosen, listed, flags.write_docs)
    if problems:
        print(f"{len(problems)} problems:\n" + "\n".join(problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
