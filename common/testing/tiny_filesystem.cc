#include "common/testing/tiny_filesystem.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

absl::Status Errno(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TinyFilesystem>> TinyFilesystem::Mount(const std::string& dir,
                                                                      size_t bytes) {
  if (unshare(CLONE_NEWNS) != 0) return Errno("unshare(CLONE_NEWNS)");
  // Without this, a mount under a shared mount (systemd's default for /)
  // would propagate back to the machine's namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return Errno("making / private");
  }
  const std::string options = absl::StrCat("size=", bytes, ",mode=0700");
  if (mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) != 0) {
    return Errno(absl::StrCat("mounting a tmpfs on ", dir));
  }
  return std::unique_ptr<TinyFilesystem>(new TinyFilesystem(dir));
}

TinyFilesystem::~TinyFilesystem() { umount2(dir_.c_str(), MNT_DETACH); }

absl::Status TinyFilesystem::FillLeaving(size_t free_bytes) {
  const int fd = open(filler().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("creating the filler");
  const std::string page(4096, 'x');
  while (write(fd, page.data(), page.size()) > 0) {
  }
  const int error = errno;
  struct stat info;
  const bool truncated = fstat(fd, &info) == 0 && static_cast<size_t>(info.st_size) >= free_bytes &&
                         ftruncate(fd, info.st_size - free_bytes) == 0;
  close(fd);
  if (error != ENOSPC) {
    return absl::InternalError(absl::StrCat("filling ended with ", strerror(error)));
  }
  if (!truncated) return absl::InternalError("cannot free space in the filler");
  return absl::OkStatus();
}

absl::Status TinyFilesystem::Empty() {
  if (unlink(filler().c_str()) != 0) return Errno("removing the filler");
  return absl::OkStatus();
}

}  // namespace kiln
