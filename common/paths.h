// Where kilnd listens and keeps its cache. Daemon, client and CLI all resolve
// locations here, so KILN_SOCKET and KILN_CACHE_DIR mean the same to each.
#ifndef KILN_COMMON_PATHS_H_
#define KILN_COMMON_PATHS_H_

#include <string>

namespace kiln {

// $KILN_SOCKET, else $XDG_RUNTIME_DIR/kiln/kilnd.sock, else
// /tmp/kiln-$UID/kilnd.sock. The socket's directory must be private to this
// user (see EnsurePrivateDirectory).
std::string DefaultSocketPath();

// $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln.
std::string DefaultCacheDir();

// Whether some kilnd holds the lock beside `socket_path` (`<socket>.lock`:
// from before it listens until it exits, draining included).
bool DaemonLockHeld(const std::string& socket_path);

}  // namespace kiln

#endif  // KILN_COMMON_PATHS_H_
