// Opens an artifact in this process.
//
// The object is taken only from the object directory of a cache directory
// the caller has checked (common/trust.h), by a path made from the digest:
// whatever path a daemon reports is never opened. The walk from the cache
// directory to the file opens each component with O_NOFOLLOW and checks
// its owner and mode, then hashes the bytes read from that descriptor
// against the digest, then dlopens the same path. No one outside the
// trusted uids can write any directory on that path, and a name holds only
// the bytes whose SHA-256 it carries (content addressing; kilnd writes by
// rename and only ever the same bytes), so what dlopen maps is what was
// hashed. dlopen through /proc/self/fd/N would not do: glibc treats a
// reused fd number as an already-loaded object. Then checks the ABI version
// and that the entry points agree with the signature. The object is
// dlclosed when the last reference to its ArtifactObject goes: holders
// keep one while any kernel of it may run.
#ifndef KILN_CLIENT_LOADER_H_
#define KILN_CLIENT_LOADER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "abi/kiln_abi.h"
#include "absl/status/statusor.h"
#include "proto/artifact.pb.h"

namespace kiln {

struct ArtifactObject {
  ArtifactObject() = default;
  ArtifactObject(const ArtifactObject&) = delete;
  ArtifactObject& operator=(const ArtifactObject&) = delete;
  ~ArtifactObject();

  void* handle = nullptr;  // dlopen's
  kiln::v1::ArtifactMetadata metadata;
  const kiln_artifact_info* info = nullptr;
  kiln_run_fn run = nullptr;
  kiln_scratch_bytes_fn scratch_bytes = nullptr;
};

// Opens the object of `metadata` from `cache_dir`, which must already have
// passed CheckTrustedPath for `trusted`. DataLoss when the file's bytes do
// not match the digest; FailedPrecondition when a file or directory on the
// way is not trusted, the artifact's ABI version differs from this
// client's, or this CPU lacks a feature the artifact's target needs
// (client/cpu_check.h; checked before the file is opened); InvalidArgument when the digest is not
// 64 hex digits.
absl::StatusOr<std::shared_ptr<const ArtifactObject>> OpenObject(
    const std::string& cache_dir, const kiln::v1::ArtifactMetadata& metadata,
    const std::vector<uid_t>& trusted);

}  // namespace kiln

#endif  // KILN_CLIENT_LOADER_H_
