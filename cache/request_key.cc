#include "cache/request_key.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/guards.h"
#include "codegen/prepare.h"
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

// Length-prefixed, so that no two field sequences hash the same bytes.
void HashField(Sha256& hasher, absl::string_view bytes) {
  const uint64_t length = bytes.size();
  hasher.Update(absl::string_view(reinterpret_cast<const char*>(&length), sizeof(length)));
  hasher.Update(bytes);
}

}  // namespace

std::string DeterministicBytes(const google::protobuf::MessageLite& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&out);
  }
  return bytes;
}

absl::StatusOr<std::string> RequestDigest(const kiln::v1::CompileRequest& request,
                                          const ToolchainDigests& toolchains) {
  ASSIGN_OR_RETURN(const std::string toolchain, TargetToolchainDigest(request, toolchains));
  Sha256 hasher;
  HashField(hasher, absl::StrCat("kiln-request-digest 1 key-format ", kKeyFormatVersion));
  HashField(hasher, toolchain);
  HashField(hasher, CodegenVersionDigest());
  HashField(hasher, DeterministicBytes(request.graph()));
  HashField(hasher, DeterministicBytes(request.guards()));
  HashField(hasher, DeterministicBytes(request.options()));
  return hasher.HexDigest();
}

absl::StatusOr<KeyedRequest> KeyRequest(const kiln::v1::CompileRequest& request,
                                        const ToolchainDigests& toolchains) {
  KeyedRequest keyed;
  ASSIGN_OR_RETURN(keyed.inputs.toolchain_digest, TargetToolchainDigest(request, toolchains));
  ASSIGN_OR_RETURN(keyed.inputs.graph, PrepareGraph(request.graph()));
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
