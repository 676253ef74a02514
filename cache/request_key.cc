#include "cache/request_key.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/guards.h"
#include "codegen/prepare.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<KeyedRequest> KeyRequest(const kiln::v1::CompileRequest& request,
                                        const ToolchainDigests& toolchains) {
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
  keyed.inputs.toolchain_digest = toolchain->second;
  keyed.key = ComputeCacheKey(keyed.inputs);
  return keyed;
}

ToolchainDigests DigestToolchains(const TargetToolchains& toolchains) {
  ToolchainDigests digests;
  for (const auto& [target, toolchain] : toolchains) digests[target] = ToolchainDigest(toolchain);
  return digests;
}

ToolchainDigests DescriptorToolchainDigests(const kiln::v1::CacheDescriptor& descriptor) {
  ToolchainDigests digests;
  for (const kiln::v1::TargetToolchainDigest& entry : descriptor.toolchain_digests()) {
    digests[entry.target()] = entry.digest();
  }
  return digests;
}

void SetDescriptorToolchainDigests(const ToolchainDigests& toolchains,
                                   kiln::v1::CacheDescriptor& descriptor) {
  descriptor.clear_toolchain_digests();
  for (const auto& [target, digest] : toolchains) {
    kiln::v1::TargetToolchainDigest* entry = descriptor.add_toolchain_digests();
    entry->set_target(target);
    entry->set_digest(digest);
  }
}

}  // namespace kiln
