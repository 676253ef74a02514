#include "client/cpu_check.h"

#include <algorithm>
#include <utility>

#include "abi/target.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

// __builtin_cpu_supports takes only a string literal, hence the macro.
#define KILN_CPU_FEATURE(name) {name, static_cast<bool>(__builtin_cpu_supports(name))}

std::vector<std::pair<std::string, bool>> ProbeCpu() {
  __builtin_cpu_init();
  return {
      KILN_CPU_FEATURE("sse4.2"),     KILN_CPU_FEATURE("popcnt"),
      KILN_CPU_FEATURE("avx"),        KILN_CPU_FEATURE("avx2"),
      KILN_CPU_FEATURE("bmi"),        KILN_CPU_FEATURE("bmi2"),
      KILN_CPU_FEATURE("fma"),        KILN_CPU_FEATURE("f16c"),
      KILN_CPU_FEATURE("lzcnt"),      KILN_CPU_FEATURE("movbe"),
      KILN_CPU_FEATURE("avx512f"),    KILN_CPU_FEATURE("avx512bw"),
      KILN_CPU_FEATURE("avx512cd"),   KILN_CPU_FEATURE("avx512dq"),
      KILN_CPU_FEATURE("avx512vl"),   KILN_CPU_FEATURE("avx512vnni"),
      KILN_CPU_FEATURE("avx512vbmi"), KILN_CPU_FEATURE("avx512ifma"),
      KILN_CPU_FEATURE("avx512bf16"),
  };
}

#undef KILN_CPU_FEATURE

const std::vector<std::pair<std::string, bool>>& CpuProbe() {
  static const auto* const probe = new std::vector<std::pair<std::string, bool>>(ProbeCpu());
  return *probe;
}

std::vector<std::string> TargetFeatures(kiln::v1::Target target) {
  std::vector<std::string> features;
  if (target == kiln::v1::TARGET_X86_64_V3 || target == kiln::v1::TARGET_X86_64_V4) {
    features = {"avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe"};
  }
  if (target == kiln::v1::TARGET_X86_64_V4) {
    for (const char* feature : {"avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"}) {
      features.push_back(feature);
    }
  }
  return features;
}

}  // namespace

const std::vector<std::string>& CpuFeatureNames() {
  static const auto* const names = [] {
    auto* names = new std::vector<std::string>;
    for (const auto& [name, present] : CpuProbe()) names->push_back(name);
    return names;
  }();
  return *names;
}

const std::set<std::string>& HostCpuFeatures() {
  static const auto* const features = [] {
    auto* features = new std::set<std::string>;
    for (const auto& [name, present] : CpuProbe()) {
      if (present) features->insert(name);
    }
    return features;
  }();
  return *features;
}

std::vector<std::string> RequiredCpuFeatures(const kiln::v1::ArtifactMetadata& metadata) {
  std::vector<std::string> required = TargetFeatures(metadata.target());
  // Native code may use whatever its build host had; so may a portable
  // target's, as far as its toolchain lists any.
  const std::vector<std::string>& known = CpuFeatureNames();
  for (const absl::string_view feature : CpuFeatures(metadata.toolchain())) {
    if (feature.empty() || feature[0] != '+') continue;
    const std::string name(feature.substr(1));
    if (std::find(known.begin(), known.end(), name) != known.end()) required.push_back(name);
  }
  std::sort(required.begin(), required.end());
  required.erase(std::unique(required.begin(), required.end()), required.end());
  return required;
}

absl::Status CheckCpuCanRun(const kiln::v1::ArtifactMetadata& metadata,
                            const std::set<std::string>& cpu_features) {
  std::vector<std::string> missing;
  for (const std::string& feature : RequiredCpuFeatures(metadata)) {
    if (cpu_features.count(feature) == 0) missing.push_back(feature);
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("artifact ", metadata.key().substr(0, 12), " was compiled for target ",
                   TargetName(metadata.target()),
                   metadata.target() == kiln::v1::TARGET_NATIVE
                       ? absl::StrCat(" (", metadata.toolchain().cpu(), ")")
                       : "",
                   ", and this CPU lacks ", absl::StrJoin(missing, ", "),
                   "; compile it for a target this CPU has (--target=x86-64-v3, or native here)"));
}

}  // namespace kiln
