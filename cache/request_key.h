// A compile request's key: the one path from a request to the key it is
// stored under, in kilnd alone (daemon/compile_path.cc). Clients look hits
// up by the request's digest (cache/request_digest.h) instead.
//
//   request.graph (--Retype, when request.input_layouts are set)
//                   --PrepareGraph-->   canonical graph   --+
//   request.guards  --ResolveGuards-->  canonical guards  --+--> CodegenInputs
//   request.options ------------------------------------------+      |
//   toolchain digest of request.options.target  -------------+  ComputeCacheKey
//
// Everything else in the request (want_bytes, repair, priority) says how to answer,
// not what to build, and stays out of the key.
#ifndef KILN_CACHE_REQUEST_KEY_H_
#define KILN_CACHE_REQUEST_KEY_H_

#include <map>
#include <string>

#include "abi/target.h"
#include "absl/status/statusor.h"
#include "cache/key.h"
#include "cache/request_digest.h"
#include "codegen/codegen_inputs.h"
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
// as Retype, PrepareGraph and ResolveGuards give them (InvalidArgument or
// Unimplemented naming the node, input or guard).
absl::StatusOr<KeyedRequest> KeyRequest(const kiln::v1::CompileRequest& request,
                                        const ToolchainDigests& toolchains);

// The request-digest salt of each target (cache/request_digest.h): the key's
// format version, the codegen version and the target's toolchain digest.
RequestSalts RequestSaltsFor(const ToolchainDigests& toolchains);

ToolchainDigests DigestToolchains(const TargetToolchains& toolchains);

// Why a stored entry can never be a hit for a kilnd of this build with
// `toolchains`: its key has another format, codegen version, or toolchain
// (compiler, flags, CPU) for its target, or its target is not compiled for
// here. Empty when it can be.
std::string StaleReason(const kiln::v1::ArtifactMetadata& metadata,
                        const ToolchainDigests& toolchains);

// Sets a cache descriptor's (cache/local_index.h) toolchain digests and
// request salts for `toolchains`.
void SetDescriptorToolchainDigests(const ToolchainDigests& toolchains,
                                   kiln::v1::CacheDescriptor& descriptor);

}  // namespace kiln

#endif  // KILN_CACHE_REQUEST_KEY_H_
