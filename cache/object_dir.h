// The object directory: read-only, content-addressed shared objects that
// clients dlopen directly (same host: zero copy, pages shared between
// worker processes).
//
//   <root>/<first 2 hex digits>/<digest>.so    mode 0444
//
// A cache of the store's blobs: any file can be deleted and is rebuilt from
// the store on the next hit. Files are written to a temporary name and
// renamed, so a reader never sees a partial object.
#ifndef KILN_CACHE_OBJECT_DIR_H_
#define KILN_CACHE_OBJECT_DIR_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

class ObjectDirectory {
 public:
  explicit ObjectDirectory(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  std::string PathFor(const std::string& digest) const;
  // The object's path below the cache directory (clients open it from there).
  static std::string RelativePathFor(const std::string& digest);
  bool Contains(const std::string& digest) const;
  // Writes the object for `digest` unless it is already there — or always,
  // with `replace` (fresh bytes heal a damaged file of the same name).
  // Not `synced` (WriteFileAtomically): an OS crash may leave it short,
  // which clients catch by its digest before they load it.
  absl::Status Write(const std::string& digest, absl::string_view bytes, bool replace = false,
                     bool synced = true) const;
  absl::Status Remove(const std::string& digest) const;
  // The digests of every object file, in no particular order.
  absl::StatusOr<std::vector<std::string>> Digests() const;

 private:
  const std::string root_;
};

}  // namespace kiln

#endif  // KILN_CACHE_OBJECT_DIR_H_
