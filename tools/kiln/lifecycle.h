// `kiln status` and `kiln stop`: is a kilnd running, and stop it.
//
// Neither ever starts a daemon (whatever --start says). Exit codes, as
// LSB init scripts and systemctl have them: 0 running (status) or stopped
// (stop), 3 when no kilnd answers on the socket, 1 for anything else.
//
// Who may stop kilnd: whoever can connect to its socket, which kilnd makes
// private to its user (and root). A daemon of another uid that this user
// trusts through KILN_DAEMON_UID (shared on purpose, docs/SECURITY.md)
// serves this user but is not this user's to stop: `kiln stop` refuses it
// unless run as root or as that uid.
#ifndef KILN_TOOLS_KILN_LIFECYCLE_H_
#define KILN_TOOLS_KILN_LIFECYCLE_H_

#include <ostream>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/client.h"

namespace kiln {

inline constexpr int kExitNotRunning = 3;

// `status` carrying the exit code the CLI should end with.
absl::Status WithExitCode(absl::Status status, int exit_code);
// 0 for OK; the code WithExitCode attached; else 1.
int ExitCodeOf(const absl::Status& status);

// Prints who answers on `options.socket_path` (version, pid, socket, cache
// directory, uptime, entries and bytes) as text or JSON. Not running:
// Unavailable "no kilnd on SOCKET" with exit code 3 (with `json`, also
// {"running": false, ...} on `out`).
absl::Status PrintDaemonStatus(ClientOptions options, bool json, std::ostream& out);

// Asks kilnd to drain and exit (the Stop RPC), then waits up to `wait` for
// the process to be gone, and prints "stopped kilnd (pid N)". Unavailable
// with exit code 3 when none runs; FailedPrecondition for a daemon of
// another uid; DeadlineExceeded when it is still draining after `wait`.
absl::Status StopDaemon(ClientOptions options, absl::Duration wait, std::ostream& out);

}  // namespace kiln

#endif  // KILN_TOOLS_KILN_LIFECYCLE_H_
