// The toolchain fingerprint: everything about the compiler that can change
// an artifact's bytes or where it may run. It enters every cache key, so a
// host with another compiler build or another CPU never loads an artifact
// it did not build for.
#ifndef KILN_CODEGEN_COMPILE_TOOLCHAIN_H_
#define KILN_CODEGEN_COMPILE_TOOLCHAIN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/artifact.pb.h"

namespace kiln {

// The clang driver Kiln compiles with (LLVM 19, Debian's clang-19).
inline constexpr char kDefaultClang[] = "/usr/lib/llvm-19/bin/clang++";

// The exact code-generation flags of every artifact (without input/output).
// No fast-math: -fno-math-errno changes no value; -ffp-contract=off keeps
// a*b+c two roundings, as eager's scalar code computes it.
const std::vector<std::string>& CodegenFlags();

// Runs `clang --version` and `clang <flags> -###` once to learn the
// compiler's version, target triple, CPU and features; reads the ELF
// build-ids of the compiler and the LLVM libraries it loads (not a hash of
// 130 MB on every start).
absl::StatusOr<kiln::v1::Toolchain> DetectToolchain(const std::string& clang = kDefaultClang);

// The hex NT_GNU_BUILD_ID note of an ELF file. NotFound if it has none.
absl::StatusOr<std::string> ElfBuildId(const std::string& path);

}  // namespace kiln

#endif  // KILN_CODEGEN_COMPILE_TOOLCHAIN_H_
