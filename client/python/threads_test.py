"""Kiln's kernels in a torch process run on torch's intra-op threads
(client/python/module.cc, client/runtime/thread_pool.h): as many threads as
torch.get_num_threads(), the calling thread among them (conftest.py starts
the kilnd)."""
import os
import sys
import threading

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402
from conftest import assert_matches  # noqa: E402


def thread_cpu_ticks():
    """{thread id: user + system CPU time in clock ticks} of this process's
    threads (/proc/self/task/TID/stat, fields 14 and 15)."""
    ticks = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        ticks[int(tid)] = int(fields[11]) + int(fields[12])
    return ticks


def cpu_ticks_while_calling(compiled, x):
    """(the calling thread's, every other thread's) CPU ticks over calls of
    compiled(x) until the calling thread has used 100 ticks (1 s)."""
    caller = threading.get_native_id()
    before = thread_cpu_ticks()
    while True:
        compiled(x)
        now = thread_cpu_ticks()
        if now[caller] - before[caller] >= 100:
            break
    others = sum(ticks - before.get(tid, 0) for tid, ticks in now.items() if tid != caller)
    return now[caller] - before[caller], others


@pytest.fixture
def torch_threads():
    """Sets torch's intra-op thread count for the test; restores it after."""
    saved = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(saved)


@pytest.mark.parametrize("threads", [1, 2])
def test_kernels_run_on_as_many_of_torchs_threads_as_torch_has(torch_threads, threads):
    torch_threads(threads)

    def f(x):
        return torch.tanh(x) * torch.sigmoid(x) + torch.exp(-x * x)
    x = torch.randn(2048, 2048)
    with torch.no_grad():
        compiled = kiln.compile(f, [x], strict=True)
        assert_matches(compiled(x), f(x))
        caller, others = cpu_ticks_while_calling(compiled, x)
    # Each of torch's threads runs an equal share of every kernel.
    if threads == 1:
        assert others <= 0.1 * caller, (caller, others)
    else:
        assert others >= 0.4 * caller, (caller, others)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
