#include "common/paths.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

const char* NonEmptyEnv(const char* name) {
  const char* value = getenv(name);
  return (value != nullptr && value[0] != '\0') ? value : nullptr;
}

}  // namespace

std::string DefaultSocketPath() {
  if (const char* socket = NonEmptyEnv("KILN_SOCKET")) return socket;
  if (const char* runtime = NonEmptyEnv("XDG_RUNTIME_DIR")) {
    return absl::StrCat(runtime, "/kiln/kilnd.sock");
  }
  return absl::StrCat("/tmp/kiln-", getuid(), "/kilnd.sock");
}

std::string DefaultCacheDir() {
  if (const char* dir = NonEmptyEnv("KILN_CACHE_DIR")) return dir;
  if (const char* cache = NonEmptyEnv("XDG_CACHE_HOME")) return absl::StrCat(cache, "/kiln");
  if (const char* home = NonEmptyEnv("HOME")) return absl::StrCat(home, "/.cache/kiln");
  return absl::StrCat("/tmp/kiln-cache-", getuid());
}

bool DaemonLockHeld(const std::string& socket_path) {
  const std::string lock_path = socket_path + ".lock";
  const int fd = open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  const bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return held;
}

}  // namespace kiln
