#include "common/paths.h"

#include <stdlib.h>
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

}  // namespace kiln
