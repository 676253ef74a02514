// The daemon's ArtifactStore, in RocksDB.
//
// On-disk layout (one RocksDB database, column families):
//   "default"     "format" -> decimal kStoreFormatVersion (checked at open)
//   "entries"     cache key (64 hex) -> kiln.v1.ArtifactMetadata (binary proto)
//   "blobs"       SHA-256 digest (64 hex) -> shared-object bytes
//   "quarantine"  digest -> bytes of a blob that failed its digest check
// An entry and its blob are written in one WriteBatch (synced), so a crash
// leaves both or neither. Every blob read re-hashes the bytes against the
// digest (RocksDB's block checksums catch media errors; this catches
// everything else).
#ifndef KILN_CACHE_ROCKSDB_STORE_H_
#define KILN_CACHE_ROCKSDB_STORE_H_

#include <memory>
#include <string>

#include "cache/store.h"
#include "rocksdb/db.h"

namespace kiln {

inline constexpr int kStoreFormatVersion = 1;

class RocksDbStore : public ArtifactStore {
 public:
  // Opens (creating if missing) the database in `directory`.
  // FailedPrecondition when another process holds it open or its format
  // version differs.
  static absl::StatusOr<std::unique_ptr<RocksDbStore>> Open(const std::string& directory);
  ~RocksDbStore() override;

  absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> Lookup(const std::string& key) override;
  absl::StatusOr<std::optional<std::string>> ReadBlob(const std::string& digest) override;
  absl::Status Put(const kiln::v1::ArtifactMetadata& metadata, absl::string_view blob) override;
  absl::StatusOr<std::vector<kiln::v1::ArtifactMetadata>> List() override;
  absl::StatusOr<std::vector<std::string>> KeysWithPrefix(const std::string& prefix,
                                                         int limit) override;
  absl::StatusOr<std::optional<std::string>> Evict(const std::string& key) override;
  absl::StatusOr<StoreTotals> Totals() override;

  // Replaces a blob's bytes without updating its digest (fault injection).
  absl::Status OverwriteBlobForTesting(const std::string& digest, absl::string_view bytes);

 private:
  RocksDbStore() = default;

  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* entries_ = nullptr;
  rocksdb::ColumnFamilyHandle* blobs_ = nullptr;
  rocksdb::ColumnFamilyHandle* quarantine_ = nullptr;
  rocksdb::ColumnFamilyHandle* default_ = nullptr;
};

}  // namespace kiln

#endif  // KILN_CACHE_ROCKSDB_STORE_H_
