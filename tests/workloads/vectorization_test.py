"""Every loop kernel Kiln generates for the public workloads vectorizes.

For each traced workload (static and symbolic), `kiln explain --asm` prints
what clang makes of the generated source; each kernel-group function must
compute on vector registers and call nothing (a scalar libm call through
the runtime table would stop the vectorizer) but, once per chunk before its
loops, the runtime's thread_scratch when its row buffers have a symbolic
length. kiln_run calls the runtime's parallel_for and GEMM entries.

Each code-generation target is checked for its own registers: x86-64-v4
computes on 512-bit zmm registers, x86-64-v3 on 256-bit ymm registers and
never touches a zmm one (its artifacts must run on AVX2-only CPUs), native
on zmm registers on an AVX-512 CPU and like x86-64-v3 on any other."""
import glob
import os
import re
import subprocess
import unittest

KILN = os.path.join(os.getcwd(), "tools/kiln/kiln")
GRAPHS = sorted(path for path in glob.glob("tests/workloads/*.json") +
                glob.glob("tests/workloads/dynamic/*.json") if ".ref." not in path)


def functions(assembly):
    """{name: body} of each function in clang's -S output."""
    result = {}
    for chunk in re.split(r"\n(?=[A-Za-z_][\w.]*:\n)", assembly):
        match = re.match(r"([A-Za-z_][\w.]*):\n", chunk)
        if match and not match.group(1).startswith(".L"):
            result[match.group(1)] = chunk
    return result


def host_has_avx512():
    with open("/proc/cpuinfo") as cpuinfo:
        return any(line.startswith("flags") and " avx512f " in line + " " for line in cpuinfo)


# target -> (the register its vector arithmetic must use, what it must not use)
TARGETS = {
    "native": ("zmm", None) if host_has_avx512() else ("ymm", "zmm"),
    "x86-64-v4": ("zmm", None),
    "x86-64-v3": ("ymm", "zmm"),
}


class VectorizationTest(unittest.TestCase):
    def test_every_kernel_group_vectorizes_for_every_target(self):
        for target in TARGETS:
            with self.subTest(target=target):
                self.check_target(target)

    def check_target(self, target):
        register, forbidden = TARGETS[target]
        self.assertGreaterEqual(len(GRAPHS), 27, GRAPHS)
        groups = 0
        for path in GRAPHS:
            with self.subTest(graph=path, target=target):
                result = subprocess.run([KILN, "explain", "--asm", "--target=" + target, path],
                                        capture_output=True, text=True)
                self.assertEqual(result.returncode, 0, result.stderr)
                source = result.stdout[result.stdout.index("== C++ =="):
                                       result.stdout.index("== assembly ==")]
                assembly = result.stdout[result.stdout.index("== assembly =="):]
                if forbidden is not None:
                    self.assertNotIn("%" + forbidden, assembly,
                                     f"{path}: {target} code uses {forbidden} registers")
                # Groups whose source fetches symbolic row buffers.
                scratch = set(re.findall(
                    r"static void (kiln_group_\d+)\([^{]*\{(?:(?!\n}\n).)*rt->thread_scratch\(",
                    source, re.S))
                for name, body in functions(assembly).items():
                    group = re.search(r"kiln_group_\d+", name)
                    if group is None:
                        continue
                    groups += 1
                    vector = re.findall(r"\bv\w+p[sd]\b[^\n]*%" + register, body)
                    self.assertTrue(vector, f"{path}: {name} has no {register} vector arithmetic "
                                    f"for {target}")
                    self.assertNotRegex(body, r"@PLT", f"{path}: {name} calls out")
                    calls = len(re.findall(r"\bcall", body))
                    self.assertLessEqual(calls, 1 if group.group(0) in scratch else 0,
                                         f"{path}: {name} calls out")
        self.assertGreater(groups, 10)


if __name__ == "__main__":
    unittest.main()
