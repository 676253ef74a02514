// A compile request's digest: what a client looks a local hit up by
// (LocalIndex::FindAlias), computed by kilnd and clients alike from the
// request's exact bytes and a salt kilnd publishes per target in the cache
// descriptor. Keys are kilnd's alone (cache/request_key.h): this needs no
// codegen.
//
//   salt(target)   = SHA-256 of the key's format version, kilnd's codegen
//                    version and the target's toolchain digest
//   RequestDigest  = SHA-256 of salt(request.options.target) and the
//                    deterministic bytes of request.graph, .guards, .options
//                    and of each of request.input_layouts, if any
//
// Not a key: requests that differ only in names or node order have other
// digests and one key. Everything else in the request (want_bytes, repair,
// priority) says how to answer, not what to build, and stays out of it.
#ifndef KILN_CACHE_REQUEST_DIGEST_H_
#define KILN_CACHE_REQUEST_DIGEST_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/message_lite.h"
#include "proto/service.pb.h"

namespace kiln {

// Each target's salt, as the cache descriptor lists them. A type of its own:
// a map of toolchain digests is not one.
struct RequestSalts {
  std::map<kiln::v1::Target, std::string> by_target;
};

// The SHA-256 (hex) of `request` with its target's salt. NotFound when
// `salts` lacks the target (one kilnd does not compile for).
absl::StatusOr<std::string> RequestDigest(const kiln::v1::CompileRequest& request,
                                          const RequestSalts& salts);

// A message's bytes in protobuf's deterministic encoding (map entries
// sorted): what request digests and traffic's graph digests hash.
std::string DeterministicBytes(const google::protobuf::MessageLite& message);

// The salts a cache descriptor lists (cache/local_index.h).
RequestSalts DescriptorRequestSalts(const kiln::v1::CacheDescriptor& descriptor);

}  // namespace kiln

#endif  // KILN_CACHE_REQUEST_DIGEST_H_
