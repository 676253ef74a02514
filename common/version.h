// Versions that must agree between a client, kilnd and an artifact.
#ifndef KILN_COMMON_VERSION_H_
#define KILN_COMMON_VERSION_H_

#include <cstdint>

namespace kiln {

// Human-readable release.
inline constexpr char kKilnVersion[] = "0.1.0";

// Bump on any incompatible change to proto/service.proto's messages or
// semantics. Client and daemon refuse each other when these differ.
// 3: CompileOptions.target (a daemon of 2 would ignore it and compile native).
inline constexpr uint32_t kProtocolVersion = 3;

// Every RPC carries the client's protocol and ABI versions in these call
// metadata keys, and kilnd refuses a call whose versions are missing or
// differ: Hello is not the only gate.
inline constexpr char kProtocolMetadataKey[] = "kiln-protocol";
inline constexpr char kAbiMetadataKey[] = "kiln-abi";

// The largest request kilnd reads; gRPC refuses a larger one with
// RESOURCE_EXHAUSTED before it is parsed.
inline constexpr int kMaxRequestBytes = 64 << 20;

// The artifact ABI version lives in abi/kiln_abi.h (KILN_ABI_VERSION)
// so that generated code, the loader and the runtime share one definition.

}  // namespace kiln

#endif  // KILN_COMMON_VERSION_H_
