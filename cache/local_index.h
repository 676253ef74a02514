// The same-host fast path for cache hits: small files beside the object
// directory that let a client find an artifact without asking kilnd.
//
//   <cache>/descriptor              kiln.v1.CacheDescriptor: versions and the
//                                   toolchain kilnd compiles with (at start)
//   <cache>/index/<k[0:2]>/<key>    kiln.v1.ArtifactMetadata of an entry
//
// kilnd is the only writer (atomic renames, mode 0444); an index file is
// published after its object file and the store entry exist, and removed
// when the entry is evicted. Readers verify the object's digest anyway, and
// fall back to the daemon on any miss or doubt. The cache directory is
// private to the user, as the socket's is.
#ifndef KILN_CACHE_LOCAL_INDEX_H_
#define KILN_CACHE_LOCAL_INDEX_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/artifact.pb.h"

namespace kiln {

// This host's identity (/etc/machine-id, else the hostname).
std::string MachineId();

class LocalIndex {
 public:
  explicit LocalIndex(std::string cache_dir) : cache_dir_(std::move(cache_dir)) {}

  absl::Status WriteDescriptor(const kiln::v1::CacheDescriptor& descriptor) const;
  absl::StatusOr<std::optional<kiln::v1::CacheDescriptor>> ReadDescriptor() const;

  // Writes the entry's index file unless it is there already.
  absl::Status Publish(const kiln::v1::ArtifactMetadata& metadata) const;
  absl::Status Remove(const std::string& key) const;
  absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> Find(const std::string& key) const;

 private:
  std::string PathFor(const std::string& key) const;
  const std::string cache_dir_;
};

}  // namespace kiln

#endif  // KILN_CACHE_LOCAL_INDEX_H_
