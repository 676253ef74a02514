// The cache key: one builder, every input listed in one place.
//
//   key = SHA-256(format version, digest of each component)
//   components: canonical graph, canonical guards, compile options,
//               toolchain fingerprint, codegen version (+ ABI version)
//
// Each component is hashed from Kiln's own canonical byte encoding, never
// from SerializeAsString() (protobuf serialization is not canonical across
// versions). The component digests are stored with the entry so that a
// miss can later be explained component by component.
//
// IF YOU CHANGE ANY INPUT TO THE HASH OR ITS ENCODING, BUMP kKeyFormatVersion.
#ifndef KILN_CACHE_KEY_H_
#define KILN_CACHE_KEY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "codegen/codegen_inputs.h"
#include "proto/artifact.pb.h"

namespace kiln {

inline constexpr int kKeyFormatVersion = 1;

struct CacheKey {
  std::string key;  // 64 hex digits
  kiln::v1::KeyComponents components;
};

CacheKey ComputeCacheKey(const CodegenInputs& inputs);

// The key's toolchain component: SHA-256 (hex) of every field of the
// fingerprint. Computed once per toolchain (kilnd at start), so that keying
// a request needs only the digest.
std::string ToolchainDigest(const kiln::v1::Toolchain& toolchain);

// The short digests of a graph's parts (KeyComponents.graph_part_digests,
// or the list of an entry written by an earlier build), views into
// `components`.
std::vector<absl::string_view> GraphParts(const kiln::v1::KeyComponents& components);

// The key's codegen-version component (kCodegenVersion and the ABI version).
std::string CodegenVersionDigest();

// The key's format-version component (kKeyFormatVersion).
std::string KeyFormatDigest();

}  // namespace kiln

#endif  // KILN_CACHE_KEY_H_
