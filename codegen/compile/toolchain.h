// The toolchain fingerprint: everything about the compiler that can change
// an artifact's bytes or where it may run. It enters every cache key, so a
// host with another compiler build or another CPU never loads an artifact
// it did not build for.
#ifndef KILN_CODEGEN_COMPILE_TOOLCHAIN_H_
#define KILN_CODEGEN_COMPILE_TOOLCHAIN_H_

#include <string>
#include <vector>

#include "abi/target.h"
#include "absl/status/statusor.h"
#include "proto/artifact.pb.h"

namespace kiln {

// The clang driver Kiln compiles with (LLVM 19, Debian's clang-19).
inline constexpr char kDefaultClang[] = "/usr/lib/llvm-19/bin/clang++";

// The exact code-generation flags of every artifact for `target` (without
// input/output): TargetFlags(target) among the rest. No fast-math:
// -fno-math-errno changes no value; -ffp-contract=off keeps a*b+c two
// roundings, as eager's scalar code computes it.
std::vector<std::string> CodegenFlags(kiln::v1::Target target = kiln::v1::TARGET_NATIVE);

// Runs `clang --version` and `clang <flags> -###` once to learn the
// compiler's version, target triple, CPU and features for `target`; reads
// the ELF build-ids of the compiler and the LLVM libraries it loads (not a
// hash of 130 MB on every start). For a portable target the CPU is the
// level's name ("x86-64-v3") and the features are the level's, whatever
// the host: two hosts with the same compiler get the same fingerprint.
absl::StatusOr<kiln::v1::Toolchain> DetectToolchain(
    const std::string& clang = kDefaultClang, kiln::v1::Target target = kiln::v1::TARGET_NATIVE);

// DetectToolchain for every target, the probes run concurrently (each
// `clang -###` is a process start).
absl::StatusOr<TargetToolchains> DetectToolchains(const std::string& clang = kDefaultClang);

// DetectToolchains, remembered in the file `memo_path` (kilnd keeps it in
// its cache directory): the probes run again only when the fingerprint of
// what they read changes — the compiler's and LLVM's build-ids, every
// target's flags, and the host CPU as /proc/cpuinfo describes it — so a
// start does not pay six clang processes. A memo that cannot be read or
// written is only a slower start.
absl::StatusOr<TargetToolchains> DetectToolchainsRemembered(
    const std::string& memo_path, const std::string& clang = kDefaultClang);

// The hex NT_GNU_BUILD_ID note of an ELF file. NotFound if it has none.
absl::StatusOr<std::string> ElfBuildId(const std::string& path);

}  // namespace kiln

#endif  // KILN_CODEGEN_COMPILE_TOOLCHAIN_H_
