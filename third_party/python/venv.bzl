"""The checkout's .venv (scripts/install-deps.sh --with-torch) as a repository.

It holds what Bazel needs from the pinned torch, found by asking the venv's
own interpreter: the Python toolchain that runs py_test and py_binary,
`:python3` for genrules and benches that run Python scripts (tracing the
public workloads, eager baselines), the headers and libraries the extension
builds against, and the torch version it is built against (`:torch_version`,
which the package checks at load).
"""

# The header trees of the torch wheel the extension includes. The wheel's
# include/ also carries protobuf and oneDNN headers of its own, which must
# not shadow Debian's (Kiln's protos and runtime use those).
_TORCH_HEADER_DIRS = ["ATen", "c10", "caffe2", "fmt", "pybind11", "torch"]

_QUERY = """
import torch, torch.utils.cpp_extension as ext
print(torch.__version__)
print(torch.__path__[0])
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
"""

def _python_venv_impl(ctx):
    workspace = ctx.path(Label("//:WORKSPACE")).dirname
    python = workspace.get_child(".venv").get_child("bin").get_child("python3")
    if not python.exists:
        fail("%s is missing: run scripts/install-deps.sh --with-torch" % python)

    # Re-run when install-deps installs other pins.
    pins = ctx.read(ctx.path(Label("//:.venv/kiln-pins")))
    result = ctx.execute([python, "-c", _QUERY], quiet = True)
    if result.return_code != 0:
        fail("%s cannot import torch: %s" % (python, result.stderr))
    version, torch_dir, cxx11_abi = result.stdout.strip().split("\n")
    if cxx11_abi != "1":
        fail("torch %s is built with the pre-C++11 libstdc++ ABI; Debian's gcc uses the C++11 one" % version)

    for name in _TORCH_HEADER_DIRS:
        ctx.symlink(torch_dir + "/include/" + name, "torch/include/" + name)
    ctx.file("torch_version", version + "\n")

    # The interpreter by its venv path (a symlink to it would start Python
    # outside the venv). The pins are in the script so that actions running
    # it run again when they change.
    pinned = "".join(["# %s\n" % pin for pin in pins.strip().split("\n")])
    ctx.file("python3", "#!/bin/sh\n%sexec %s \"$@\"\n" % (pinned, python), executable = True)
    ctx.template("BUILD.bazel", ctx.attr._build_template, {
        "%{python}": str(python),
        "%{torch_lib}": torch_dir + "/lib",
    })

python_venv = repository_rule(
    implementation = _python_venv_impl,
    attrs = {"_build_template": attr.label(default = "//third_party/python:venv.BUILD.tpl")},
    local = True,
)
