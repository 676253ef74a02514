// A compile request's key: the one path from a request to the key it is
// stored under, for kilnd (daemon/artifact_cache.cc, which stores under it)
// and for clients (client/client.cc FindLocal, which looks it up in the
// local index). Both must compute the same key for the same request, or a
// client misses what kilnd stored; so neither assembles it itself.
//
//   request.graph   --PrepareGraph-->   canonical graph   --+
//   request.guards  --ResolveGuards-->  canonical guards  --+--> CodegenInputs
//   request.options ------------------------------------------+      |
//   toolchain (kilnd's; a client reads it from the index) ---+  ComputeCacheKey
//
// Everything else in the request (want_bytes, repair) says how to answer,
// not what to build, and stays out of the key.
#ifndef KILN_CACHE_REQUEST_KEY_H_
#define KILN_CACHE_REQUEST_KEY_H_

#include "absl/status/statusor.h"
#include "cache/key.h"
#include "codegen/codegen_inputs.h"
#include "proto/service.pb.h"

namespace kiln {

struct KeyedRequest {
  CodegenInputs inputs;  // what GenerateCode compiles on a miss
  CacheKey key;
};

// The codegen inputs and cache key of `request` compiled with `toolchain`.
// The graph's and the guards' errors as PrepareGraph and ResolveGuards give
// them (InvalidArgument or Unimplemented naming the node, input or guard).
absl::StatusOr<KeyedRequest> KeyRequest(const kiln::v1::CompileRequest& request,
                                        const kiln::v1::Toolchain& toolchain);

}  // namespace kiln

#endif  // KILN_CACHE_REQUEST_KEY_H_
