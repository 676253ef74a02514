// File helpers shared by the store, the compiler and the CLI.
#ifndef KILN_COMMON_FILES_H_
#define KILN_COMMON_FILES_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

absl::StatusOr<std::string> ReadFile(const std::string& path);

// Reads a file holding a secret (a private key, a password) that only its
// owner may read, as ssh insists for its keys: FailedPrecondition naming
// `what` and the fix when its group or others have any access.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view what);

// Writes `bytes` to a temporary file in the same directory, fsyncs it
// (unless not `synced`: an OS crash may then leave the file empty or short),
// sets `mode`, and renames it over `path`: readers see the old file or the
// whole new one, never a partial write.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes, mode_t mode,
                                 bool synced = true);

// Flushes every write to the file system holding `path` to disk (syncfs):
// one call for many files written without `synced`.
absl::Status SyncFileSystem(const std::string& path);

// mkdir -p with `mode` for the directories it creates.
absl::Status MakeDirectories(const std::string& path, mode_t mode);

// Creates `path` (mode 0700) if missing, then verifies that it is a real
// directory (not a symlink) owned by this user and closed to everyone else.
// FailedPrecondition names the problem otherwise: someone may have
// pre-created it to intercept the socket.
absl::Status EnsurePrivateDirectory(const std::string& path);

// Creates a fresh directory from a mkdtemp template ("/tmp/kilnXXXXXX").
absl::StatusOr<std::string> MakeTempDirectory(const std::string& name_template);

// rm -rf. Errors other than "does not exist" are returned.
absl::Status RemoveRecursively(const std::string& path);

// The directory part of `path` ("" when there is none).
std::string Dirname(const std::string& path);

// The files of a two-level tree (`root/<shard>/<name><suffix>`, as the
// cache's index and object directories are): their names without the
// suffix, in no particular order. Names with another '.' (a temporary file
// of an interrupted write) are skipped; a missing root is empty.
absl::StatusOr<std::vector<std::string>> ListShardedFiles(const std::string& root,
                                                          absl::string_view suffix = "");

}  // namespace kiln

#endif  // KILN_COMMON_FILES_H_
