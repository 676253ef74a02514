#include "cache/local_index.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// The message in `path`, or nullopt when there is no such file.
template <typename Message>
absl::StatusOr<std::optional<Message>> ReadMessage(const std::string& path) {
  auto bytes = ReadFile(path);
  if (!bytes.ok()) {
    if (bytes.status().code() == absl::StatusCode::kNotFound) return std::nullopt;
    return bytes.status();
  }
  Message message;
  if (!message.ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat(path, " does not parse"));
  }
  return message;
}

}  // namespace

std::string MachineId() {
  auto id = ReadFile("/etc/machine-id");
  if (id.ok() && !id->empty()) return std::string(absl::StripAsciiWhitespace(*id));
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

std::string LocalIndex::PathFor(const std::string& key) const {
  return absl::StrCat(cache_dir_, "/index/", key.substr(0, 2), "/", key);
}

absl::Status LocalIndex::WriteDescriptor(const kiln::v1::CacheDescriptor& descriptor) const {
  return WriteFileAtomically(cache_dir_ + "/descriptor", descriptor.SerializeAsString(), 0444);
}

absl::StatusOr<std::optional<kiln::v1::CacheDescriptor>> LocalIndex::ReadDescriptor() const {
  return ReadMessage<kiln::v1::CacheDescriptor>(cache_dir_ + "/descriptor");
}

absl::Status LocalIndex::Publish(const kiln::v1::ArtifactMetadata& metadata) const {
  const std::string path = PathFor(metadata.key());
  struct stat info;
  if (stat(path.c_str(), &info) == 0) return absl::OkStatus();
  RETURN_IF_ERROR(MakeDirectories(Dirname(path), 0700));
  return WriteFileAtomically(path, metadata.SerializeAsString(), 0444);
}

absl::Status LocalIndex::Remove(const std::string& key) const {
  if (unlink(PathFor(key).c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(absl::StrCat("cannot remove ", PathFor(key), ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> LocalIndex::Find(
    const std::string& key) const {
  return ReadMessage<kiln::v1::ArtifactMetadata>(PathFor(key));
}

}  // namespace kiln
