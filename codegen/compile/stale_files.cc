#include "codegen/compile/stale_files.h"

#include <dirent.h>

#include <vector>

#include "absl/strings/match.h"
#include "common/files.h"
#include "common/logging.h"

namespace kiln {

int RemoveStaleEntries(const std::string& root, absl::string_view prefix) {
  std::vector<std::string> stale;
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) return 0;  // no root yet: nothing left behind
  while (const dirent* entry = readdir(dir)) {
    if (absl::StartsWith(entry->d_name, prefix)) stale.push_back(root + "/" + entry->d_name);
  }
  closedir(dir);
  int removed = 0;
  for (const std::string& path : stale) {
    const absl::Status status = RemoveRecursively(path);
    if (status.ok()) {
      ++removed;
    } else {
      KILN_LOG(WARNING) << "cannot remove a dead compile's files: " << status;
    }
  }
  if (removed > 0) KILN_LOG(INFO) << "removed " << removed << " dead compiles' files from " << root;
  return removed;
}

}  // namespace kiln
