"""pytest fixtures of the Python package's tests."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def private_kilnd():
    """A kilnd of the test module's own, auto-started by the package's
    client on a short socket path, and stopped at the end."""
    root = tempfile.mkdtemp(prefix="kpy", dir="/tmp")
    os.environ["KILN_SOCKET"] = os.path.join(root, "s")
    os.environ["KILN_CACHE_DIR"] = os.path.join(root, "cache")
    yield root
    try:
        os.kill(int(kiln._default_client().daemon()["pid"]), signal.SIGTERM)
    except (kiln.KilnError, ProcessLookupError):
        pass
    shutil.rmtree(root, ignore_errors=True)


def assert_matches(got, want):
    """assert_close with room for float32 sums of a few hundred terms in
    another order (Kiln's GEMMs against eager's BLAS)."""
    import torch
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def compiles():
    """kilnd's count of compiles (kiln.stats() has kilnd's counters once a
    client exists)."""
    kiln._default_client()
    return kiln.stats()["daemon"]["compiles"]


def fresh_process_result(source, *args):
    """The JSON last line of `source` run by a fresh Python process (with this
    process's environment, so the same kilnd), which must exit 0."""
    out = subprocess.run([sys.executable, "-c", source, *args], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])
