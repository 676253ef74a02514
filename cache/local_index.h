// The same-host fast path for cache hits: small files beside the object
// directory that let a client find an artifact without asking kilnd.
//
//   <cache>/descriptor              record of kiln.v1.CacheDescriptor:
//                                   versions and the toolchain fingerprint
//                                   of each target kilnd compiles for
//                                   (written at start)
//   <cache>/index/<k[0:2]>/<key>    record of the entry's
//                                   kiln.v1.ArtifactMetadata
//   <cache>/requests/<d[0:2]>/<d>   record of kiln.v1.RequestAlias: the key
//                                   of a request kilnd answered, by its
//                                   RequestDigest (cache/request_key.h)
//
// Every file is one record, so that metadata the loader trusts (signature,
// scratch size) is never read from a damaged file:
//
//   record   := "kiln-index" SP version SP length SP checksum LF payload
//   version  := "1"
//   length   := decimal byte count of payload
//   checksum := 64 lowercase hex digits: SHA-256 of (version SP payload)
//   payload  := the message, binary protobuf
//
// A record that fails any of this (or names another key than its file) is
// never trusted: reading it is DataLoss naming the file (FailedPrecondition
// for a file past kMaxIndexRecordBytes) — callers treat
// that as a miss — and kilnd removes it at start (ReconcileLocalIndex). A
// record of another version is FailedPrecondition, also a miss. Records
// are read with O_NOFOLLOW: a symlink in place of one is refused, not
// followed.
//
// kilnd is the only writer of records (atomic renames, mode 0444). A
// client only sets an index file's modification time, on its process's
// first local hit of the entry (Touch): that hit is a use, which kilnd's
// least-recently-used eviction reads (LastTouched). An index file is
// published after its object file and the store entry exist, and removed
// when the entry is evicted or lost. An alias is published once its key's
// index file exists and only ever names that key; one whose key is gone is
// a miss like any other (kilnd removes such aliases at start). Readers verify the object's digest
// anyway, and fall back to the daemon on any miss or doubt. The cache
// directory is private to the user, as the socket's is.
#ifndef KILN_CACHE_LOCAL_INDEX_H_
#define KILN_CACHE_LOCAL_INDEX_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/artifact.pb.h"

namespace kiln {

inline constexpr int kLocalIndexRecordVersion = 1;
// The largest record file read (and written): an entry's record is a few
// kilobytes. A larger file is refused by its size, before it is read.
inline constexpr int64_t kMaxIndexRecordBytes = 4 << 20;

// This host's identity (/etc/machine-id, else the hostname).
std::string MachineId();

class LocalIndex {
 public:
  explicit LocalIndex(std::string cache_dir) : cache_dir_(std::move(cache_dir)) {}

  absl::Status WriteDescriptor(const kiln::v1::CacheDescriptor& descriptor) const;
  // nullopt when there is none; DataLoss or FailedPrecondition for a record
  // that cannot be trusted (see above).
  absl::StatusOr<std::optional<kiln::v1::CacheDescriptor>> ReadDescriptor() const;

  // Writes the entry's index file unless a regular file is there already
  // (not `synced`: an OS crash may leave it short, which readers refuse).
  absl::Status Publish(const kiln::v1::ArtifactMetadata& metadata, bool synced = true) const;
  absl::Status Remove(const std::string& key) const;
  // Marks the entry used now (its index file's modification time; see
  // above). An error when it has no index file or it is not ours.
  absl::Status Touch(const std::string& key) const;
  // When the entry was last marked used (or published); nullopt without
  // an index file.
  std::optional<absl::Time> LastTouched(const std::string& key) const;
  // LastTouched of every entry with an index file, by one walk of the
  // index: a stat each, most of a second at 100,000 entries (work for a
  // background thread).
  absl::StatusOr<absl::flat_hash_map<std::string, absl::Time>> AllTouched() const;
  // The entry's metadata, nullopt when it has no index file, or an error for
  // a record that cannot be trusted (see above).
  absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> Find(const std::string& key) const;
  // The keys of every index file, in no particular order.
  absl::StatusOr<std::vector<std::string>> Keys() const;

  // Writes the alias of `request_digest` unless a regular file is there.
  // Never synced: kilnd writes it on the reply path of a hit, and an OS
  // crash can only lose it (one RPC for the next process that asks) or
  // leave it short, which readers refuse.
  absl::Status PublishAlias(const std::string& request_digest, const std::string& key) const;
  absl::Status RemoveAlias(const std::string& request_digest) const;
  // The key `request_digest` is an alias of; nullopt when it has none, or
  // an error for a record that cannot be trusted.
  absl::StatusOr<std::optional<std::string>> FindAlias(const std::string& request_digest) const;
  // Removes every index file and alias (clients then ask kilnd).
  absl::Status RemoveAll() const;

  // The request digests of every alias, in no particular order.
  absl::StatusOr<std::vector<std::string>> AliasDigests() const;

  std::string PathFor(const std::string& key) const;
  std::string AliasPathFor(const std::string& request_digest) const;

 private:
  const std::string cache_dir_;
};

}  // namespace kiln

#endif  // KILN_CACHE_LOCAL_INDEX_H_
