// Tests only: a real, tiny file system to fill up, for the disk-full paths
// of the compilers (a fault-injection seam would miss lld's SIGBUS on a full
// mapped output, which is what a full disk does to a worker).
//
// The tmpfs is mounted in a private mount namespace of the calling thread,
// so it is invisible to the rest of the machine and goes away with the
// process; threads and processes that thread starts afterwards (a
// WorkerCompiler's launcher thread, its workers, clang++) see it. Needs
// CAP_SYS_ADMIN: tests and CI run as root.
#ifndef KILN_COMMON_TESTING_TINY_FILESYSTEM_H_
#define KILN_COMMON_TESTING_TINY_FILESYSTEM_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kiln {

class TinyFilesystem {
 public:
  // Mounts a tmpfs of `bytes` at `dir` (an existing empty directory).
  // FailedPrecondition with the reason when this process may not (not root,
  // or a sandbox without CAP_SYS_ADMIN): the caller skips its test.
  static absl::StatusOr<std::unique_ptr<TinyFilesystem>> Mount(const std::string& dir,
                                                               size_t bytes);
  ~TinyFilesystem();  // unmounts

  // Fills the file system with a filler file, then frees `free_bytes` of
  // it again (a multiple of the 4 KiB page).
  absl::Status FillLeaving(size_t free_bytes);
  // Removes the filler.
  absl::Status Empty();

 private:
  explicit TinyFilesystem(std::string dir) : dir_(std::move(dir)) {}
  std::string filler() const { return dir_ + "/filler"; }

  const std::string dir_;
};

}  // namespace kiln

#endif  // KILN_COMMON_TESTING_TINY_FILESYSTEM_H_
