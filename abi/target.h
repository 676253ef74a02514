// Code-generation targets (kiln.v1.Target): which CPUs an artifact is
// compiled for, the -march flags that say so, and the names users type.
//
//   native     -march=native -mprefer-vector-width=512   (the default)
//   x86-64-v3  -march=x86-64-v3                          (AVX2, 256-bit)
//   x86-64-v4  -march=x86-64-v4 -mprefer-vector-width=512 (AVX-512)
//
// A portable level's toolchain fingerprint names the level, not the host's
// CPU, so its cache keys agree across hosts with the same compiler.
#ifndef KILN_ABI_TARGET_H_
#define KILN_ABI_TARGET_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/artifact.pb.h"

namespace kiln {

// Every target, in enum order.
const std::vector<kiln::v1::Target>& AllTargets();

// Whether `target` is one of AllTargets() (proto3 enums keep unknown values:
// a newer client may send one).
bool IsKnownTarget(int target);

// "native", "x86-64-v3", "x86-64-v4"; "target N" for an unknown value.
std::string TargetName(kiln::v1::Target target);

// The inverse of TargetName. InvalidArgument naming the known ones.
absl::StatusOr<kiln::v1::Target> ParseTarget(absl::string_view name);

// The flags that choose the target's instructions and vector width.
std::vector<std::string> TargetFlags(kiln::v1::Target target);

// The toolchain fingerprint of each target kilnd compiles for: kilnd
// detects them at start, a client reads them from the cache descriptor.
using TargetToolchains = std::map<kiln::v1::Target, kiln::v1::Toolchain>;

// A toolchain's CPU features (Toolchain.cpu_feature_list, or the list of
// an entry written by an earlier build), views into `toolchain`.
std::vector<absl::string_view> CpuFeatures(const kiln::v1::Toolchain& toolchain);

}  // namespace kiln

#endif  // KILN_ABI_TARGET_H_
