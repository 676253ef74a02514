#include "common/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace kiln {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int error = errno;
  const std::string message = absl::StrCat(what, " ", path, ": ", strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(message);
  // Disk full is an operator's problem, not Kiln's: say so in the words
  // `df` would use, and name the directory to clean.
  if (error == ENOSPC || error == EDQUOT) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no space left on device in ", Dirname(path), " (", message, ")"));
  }
  return absl::InternalError(message);
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path);
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      const absl::Status status = ErrnoError("cannot read", path);
      close(fd);
      return status;
    }
    if (n == 0) break;
    contents.append(buffer, n);
  }
  close(fd);
  return contents;
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view what) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return ErrnoError(absl::StrCat("cannot read ", what), path);
  if ((info.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s %s can be read by others (mode %o): chmod 600 it", what, path, info.st_mode & 0777));
  }
  return ReadFile(path);
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes, mode_t mode,
                                 bool synced) {
  std::string temp = path + ".tmpXXXXXX";
  const int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot create", temp);
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const absl::Status status = ErrnoError("cannot write", temp);
      close(fd);
      unlink(temp.c_str());
      return status;
    }
    written += n;
  }
  if (fchmod(fd, mode) != 0 || (synced && fsync(fd) != 0)) {
    const absl::Status status = ErrnoError("cannot sync", temp);
    close(fd);
    unlink(temp.c_str());
    return status;
  }
  close(fd);
  if (rename(temp.c_str(), path.c_str()) != 0) {
    const absl::Status status = ErrnoError("cannot rename onto", path);
    unlink(temp.c_str());
    return status;
  }
  return absl::OkStatus();
}

absl::Status SyncFileSystem(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || syncfs(fd) != 0) {
    const int error = errno;
    if (fd >= 0) close(fd);
    return absl::InternalError(
        absl::StrCat("cannot sync the file system of ", path, ": ", strerror(error)));
  }
  close(fd);
  return absl::OkStatus();
}

absl::Status MakeDirectories(const std::string& path, mode_t mode) {
  if (path.empty()) return absl::OkStatus();
  struct stat info;
  if (stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
  }
  const std::string parent = Dirname(path);
  if (!parent.empty() && parent != path) {
    const absl::Status status = MakeDirectories(parent, mode);
    if (!status.ok()) return status;
  }
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return ErrnoError("cannot create directory", path);
  }
  return absl::OkStatus();
}

absl::Status EnsurePrivateDirectory(const std::string& path) {
  const absl::Status made = MakeDirectories(path, 0700);
  if (!made.ok()) return made;
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) return ErrnoError("cannot stat", path);
  if (!S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a directory (a symlink or file?); remove it"));
  }
  if (info.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is owned by uid ", info.st_uid,
                                                      ", not by this user (uid ", geteuid(),
                                                      "); remove it or choose another location"));
  }
  if ((info.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is open to other users (mode ",
                                                      absl::StrFormat("%04o", info.st_mode & 07777),
                                                      "); run: chmod 700 ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> MakeTempDirectory(const std::string& name_template) {
  std::string path = name_template;
  if (mkdtemp(path.data()) == nullptr) return ErrnoError("cannot create", name_template);
  return path;
}

absl::Status RemoveRecursively(const std::string& path) {
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) {
    return errno == ENOENT ? absl::OkStatus() : ErrnoError("cannot stat", path);
  }
  const int result = nftw(
      path.c_str(),
      [](const char* file, const struct stat*, int, struct FTW*) { return ::remove(file); }, 16,
      FTW_DEPTH | FTW_PHYS);
  if (result != 0) return ErrnoError("cannot remove", path);
  return absl::OkStatus();
}

std::string Dirname(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return "";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::StatusOr<std::vector<std::string>> ListShardedFiles(const std::string& root,
                                                          absl::string_view suffix) {
  std::vector<std::string> names;
  DIR* shards = opendir(root.c_str());
  if (shards == nullptr) {
    if (errno == ENOENT) return names;
    return absl::InternalError(absl::StrCat("cannot list ", root, ": ", strerror(errno)));
  }
  while (const dirent* shard = readdir(shards)) {
    if (shard->d_name[0] == '.') continue;
    const std::string shard_path = absl::StrCat(root, "/", shard->d_name);
    DIR* files = opendir(shard_path.c_str());
    if (files == nullptr) continue;  // not a directory: no file of the tree lives there
    while (const dirent* file = readdir(files)) {
      absl::string_view name = file->d_name;
      if (!absl::ConsumeSuffix(&name, suffix)) continue;
      // Skips "." and "..", and a temporary file of an interrupted write.
      if (name.find('.') == absl::string_view::npos) names.emplace_back(name);
    }
    closedir(files);
  }
  closedir(shards);
  return names;
}

}  // namespace kiln
