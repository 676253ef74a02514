#include "cache/request_key.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/guards.h"
#include "codegen/pipeline.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<KeyedRequest> KeyRequest(const kiln::v1::CompileRequest& request,
                                        const TargetToolchains& toolchains) {
  const kiln::v1::Target target = request.options().target();
  if (!IsKnownTarget(target)) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.target ", static_cast<int>(target),
                     " is not a known target (0 native, 1 x86-64-v3, 2 x86-64-v4)"));
  }
  const auto toolchain = toolchains.find(target);
  if (toolchain == toolchains.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no toolchain detected for target ", TargetName(target)));
  }
  KeyedRequest keyed;
  ASSIGN_OR_RETURN(keyed.inputs.graph, PrepareGraph(request.graph()));
  ASSIGN_OR_RETURN(keyed.inputs.guards, ResolveGuards(keyed.inputs.graph, request.guards()));
  keyed.inputs.options = request.options();
  keyed.inputs.toolchain = toolchain->second;
  keyed.key = ComputeCacheKey(keyed.inputs);
  return keyed;
}

TargetToolchains DescriptorToolchains(const kiln::v1::CacheDescriptor& descriptor) {
  TargetToolchains toolchains;
  for (const kiln::v1::TargetToolchain& entry : descriptor.target_toolchains()) {
    toolchains[entry.target()] = entry.toolchain();
  }
  // `toolchain` is native's by definition (the one field before targets).
  if (descriptor.has_toolchain())
    toolchains.emplace(kiln::v1::TARGET_NATIVE, descriptor.toolchain());
  return toolchains;
}

void SetDescriptorToolchains(const TargetToolchains& toolchains,
                             kiln::v1::CacheDescriptor& descriptor) {
  descriptor.clear_target_toolchains();
  for (const auto& [target, toolchain] : toolchains) {
    kiln::v1::TargetToolchain* entry = descriptor.add_target_toolchains();
    entry->set_target(target);
    *entry->mutable_toolchain() = toolchain;
    if (target == kiln::v1::TARGET_NATIVE) *descriptor.mutable_toolchain() = toolchain;
  }
}

}  // namespace kiln
