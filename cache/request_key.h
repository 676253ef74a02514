// A compile request's key: the one path from a request to the key it is
// stored under, for kilnd (daemon/artifact_cache.cc, which stores under it)
// and for clients (client/client.cc FindLocal, which looks it up in the
// local index). Both must compute the same key for the same request, or a
// client misses what kilnd stored; so neither assembles it itself.
//
//   request.graph   --PrepareGraph-->   canonical graph   --+
//   request.guards  --ResolveGuards-->  canonical guards  --+--> CodegenInputs
//   request.options ------------------------------------------+      |
//   toolchain digest of request.options.target  -------------+  ComputeCacheKey
//     (kilnd's; a client reads them from the cache descriptor)
//
// Everything else in the request (want_bytes, repair, priority) says how to answer,
// not what to build, and stays out of the key.
#ifndef KILN_CACHE_REQUEST_KEY_H_
#define KILN_CACHE_REQUEST_KEY_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "cache/key.h"
#include "codegen/codegen_inputs.h"
#include "codegen/compile/target.h"
#include "google/protobuf/message_lite.h"
#include "proto/service.pb.h"

namespace kiln {

// The toolchain digest (ToolchainDigest, cache/key.h) of each target.
using ToolchainDigests = std::map<kiln::v1::Target, std::string>;

struct KeyedRequest {
  CodegenInputs inputs;  // what GenerateCode compiles on a miss
  CacheKey key;
};

// The codegen inputs and cache key of `request` compiled with the toolchain
// of its target (request.options.target). InvalidArgument for a target that
// is not IsKnownTarget; FailedPrecondition when `toolchains` lacks it (a
// descriptor written by an older kilnd); the graph's and the guards' errors
// as PrepareGraph and ResolveGuards give them (InvalidArgument or
// Unimplemented naming the node, input or guard).
absl::StatusOr<KeyedRequest> KeyRequest(const kiln::v1::CompileRequest& request,
                                        const ToolchainDigests& toolchains);

// What `request` asks for, as SHA-256 (hex) of the exact bytes of its graph,
// guards and options (deterministic serialization), with its target's
// toolchain digest, the codegen version and the key's format version:
// cheap, as it prepares nothing.
// Not a key: requests that differ only in names or node order have other
// digests and one key. kilnd records each answered request's digest with
// its key (LocalIndex::PublishAlias), so that a fresh process that sends
// the same request again finds the key without preparing the graph. Errors
// as KeyRequest's for the target.
absl::StatusOr<std::string> RequestDigest(const kiln::v1::CompileRequest& request,
                                          const ToolchainDigests& toolchains);

// A message's bytes in protobuf's deterministic encoding (map entries
// sorted): what request digests and traffic's graph digests hash.
std::string DeterministicBytes(const google::protobuf::MessageLite& message);

ToolchainDigests DigestToolchains(const TargetToolchains& toolchains);

// Why a stored entry can never be a hit for a kilnd of this build with
// `toolchains`: its key has another format, codegen version, or toolchain
// (compiler, flags, CPU) for its target, or its target is not compiled for
// here. Empty when it can be.
std::string StaleReason(const kiln::v1::ArtifactMetadata& metadata,
                        const ToolchainDigests& toolchains);

// The digests a cache descriptor lists (cache/local_index.h), and a
// descriptor's list for `toolchains`.
ToolchainDigests DescriptorToolchainDigests(const kiln::v1::CacheDescriptor& descriptor);
void SetDescriptorToolchainDigests(const ToolchainDigests& toolchains,
                                   kiln::v1::CacheDescriptor& descriptor);

}  // namespace kiln

#endif  // KILN_CACHE_REQUEST_KEY_H_
