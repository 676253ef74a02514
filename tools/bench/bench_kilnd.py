"""What the Python benches share: the kiln package on sys.path (from the
bench's runfiles, or the checkout), a private kilnd for the bench, and the
OpenBLAS both sides call."""
import contextlib
import ctypes
import os
import shutil
import signal
import sys
import tempfile


def openblas():
    """The process's OpenBLAS (torch's), its core name function typed."""
    library = ctypes.CDLL("libopenblas.so.0")
    library.openblas_get_corename.restype = ctypes.c_char_p
    return library


def blas_core():
    """The kernels OpenBLAS runs ("Haswell", "Cooperlake", ...), as the C++
    benches' BlasCore (tools/bench/bench_util.h)."""
    return openblas().openblas_get_corename().decode()


def use_package():
    """Puts client/python (the package `kiln`) first on sys.path."""
    runfiles = os.environ.get("RUNFILES_DIR") or os.path.abspath(sys.argv[0] + ".runfiles")
    package = next(p for p in (os.path.join(runfiles, "kiln", "client", "python"),
                               os.path.join(os.getcwd(), "client", "python"))
                   if os.path.isdir(os.path.join(p, "kiln")))
    sys.path.insert(0, package)
    return package


@contextlib.contextmanager
def private_kilnd(prefix):
    """A cache and socket of the bench's own under /tmp (short, for the
    socket), for the kilnd the package auto-starts; that kilnd is stopped
    and the directory removed at the end. Yields the directory."""
    root = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.environ["KILN_SOCKET"] = os.path.join(root, "s")
    os.environ["KILN_CACHE_DIR"] = os.path.join(root, "cache")
    try:
        yield root
    finally:
        import kiln
        try:
            os.kill(int(kiln._default_client().daemon()["pid"]), signal.SIGTERM)
        except (kiln.KilnError, ProcessLookupError):
            pass
        shutil.rmtree(root, ignore_errors=True)
