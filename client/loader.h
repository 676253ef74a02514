// Loads an artifact into this process.
//
// Opens the object file once, hashes those bytes against the digest the
// daemon reported, and dlopens the same open file (/proc/self/fd/N), so what
// runs is what was verified. Then checks the ABI version and that the entry
// points agree with the signature. Artifacts are never dlclosed: a kernel may
// still be running on the pool, and their pages are shared and small.
#ifndef KILN_CLIENT_LOADER_H_
#define KILN_CLIENT_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "codegen/abi/kiln_abi.h"
#include "proto/artifact.pb.h"

namespace kiln {

struct LoadedArtifact {
  kiln::v1::ArtifactMetadata metadata;
  const kiln_artifact_info* info = nullptr;
  kiln_run_fn run = nullptr;
};

// DataLoss when the file's bytes do not match the digest; FailedPrecondition
// when the artifact's ABI version differs from this client's.
absl::StatusOr<std::shared_ptr<const LoadedArtifact>> LoadArtifact(
    const std::string& path, const kiln::v1::ArtifactMetadata& metadata);

}  // namespace kiln

#endif  // KILN_CLIENT_LOADER_H_
