// The daemon's ArtifactStore, in RocksDB.
//
// On-disk layout (one RocksDB database, column families):
//   "default"     "format" -> decimal kStoreFormatVersion (checked at open)
//   "entries"     cache key (64 hex) -> kiln.v1.ArtifactMetadata (binary proto)
//   "blobs"       SHA-256 digest (64 hex) -> shared-object bytes
//   "quarantine"  digest -> bytes of a blob that failed its digest check, or
//                 the read error of a blob that could not be read;
//                 "entry:" key -> the entry's bytes or read error
// An entry and its blob are written in one WriteBatch (synced), so a crash
// leaves both or neither. Every blob read re-hashes the bytes against the
// digest (RocksDB's block checksums catch media errors; this catches
// everything else).
//
// Damage, and why the store survives it (a cache can always recompile):
// - A block that fails its checksum (or a read error) on a point read: the
//   key is deleted (a tombstone in the memtable hides the damaged block from
//   later reads) and recorded in "quarantine"; the read is a miss.
// - A damaged block met while iterating (List, Totals, Evict's sharing
//   check): the iteration skips past it and reports it, never fails whole.
// - WAL: kPointInTimeRecovery. Writes are synced, so the log's tail is
//   never torn by a crash and any corruption is damage; replay stops before
//   it and the store opens at a consistent prefix (the entries after it are
//   lost and get recompiled; ReconcileLocalIndex drops their index files).
//   kAbsoluteConsistency would refuse to open, kTolerateCorruptedTailRecords
//   too for damage before the tail, and kSkipAnyCorruptedRecords could apply
//   an Evict without the Put before it or the other way round.
// - A database that cannot open because of corruption (MANIFEST, CURRENT, a
//   table's footer): Open moves the directory aside to
//   "<dir>.corrupt-<unix seconds>" (kept for inspection), logs an error and
//   starts empty.
// paranoid_checks stays on: it is what makes a failed WAL write or sync
// stop later writes (fail closed) rather than trust a log in an unknown state.
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
  // Opens (creating if missing) the database in `directory`; a damaged one
  // is moved aside and replaced by an empty one (see above).
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

  // Where Open moved a damaged database, or empty when it opened as it was.
  const std::string& moved_aside() const { return moved_aside_; }

  // Fault injection: replace a blob's bytes without updating its digest, or
  // an entry's bytes with anything.
  absl::Status OverwriteBlobForTesting(const std::string& digest, absl::string_view bytes);
  absl::Status OverwriteEntryForTesting(const std::string& key, absl::string_view bytes);
  // Writes the memtables to table files, so a test can damage one.
  absl::Status FlushForTesting();

 private:
  RocksDbStore() = default;
  static absl::StatusOr<std::unique_ptr<RocksDbStore>> OpenOnce(const std::string& directory);

  // Takes `key` of `family` out of service after `reason` (a damaged read),
  // recording it in "quarantine" under `quarantine_key` with `kept` bytes.
  absl::Status Quarantine(rocksdb::ColumnFamilyHandle* family, const std::string& key,
                          const std::string& quarantine_key, absl::string_view kept,
                          const std::string& reason);
  // Calls `visit` on every readable key/value of `family` in order, skipping
  // damaged blocks; returns how many stretches were skipped. Errors only for
  // other failures.
  absl::StatusOr<int64_t> Scan(
      rocksdb::ColumnFamilyHandle* family,
      const std::function<void(const rocksdb::Slice& key, const rocksdb::Slice& value)>& visit);

  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* entries_ = nullptr;
  rocksdb::ColumnFamilyHandle* blobs_ = nullptr;
  rocksdb::ColumnFamilyHandle* quarantine_ = nullptr;
  rocksdb::ColumnFamilyHandle* default_ = nullptr;
  std::string moved_aside_;
};

}  // namespace kiln

#endif  // KILN_CACHE_ROCKSDB_STORE_H_
