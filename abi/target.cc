#include "abi/target.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kiln {

const std::vector<kiln::v1::Target>& AllTargets() {
  static const auto* const targets = new std::vector<kiln::v1::Target>{
      kiln::v1::TARGET_NATIVE, kiln::v1::TARGET_X86_64_V3, kiln::v1::TARGET_X86_64_V4};
  return *targets;
}

bool IsKnownTarget(int target) {
  for (kiln::v1::Target known : AllTargets()) {
    if (known == target) return true;
  }
  return false;
}

std::string TargetName(kiln::v1::Target target) {
  switch (target) {
    case kiln::v1::TARGET_NATIVE:
      return "native";
    case kiln::v1::TARGET_X86_64_V3:
      return "x86-64-v3";
    case kiln::v1::TARGET_X86_64_V4:
      return "x86-64-v4";
    default:
      return absl::StrCat("target ", static_cast<int>(target));
  }
}

absl::StatusOr<kiln::v1::Target> ParseTarget(absl::string_view name) {
  for (kiln::v1::Target target : AllTargets()) {
    if (name == TargetName(target)) return target;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown target '", name, "'; use native, x86-64-v3 or x86-64-v4"));
}

std::vector<std::string> TargetFlags(kiln::v1::Target target) {
  switch (target) {
    case kiln::v1::TARGET_X86_64_V3:
      // 256-bit vectors: the widest AVX2 has.
      return {"-march=x86-64-v3"};
    case kiln::v1::TARGET_X86_64_V4:
      return {"-march=x86-64-v4", "-mprefer-vector-width=512"};
    default:
      // -march=native alone picks 256-bit vectors on AVX-512 machines;
      // 512-bit ones pay on exp-bound kernels (docs/ARCHITECTURE.md).
      return {"-march=native", "-mprefer-vector-width=512"};
  }
}

std::vector<absl::string_view> CpuFeatures(const kiln::v1::Toolchain& toolchain) {
  if (toolchain.cpu_feature_list().empty()) {
    return {toolchain.cpu_features().begin(), toolchain.cpu_features().end()};
  }
  return absl::StrSplit(toolchain.cpu_feature_list(), ',');
}

}  // namespace kiln
