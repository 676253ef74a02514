"""The package installed as a user installs it, in a fresh virtual
environment: the wheel //client/python:wheel builds, and `pip install -e` of
a checkout. Each install then runs torch.compile(f, backend="kiln") in a
process with a clean environment, outside the checkout, and the kilnd it
starts is the install's own.

Runs under pytest (the checkout's .venv); each test case is counted by
the test command through the JUnit XML written to $XML_OUTPUT_FILE.
"""
import base64
import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
import zipfile

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# The built files: in Bazel's runfiles, else in the checkout's bazel-bin.
BUILT = (os.path.join(os.environ["TEST_SRCDIR"], "kiln") if "TEST_SRCDIR" in os.environ
         else os.path.join(HERE, "..", "..", "bazel-bin"))
WHEEL = os.path.join(BUILT, "client", "python", "kiln-0.1.0-cp311-cp311-linux_x86_64.whl")
with open(os.path.join(HERE, "pyproject.toml"), "rb") as pyproject:
    PROJECT = tomllib.load(pyproject)["project"]

# What the installed package runs, in a process of its own: the seed's f
# through torch.compile with the backend found by name.
CHILD = r"""
import importlib.metadata, json
import torch, torch._dynamo
import kiln

def f(x):
    return torch.relu(x @ x.T + 1)

torch.manual_seed(0)
x = torch.randn(64, 64)
y = torch.compile(f, backend="kiln")(x)
daemon = kiln._default_client().daemon()
print(json.dumps({"kiln": kiln.__file__,
                  "version": importlib.metadata.version("kiln"),
                  "backend_is_kilns": torch._dynamo.lookup_backend("kiln") is kiln.backend,
                  "compiles": kiln.stats()["daemon"]["compiles"],
                  "daemon_pid": int(daemon["pid"]),
                  "daemon_version": daemon["daemon_version"],
                  "x": x.tolist(), "y": y.tolist()}))
"""


def f(x):
    return torch.relu(x @ x.T + 1)


@pytest.fixture
def root():
    """A directory outside the checkout, short enough for kilnd's socket."""
    path = tempfile.mkdtemp(prefix="kinst", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def make_venv(root):
    """A fresh virtual environment that sees the checkout's .venv (this
    interpreter's site-packages) after its own packages, through a .pth
    file: torch (gigabytes) is not installed again, and pip and setuptools
    (torch requires >= 77) come from there too, so no install needs the
    network."""
    venv = os.path.join(root, "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site_packages = os.path.join(venv, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}",
                                 "site-packages")
    with open(os.path.join(site_packages, "checkout_venv.pth"), "w") as pth:
        pth.write(sysconfig.get_paths()["purelib"] + "\n")
    return venv, site_packages


def clean_environment(root, venv):
    """An activated venv's environment and nothing else: no PYTHONPATH, no
    KILN_DAEMON; a kilnd socket and cache of the test's own."""
    return {"PATH": f"{venv}/bin:/usr/bin:/bin", "HOME": root, "VIRTUAL_ENV": venv,
            "KILN_SOCKET": os.path.join(root, "s"), "KILN_CACHE_DIR": os.path.join(root, "cache")}


def run(command, root, venv):
    result = subprocess.run(command, cwd=root, env=clean_environment(root, venv),
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def stop(pid):
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)


def compile_in_child(root, venv):
    """CHILD's result in `venv`, and the path of the kilnd it started (which
    this stops)."""
    result = json.loads(run([os.path.join(venv, "bin", "python"), "-c", CHILD], root, venv))
    try:
        result["kilnd"] = os.readlink(f"/proc/{result['daemon_pid']}/exe")
        result["kiln status"] = run(["kiln", "status"], root, venv)
    finally:
        stop(result["daemon_pid"])
    with open(os.path.join(root, "cache", "kilnd.log")) as log:
        result["kilnd.log"] = log.read()
    return result


def check_compiled(result, kiln_file, kilnd):
    assert result["kiln"] == kiln_file
    assert result["kilnd"] == kilnd
    # It found its compile worker (else it warns and compiles with clang++ subprocesses).
    assert "kiln-compile-worker not found" not in result["kilnd.log"]
    assert f"(pid {result['daemon_pid']})" in result["kiln status"]
    assert result["backend_is_kilns"]
    assert result["compiles"] == 1
    assert result["version"] == PROJECT["version"] == result["daemon_version"]
    x = torch.tensor(result["x"])
    # 64-term float32 dot products summed in any order: |error| <= 64 * 2**-24 * |x_i| |x_j|,
    # and |x_i| |x_j| < 100 here: under 4e-4.
    torch.testing.assert_close(torch.tensor(result["y"]), f(x), rtol=1e-5, atol=1e-3)


def test_the_wheel_is_valid():
    with zipfile.ZipFile(WHEEL) as wheel:
        names = set(wheel.namelist())
        dist_info = f"kiln-{PROJECT['version']}.dist-info"
        record = wheel.read(f"{dist_info}/RECORD").decode().splitlines()
        recorded = {}
        for line in record:
            path, digest, size = line.rsplit(",", 2)
            recorded[path] = (digest, size)
        assert set(recorded) == names
        for path in names - {f"{dist_info}/RECORD"}:
            data = wheel.read(path)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert recorded[path] == (f"sha256={digest.decode()}", str(len(data))), path
        assert {"kiln/__init__.py", "kiln/_kiln.so", "kiln/libkiln_grpc.so",
                "kiln/_kiln.torch_version", "kiln/kilnd", "kiln/kiln-compile-worker",
                "kiln/kiln"} <= names
        assert (wheel.getinfo("kiln/kilnd").external_attr >> 16) & 0o777 == 0o755
        assert "Tag: cp311-cp311-linux_x86_64\n" in wheel.read(f"{dist_info}/WHEEL").decode()
        metadata = wheel.read(f"{dist_info}/METADATA").decode()
        assert f"Requires-Dist: torch=={torch.__version__.split('+')[0]}\n" in metadata
        assert "Requires-Python: >=3.11\n" in metadata
        assert wheel.read(f"{dist_info}/entry_points.txt").decode() == (
            "[console_scripts]\nkiln = kiln.__main__:main\n\n"
            "[torch_dynamo_backends]\nkiln = kiln:backend\n\n")


def test_build_wheel_refuses_a_torch_pin_the_extension_is_not_built_against():
    sys.path.insert(0, HERE)
    import build_wheel
    with pytest.raises(SystemExit, match=r"pin \['torch==2\.0\.0'\], but the extension is built "
                                         r"against torch 2\.15\.0\+cpu: make its dependency "
                                         r"torch==2\.15\.0"):
        build_wheel.metadata({**PROJECT, "dependencies": ["torch==2.0.0"]}, "2.15.0+cpu")


def test_the_wheel_installed_compiles_through_its_own_kilnd(root):
    venv, site_packages = make_venv(root)
    # Without --no-deps: pip checks the torch pin against the torch installed.
    run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--no-index",
         "--disable-pip-version-check", "--quiet", WHEEL], root, venv)
    package = os.path.join(site_packages, "kiln")
    check_compiled(compile_in_child(root, venv), os.path.join(package, "__init__.py"),
                   os.path.join(package, "kilnd"))


def test_an_editable_install_of_a_checkout_compiles_through_its_built_kilnd(root):
    # A copy of a checkout's layout after `bazel build -c opt`: the package's
    # sources, and what Bazel built in bazel-out/k8-opt/bin (kilnd with its
    # compile worker in its runfiles). This test's runfiles hold the
    # extension beside the sources, as the wheel does: not a checkout's layout.
    checkout = os.path.join(root, "checkout")
    package = os.path.join(checkout, "client", "python")
    os.makedirs(os.path.join(package, "kiln"))
    shutil.copy(os.path.join(HERE, "pyproject.toml"), package)
    for path in glob.glob(os.path.join(HERE, "kiln", "*.py")):
        shutil.copy(path, os.path.join(package, "kiln"))
    out = os.path.join(checkout, "bazel-out", "k8-opt", "bin")
    for built, copied in [("client/python/kiln/_kiln.so",) * 2,
                          ("client/python/kiln/libkiln_grpc.so",) * 2,
                          ("client/python/kiln/_kiln.torch_version",) * 2,
                          ("daemon/kilnd",) * 2,
                          ("tools/kiln/kiln",) * 2,
                          ("codegen/compile/worker/kiln-compile-worker",
                           "daemon/kilnd.runfiles/kiln/codegen/compile/worker/"
                           "kiln-compile-worker")]:
        os.makedirs(os.path.dirname(os.path.join(out, copied)), exist_ok=True)
        shutil.copy(os.path.join(BUILT, built), os.path.join(out, copied))

    venv, _ = make_venv(root)
    run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--no-index",
         "--no-build-isolation", "--disable-pip-version-check", "--quiet", "-e", package],
        root, venv)
    check_compiled(compile_in_child(root, venv), os.path.join(package, "kiln", "__init__.py"),
                   os.path.join(out, "daemon", "kilnd"))


if __name__ == "__main__":
    # --noconftest: conftest.py's fixture starts a kilnd for tests that
    # import kiln here; these import it only in the installs.
    args = [__file__, "-q", "-p", "no:cacheprovider", "--noconftest"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
