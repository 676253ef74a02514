#include "cache/request_key.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/guards.h"
#include "codegen/prepare.h"
#include "codegen/retype.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace kiln {

namespace {

// The toolchain digest of `request`'s target.
absl::StatusOr<std::string> TargetToolchainDigest(const kiln::v1::CompileRequest& request,
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
  return toolchain->second;
}

}  // namespace

RequestSalts RequestSaltsFor(const ToolchainDigests& toolchains) {
  RequestSalts salts;
  for (const auto& [target, toolchain] : toolchains) {
    Sha256 hasher;
    hasher.Update(absl::StrCat("kiln-request-salt key-format ", kKeyFormatVersion, "\n"));
    hasher.Update(CodegenVersionDigest());
    hasher.Update("\n");
    hasher.Update(toolchain);
    salts.by_target[target] = hasher.HexDigest();
  }
  return salts;
}

absl::StatusOr<KeyedRequest> KeyRequest(const kiln::v1::CompileRequest& request,
                                        const ToolchainDigests& toolchains) {
  KeyedRequest keyed;
  ASSIGN_OR_RETURN(keyed.inputs.toolchain_digest, TargetToolchainDigest(request, toolchains));
  if (request.input_layouts().empty()) {
    ASSIGN_OR_RETURN(keyed.inputs.graph, PrepareGraph(request.graph()));
  } else {
    std::vector<InputLayout> layouts;
    for (const kiln::v1::InputLayout& layout : request.input_layouts()) {
      layouts.push_back({{layout.sizes().begin(), layout.sizes().end()},
                         {layout.strides().begin(), layout.strides().end()}});
    }
    ASSIGN_OR_RETURN(const kiln::v1::Graph retyped, Retype(request.graph(), layouts));
    ASSIGN_OR_RETURN(keyed.inputs.graph, PrepareGraph(retyped));
  }
  ASSIGN_OR_RETURN(keyed.inputs.guards, ResolveGuards(keyed.inputs.graph, request.guards()));
  keyed.inputs.options = request.options();
  keyed.key = ComputeCacheKey(keyed.inputs);
  return keyed;
}

ToolchainDigests DigestToolchains(const TargetToolchains& toolchains) {
  ToolchainDigests digests;
  for (const auto& [target, toolchain] : toolchains) digests[target] = ToolchainDigest(toolchain);
  return digests;
}

std::string StaleReason(const kiln::v1::ArtifactMetadata& metadata,
                        const ToolchainDigests& toolchains) {
  const kiln::v1::KeyComponents& components = metadata.key_components();
  if (components.format_version() != KeyFormatDigest()) return "another key format";
  if (components.codegen_version() != CodegenVersionDigest()) {
    return "another codegen or ABI version";
  }
  const auto toolchain = toolchains.find(metadata.target());
  if (toolchain == toolchains.end()) {
    return absl::StrCat("target ", kiln::v1::Target_Name(metadata.target()),
                        " is not compiled for here");
  }
  if (components.toolchain() != toolchain->second) {
    return absl::StrCat("another toolchain or CPU (", metadata.toolchain().compiler_version(),
                        ", cpu ", metadata.toolchain().cpu(), ")");
  }
  return "";
}

void SetDescriptorToolchainDigests(const ToolchainDigests& toolchains,
                                   kiln::v1::CacheDescriptor& descriptor) {
  descriptor.clear_toolchain_digests();
  for (const auto& [target, digest] : toolchains) {
    kiln::v1::TargetToolchainDigest* entry = descriptor.add_toolchain_digests();
    entry->set_target(target);
    entry->set_digest(digest);
  }
  descriptor.clear_request_salts();
  for (const auto& [target, salt] : RequestSaltsFor(toolchains).by_target) {
    kiln::v1::TargetToolchainDigest* entry = descriptor.add_request_salts();
    entry->set_target(target);
    entry->set_digest(salt);
  }
}

}  // namespace kiln
