"""Packs the built package into a wheel (PEP 427): //client/python:wheel.

    build_wheel.py PYPROJECT OUT FILE...

Every FILE goes into the wheel's `kiln/` under its base name (the package's
Python files, its extension and gRPC transport, kilnd and its compile
worker, the `kiln` CLI), executable when it is a program. The dist-info's METADATA and
entry_points.txt come from PYPROJECT's [project] table, so that the wheel
and `pip install -e` describe the same package. OUT's name must be the
wheel's own (name-version-tag.whl, as pip requires). The zip's entries are
sorted and dated 1980-01-01: the same inputs give the same bytes.
"""
import base64
import hashlib
import os
import sys
import tomllib
import zipfile

# The extension is built for Debian 12's CPython 3.11 on x86-64, against
# Debian's shared libraries: a plain linux tag, not a manylinux one.
TAG = "cp311-cp311-linux_x86_64"


def metadata(project, torch_version):
    """METADATA (core metadata 2.1) for pyproject's [project] table, after
    checking that its torch pin is the torch the extension is built against."""
    built = torch_version.split("+")[0]  # 2.15.0+cu132: the pin matches any local build
    pins = [dependency for dependency in project.get("dependencies", [])
            if dependency.replace(" ", "").startswith("torch==")]
    if pins != [f"torch=={built}"]:
        sys.exit(f"build_wheel: pyproject.toml's dependencies pin {pins or 'no torch'}, but the "
                 f"extension is built against torch {torch_version}: make its dependency "
                 f"torch=={built}")
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}",
             f"Version: {project['version']}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Requires-Dist: {dependency}" for dependency in project.get("dependencies", [])]
    return "\n".join(lines) + "\n"


def entry_points(project):
    """entry_points.txt: [project.scripts] as console_scripts, then each
    [project.entry-points] group."""
    groups = {}
    if "scripts" in project:
        groups["console_scripts"] = project["scripts"]
    groups.update(project.get("entry-points", {}))
    return "".join(f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
                   + "\n" for group, points in groups.items())


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}\n"


def zip_entry(path, executable):
    entry = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
    entry.compress_type = zipfile.ZIP_DEFLATED
    entry.external_attr = (0o100755 if executable else 0o100644) << 16
    return entry


def main(pyproject, out, files):
    with open(pyproject, "rb") as file:
        project = tomllib.load(file)["project"]
    name, version = project["name"], project["version"]
    expected = f"{name}-{version}-{TAG}.whl"
    if os.path.basename(out) != expected:
        sys.exit(f"build_wheel: the wheel of {name} {version} is named {expected}, not "
                 f"{os.path.basename(out)}: rename the output in client/python/BUILD.bazel")
    contents = []  # (path in the wheel, bytes, executable)
    for source in sorted(files, key=os.path.basename):
        with open(source, "rb") as file:
            data = file.read()
        # Programs are executable; Bazel marks every output so, shared libraries too.
        program = data.startswith(b"\x7fELF") and not source.endswith(".so")
        contents.append((f"{name}/{os.path.basename(source)}", data, program))
    torch_version = next(data for path, data, _ in contents
                         if path == f"{name}/_kiln.torch_version").decode().strip()
    dist_info = f"{name}-{version}.dist-info"
    for path, text in [
            ("METADATA", metadata(project, torch_version)),
            ("WHEEL", f"Wheel-Version: 1.0\nGenerator: kiln build_wheel.py\n"
                      f"Root-Is-Purelib: false\nTag: {TAG}\n"),
            ("entry_points.txt", entry_points(project))]:
        contents.append((f"{dist_info}/{path}", text.encode(), False))
    record = "".join(record_line(path, data) for path, data, _ in contents)
    contents.append((f"{dist_info}/RECORD", f"{record}{dist_info}/RECORD,,\n".encode(), False))
    with zipfile.ZipFile(out, "w") as wheel:
        for path, data, executable in contents:
            wheel.writestr(zip_entry(path, executable), data)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
