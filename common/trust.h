// Whose files Kiln may trust.
//
// kilnd hands out native code: whoever can write the socket's directory,
// the cache directory, an index record or an object file decides what a
// client dlopens, and so runs code in it. Like OpenSSH's StrictModes and
// ssh-agent, Kiln therefore trusts a path only when it, and every directory
// above it, can be changed by nobody but this user, root, or a uid the user
// named for a shared daemon (KILN_DAEMON_UID). docs/SECURITY.md has the
// threat model.
#ifndef KILN_COMMON_TRUST_H_
#define KILN_COMMON_TRUST_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln {

// The uids whose files and daemons this process trusts: its effective uid,
// root, and $KILN_DAEMON_UID when set (a shared daemon run by a service
// account). InvalidArgument when KILN_DAEMON_UID is not a number.
absl::StatusOr<std::vector<uid_t>> TrustedUids();

// OK when nobody outside `trusted` can change what `path` names: `path`
// (which must exist) and each directory above it are owned by a trusted
// uid and writable by no one else — except that an ancestor with the
// sticky bit (/tmp) may be world-writable, since others cannot rename or
// remove what they do not own there. `path` itself may not be a symlink;
// a symlink above it is checked and so is where it leads. `what` names the
// path in the error ("cache directory"), which says which component failed
// and how to fix it. FailedPrecondition when untrusted; NotFound when
// missing.
absl::Status CheckTrustedPath(const std::string& path, const std::string& what,
                              const std::vector<uid_t>& trusted);

// One check of a file or directory already opened (fstat of the descriptor
// being read, so that what was checked is what is used).
absl::Status CheckTrustedDescriptor(int fd, const std::string& path,
                                    const std::vector<uid_t>& trusted);

// Opens `relative` below the trusted directory `root` one component at a
// time with O_NOFOLLOW, checking each directory and the file with
// CheckTrustedDescriptor: no symlink can lead the walk out of `root`.
// Returns the file's descriptor (O_RDONLY | O_CLOEXEC); the caller closes it.
absl::StatusOr<int> OpenTrustedBelow(const std::string& root, const std::string& relative,
                                     const std::vector<uid_t>& trusted);

}  // namespace kiln

#endif  // KILN_COMMON_TRUST_H_
