#include "common/trust.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

std::string Mode(mode_t mode) { return absl::StrFormat("%04o", mode & 07777); }

std::string Uids(const std::vector<uid_t>& trusted) { return absl::StrJoin(trusted, ", "); }

// The rule for one file, directory or symlink. `ancestor`: a directory
// above the path being checked, which may be world-writable when sticky.
absl::Status CheckOne(const struct stat& info, const std::string& component,
                      const std::string& what, const std::string& path, bool ancestor,
                      const std::vector<uid_t>& trusted) {
  const std::string subject = component == path
                                  ? absl::StrCat(what, " ", path)
                                  : absl::StrCat(what, " ", path, ": its directory ", component);
  if (std::find(trusted.begin(), trusted.end(), info.st_uid) == trusted.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing ", subject, " is owned by uid ", info.st_uid,
                     ", which is not this user or root (trusted uids: ", Uids(trusted),
                     "); someone else may have planted it. Remove it or choose another location"));
  }
  if (S_ISLNK(info.st_mode)) {
    if (!ancestor) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing ", subject, " is a symlink; Kiln opens its files without following them"));
    }
    return absl::OkStatus();  // where it leads is checked too
  }
  const bool sticky_directory = S_ISDIR(info.st_mode) && (info.st_mode & S_ISVTX) != 0;
  if ((info.st_mode & 022) != 0 && !(ancestor && sticky_directory)) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing ", subject, " is writable by other users (mode ", Mode(info.st_mode),
                     "); run: chmod go-w ", component));
  }
  return absl::OkStatus();
}

// `path` and every directory above it, as written (lstat: symlinks are
// judged by who owns them; where they lead is checked separately).
absl::Status CheckLexically(const std::string& path, const std::string& what,
                            const std::vector<uid_t>& trusted) {
  std::string component = path;
  bool ancestor = false;
  while (true) {
    struct stat info;
    if (lstat(component.c_str(), &info) != 0) {
      const std::string message =
          absl::StrCat("cannot check ", what, " ", component, ": ", strerror(errno));
      return errno == ENOENT ? absl::NotFoundError(message)
                             : absl::FailedPreconditionError(message);
    }
    RETURN_IF_ERROR(CheckOne(info, component, what, path, ancestor, trusted));
    if (component == "/") return absl::OkStatus();
    const size_t slash = component.find_last_of('/');
    component = slash == 0 ? "/" : component.substr(0, slash);
    ancestor = true;
  }
}

std::string Absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return absl::StrCat(cwd, "/", path);
}

// Drops "." components, doubled and trailing slashes (not "..": a symlink
// may stand before it, so only realpath can resolve it).
std::string Normalize(const std::string& path) {
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part != ".") parts.emplace_back(part);
  }
  return "/" + absl::StrJoin(parts, "/");
}

}  // namespace

absl::StatusOr<std::vector<uid_t>> TrustedUids() {
  std::vector<uid_t> uids = {geteuid()};
  if (geteuid() != 0) uids.push_back(0);
  const char* shared = getenv("KILN_DAEMON_UID");
  if (shared != nullptr && shared[0] != '\0') {
    uint32_t uid;
    if (!absl::SimpleAtoi(shared, &uid)) {
      return absl::InvalidArgumentError(
          absl::StrCat("KILN_DAEMON_UID=", shared, " is not a numeric uid"));
    }
    if (std::find(uids.begin(), uids.end(), uid) == uids.end()) uids.push_back(uid);
  }
  return uids;
}

absl::Status CheckTrustedPath(const std::string& path, const std::string& what,
                              const std::vector<uid_t>& trusted) {
  const std::string absolute = Normalize(Absolute(path));
  RETURN_IF_ERROR(CheckLexically(absolute, what, trusted));
  char resolved[PATH_MAX];
  if (realpath(absolute.c_str(), resolved) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot resolve ", what, " ", path, ": ", strerror(errno)));
  }
  if (absolute == resolved) return absl::OkStatus();
  return CheckLexically(resolved, what, trusted);  // where the symlinks lead
}

absl::Status CheckTrustedDescriptor(int fd, const std::string& path,
                                    const std::vector<uid_t>& trusted) {
  struct stat info;
  if (fstat(fd, &info) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot stat ", path, ": ", strerror(errno)));
  }
  return CheckOne(info, path, "file", path, /*ancestor=*/false, trusted);
}

absl::StatusOr<int> OpenTrustedBelow(const std::string& root, const std::string& relative,
                                     const std::vector<uid_t>& trusted) {
  int fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open ", root, ": ", strerror(errno)));
  }
  std::string path = root;
  const std::vector<std::string> parts = absl::StrSplit(relative, '/', absl::SkipEmpty());
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    if (parts[i] == "..") {
      close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat("refusing to open ", relative, " below ", root, ": it climbs out with .."));
    }
    absl::StrAppend(&path, "/", parts[i]);
    const int next = openat(fd, parts[i].c_str(),
                            // O_NONBLOCK: a FIFO planted in place of a file must not hang the open.
                            O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? O_NONBLOCK : O_DIRECTORY));
    const int error = errno;
    close(fd);
    if (next < 0) {
      const std::string message = absl::StrCat("cannot open ", path, ": ", strerror(error));
      if (error == ENOENT) return absl::NotFoundError(message);
      if (error == ELOOP || error == ENOTDIR) {
        return absl::FailedPreconditionError(absl::StrCat(
            "refusing ", path, ": a symlink where Kiln expects a ", last ? "file" : "directory"));
      }
      return absl::FailedPreconditionError(message);
    }
    fd = next;
    absl::Status trusted_here = CheckTrustedDescriptor(fd, path, trusted);
    struct stat info;
    if (trusted_here.ok() && last && (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode))) {
      trusted_here =
          absl::FailedPreconditionError(absl::StrCat("refusing ", path, ": not a regular file"));
    }
    if (!trusted_here.ok()) {
      close(fd);
      return trusted_here;
    }
  }
  return fd;
}

}  // namespace kiln
