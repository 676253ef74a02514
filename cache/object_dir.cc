#include "cache/object_dir.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace kiln {

std::string ObjectDirectory::PathFor(const std::string& digest) const {
  return absl::StrCat(root_, "/", digest.substr(0, 2), "/", digest, ".so");
}

std::string ObjectDirectory::RelativePathFor(const std::string& digest) {
  return absl::StrCat("objects/", digest.substr(0, 2), "/", digest, ".so");
}

bool ObjectDirectory::Contains(const std::string& digest) const {
  struct stat info;
  return stat(PathFor(digest).c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

absl::Status ObjectDirectory::Write(const std::string& digest, absl::string_view bytes,
                                    bool replace, bool synced) const {
  if (!replace && Contains(digest)) return absl::OkStatus();
  const std::string path = PathFor(digest);
  RETURN_IF_ERROR(MakeDirectories(Dirname(path), 0755));
  return WriteFileAtomically(path, bytes, 0444, synced);
}

absl::StatusOr<std::vector<std::string>> ObjectDirectory::Digests() const {
  return ListShardedFiles(root_, ".so");
}

absl::Status ObjectDirectory::Remove(const std::string& digest) const {
  if (unlink(PathFor(digest).c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(
        absl::StrCat("cannot remove ", PathFor(digest), ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace kiln
