// What a compile may use, and the errors for running out of it: disk space
// in the compiler's temporary directory, and the compiler's memory. Both are
// ResourceExhausted: compiling the same source again, in a worker or in
// clang++, would fail the same way, so callers neither retry nor fall back,
// and the message says which resource ran out and where.
#ifndef KILN_CODEGEN_COMPILE_RESOURCE_LIMITS_H_
#define KILN_CODEGEN_COMPILE_RESOURCE_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln {

// RLIMIT_AS of every compiler process (the worker, clang++ and the cc1 and
// lld it starts). A kernel compiles in ~200 MB of address space, the
// libraries mapped; the cap only stops a pathological source from taking
// the machine down with it.
inline constexpr uint64_t kDefaultCompileMemoryBytes = uint64_t{4} << 30;

// ResourceExhausted "no space left on device in <dir>".
absl::Status NoSpaceError(const std::string& dir);

// ResourceExhausted naming the limit: "compile exceeded the compiler's
// memory limit of 4 GiB (RLIMIT_AS)".
absl::Status MemoryLimitError(uint64_t limit_bytes);

// ENOSPC or EDQUOT.
bool IsNoSpaceErrno(int error);

// Whether a compiler's or linker's output reports a full disk or quota
// (LLVM prints strerror's text, e.g. "IO failure on output stream: No space
// left on device").
bool MentionsNoSpace(absl::string_view output);

// Whether a compiler's output reports a failed allocation ("LLVM ERROR: out
// of memory", or the loader unable to map a library).
bool MentionsOutOfMemory(absl::string_view output);

// Whether the file system holding `dir` has little space left for this
// user. lld writes its output through a shared mapping, so on a full disk it
// dies of SIGBUS instead of reporting ENOSPC; this tells that SIGBUS from a
// crash. False when statvfs fails.
bool IsNearlyFull(const std::string& dir);

}  // namespace kiln

#endif  // KILN_CODEGEN_COMPILE_RESOURCE_LIMITS_H_
