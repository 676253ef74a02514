#include "client/loader.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "cache/object_dir.h"
#include "client/cpu_check.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/trust.h"

namespace kiln {
namespace {

// Closes the descriptor on every path out.
struct FileCloser {
  int fd;
  ~FileCloser() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

ArtifactObject::~ArtifactObject() {
  if (handle != nullptr) dlclose(handle);
}

absl::StatusOr<std::shared_ptr<const ArtifactObject>> OpenObject(
    const std::string& cache_dir, const kiln::v1::ArtifactMetadata& metadata,
    const std::vector<uid_t>& trusted) {
  if (!IsSha256Hex(metadata.digest())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "artifact digest '", metadata.digest().substr(0, 80), "' is not 64 lowercase hex digits"));
  }
  // Before any byte is mapped: code for a CPU this one is not dies of SIGILL.
  RETURN_IF_ERROR(CheckCpuCanRun(metadata, HostCpuFeatures()));
  const std::string relative = ObjectDirectory::RelativePathFor(metadata.digest());
  const std::string path = absl::StrCat(cache_dir, "/", relative);
  ASSIGN_OR_RETURN(const int fd, OpenTrustedBelow(cache_dir, relative, trusted));
  FileCloser closer{fd};
  Sha256 hasher;
  char buffer[1 << 16];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) hasher.Update(absl::string_view(buffer, n));
  if (n < 0) return absl::InternalError(absl::StrCat("cannot read ", path, ": ", strerror(errno)));
  const std::string digest = hasher.HexDigest();
  if (digest != metadata.digest()) {
    return absl::DataLossError(absl::StrCat("artifact ", path, " is corrupt: its SHA-256 is ",
                                            digest, ", the daemon stored ", metadata.digest(),
                                            ". Run `kiln evict ", metadata.key().substr(0, 12),
                                            "` and compile again"));
  }
  auto artifact = std::make_shared<ArtifactObject>();
  artifact->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (artifact->handle == nullptr) {
    return absl::InternalError(absl::StrCat("cannot dlopen ", path, ": ", dlerror()));
  }
  artifact->metadata = metadata;
  void* const handle = artifact->handle;
  auto info = reinterpret_cast<kiln_info_fn>(dlsym(handle, "kiln_info"));
  artifact->run = reinterpret_cast<kiln_run_fn>(dlsym(handle, "kiln_run"));
  artifact->scratch_bytes =
      reinterpret_cast<kiln_scratch_bytes_fn>(dlsym(handle, "kiln_scratch_bytes"));
  if (info == nullptr || artifact->run == nullptr || artifact->scratch_bytes == nullptr) {
    return absl::InternalError(
        absl::StrCat(path, " does not export kiln_info, kiln_scratch_bytes and kiln_run"));
  }
  artifact->info = info();
  if (artifact->info->abi_version != KILN_ABI_VERSION) {
    return absl::FailedPreconditionError(
        absl::StrCat("artifact ", path, " has ABI version ", artifact->info->abi_version,
                     "; this client runs ABI version ", KILN_ABI_VERSION));
  }
  const kiln::v1::Signature& signature = metadata.signature();
  if (artifact->info->num_inputs != static_cast<uint32_t>(signature.inputs_size()) ||
      artifact->info->num_outputs != static_cast<uint32_t>(signature.outputs_size())) {
    return absl::InternalError(
        absl::StrCat("artifact ", path, " takes ", artifact->info->num_inputs, " inputs and ",
                     artifact->info->num_outputs, " outputs; its metadata says ",
                     signature.inputs_size(), " and ", signature.outputs_size()));
  }
  return std::shared_ptr<const ArtifactObject>(std::move(artifact));
}

}  // namespace kiln
