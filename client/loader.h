// Loads an artifact into this process.
//
// Hashes the object file against the digest the daemon reported, then
// dlopens it by its path. The path is content-addressed (the digest is in
// the name), so glibc's reuse of an already-loaded object of the same name
// is exactly right; dlopen through /proc/self/fd/N would not be, since fd
// numbers are reused. The object directory is private to the user, which is
// what makes hashing then opening by name safe. Then checks the ABI version
// and that the entry points agree with the signature. Artifacts are never dlclosed: a kernel may
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
  kiln_scratch_bytes_fn scratch_bytes = nullptr;
};

// DataLoss when the file's bytes do not match the digest; FailedPrecondition
// when the artifact's ABI version differs from this client's.
absl::StatusOr<std::shared_ptr<const LoadedArtifact>> LoadArtifact(
    const std::string& path, const kiln::v1::ArtifactMetadata& metadata);

}  // namespace kiln

#endif  // KILN_CLIENT_LOADER_H_
