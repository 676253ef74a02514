"""What the Python benches share: the kiln package on sys.path (from the
bench's runfiles, or the checkout), a private kilnd for the bench, and
OpenBLAS's kernels as the C++ benches choose them."""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile

_CORE_NAME = """
import ctypes
openblas = ctypes.CDLL("libopenblas.so.0")
openblas.openblas_get_corename.restype = ctypes.c_char_p
print(openblas.openblas_get_corename().decode())
"""


def blas_core():
    """The kernels OpenBLAS runs here ("Haswell", "SkylakeX", ...), asked in
    a child process so that this one has not loaded OpenBLAS yet."""
    return subprocess.run([sys.executable, "-c", _CORE_NAME], capture_output=True, text=True,
                          check=True).stdout.strip()


def prefer_avx512_blas():
    """As the C++ benches' PreferAvx512Blas (tools/bench/bench_util.h): on
    an AVX-512 CPU newer than Debian's OpenBLAS 0.3.21, which runs its AVX2
    kernels there, asks it for its AVX-512 ones (OPENBLAS_CORETYPE=SkylakeX)
    for this process and its children, eager and Kiln alike. Call it before
    torch loads OpenBLAS."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    with open("/proc/cpuinfo") as cpuinfo:
        flags = next((line.split(":", 1)[1].split() for line in cpuinfo
                      if line.startswith("flags")), [])
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= set(flags) and \
            blas_core() in ("Haswell", "Zen"):
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"


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
