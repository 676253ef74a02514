#include "codegen/compile/resource_limits.h"

#include <errno.h>
#include <sys/statvfs.h>

#include <initializer_list>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

// Below this, a SIGBUS in the linker is taken to be the disk. The failed
// output is removed before the crash is seen (LLVM removes its temporary
// files on signals), so the space left is not zero but about what the
// output got: far below this for any kernel.
constexpr uint64_t kNearlyFullBytes = uint64_t{16} << 20;

std::string FormatBytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30) && bytes % (uint64_t{1} << 30) == 0) {
    return absl::StrCat(bytes >> 30, " GiB");
  }
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) {
    return absl::StrCat(bytes >> 20, " MiB");
  }
  return absl::StrCat(bytes, " bytes");
}

bool ContainsAny(absl::string_view text, std::initializer_list<absl::string_view> needles) {
  for (absl::string_view needle : needles) {
    if (absl::StrContains(text, needle)) return true;
  }
  return false;
}

}  // namespace

absl::Status NoSpaceError(const std::string& dir) {
  return absl::ResourceExhaustedError(absl::StrCat("no space left on device in ", dir));
}

absl::Status MemoryLimitError(uint64_t limit_bytes) {
  return absl::ResourceExhaustedError(
      absl::StrCat("compile exceeded the compiler's memory limit of ", FormatBytes(limit_bytes),
                   " (RLIMIT_AS)"));
}

bool IsNoSpaceErrno(int error) { return error == ENOSPC || error == EDQUOT; }

bool MentionsNoSpace(absl::string_view output) {
  return ContainsAny(output, {"No space left on device", "Disk quota exceeded"});
}

bool MentionsOutOfMemory(absl::string_view output) {
  return ContainsAny(output,
                     {"LLVM ERROR: out of memory", "Allocation failed", "std::bad_alloc",
                      "Cannot allocate memory", "failed to map segment from shared object"});
}

bool IsNearlyFull(const std::string& dir) {
  struct statvfs info;
  if (statvfs(dir.c_str(), &info) != 0) return false;
  return static_cast<uint64_t>(info.f_bavail) * info.f_frsize < kNearlyFullBytes;
}

}  // namespace kiln
