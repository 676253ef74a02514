"""kiln_fuzz_target: one libFuzzer target, and a test that replays its corpus.

For a target NAME with source NAME.cc (defining LLVMFuzzerTestOneInput):
  NAME_fuzzer      libFuzzer binary; builds only with --config=fuzz (clang
                   19, -fsanitize=fuzzer), so it is tagged manual and
                   scripts/fuzz.sh builds and runs it.
  NAME_replay_test every file of corpus/NAME through the target once, in any
                   config (gcc by default; instrumented with --config=asan):
                   the seeds and every regression input stay fixed.
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

def kiln_fuzz_target(name, deps, size = "small"):
    cc_library(
        name = name + "_lib",
        srcs = [name + ".cc"],
        deps = deps + [":fuzz_checks"],
        alwayslink = True,
        testonly = True,
    )
    cc_binary(
        name = name + "_fuzzer",
        linkopts = ["-fsanitize=fuzzer"],
        deps = [":" + name + "_lib"],
        tags = ["manual"],
        testonly = True,
    )
    cc_test(
        name = name + "_replay_test",
        size = size,
        visibility = ["//:__pkg__"],
        args = ["tests/fuzz/corpus/" + name],
        data = native.glob(["corpus/" + name + "/**"]),
        deps = [
            ":" + name + "_lib",
            ":replay_main",
        ],
    )
