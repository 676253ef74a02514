// The daemon's ArtifactStore, in RocksDB.
//
// On-disk layout (one RocksDB database, column families):
//   "default"     "format" -> decimal kStoreFormatVersion (checked at open)
//   "entries"     cache key (64 hex) -> kiln.v1.ArtifactMetadata (binary proto)
//   "blobs"       SHA-256 digest (64 hex) -> shared-object bytes
//   "quarantine"  digest -> bytes of a blob that failed its digest check, or
//                 the read error of a blob that could not be read;
//                 "entry:" key -> the entry's bytes or read error
//   "usage"       cache key -> kiln.v1.StoredUsage (its blob, size, last
//                 use, pin, and what a listing shows): what eviction and
//                 `kiln ls` read, a few hundred bytes an entry
// The totals (entries, the blobs they reference and those bytes) and each
// blob's reference count are kept in memory, loaded from "usage" at open
// and after a heal, and updated by every write: a stats call reads no
// store data, and an eviction checks sharing without a scan. Writes that
// read before they write (Put, Evict, RecordUse, SetPinned) are serialized.
// Format 1 stores (no "usage") and format 2 stores (usage records without
// the listing's fields) are upgraded at open, once.
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
// - A damaged table file must not stay in the LSM tree: a compaction that
//   includes it fails, and with paranoid_checks RocksDB then stops every
//   write (an unrecoverable background error that a restart brings back,
//   since the file comes back with it). So any damage the store meets — a
//   point read, an iteration skipping a block, a write or compaction
//   failing with Corruption — makes it heal once the operation is done:
//   it copies every readable key of every family into a fresh database
//   beside this one ("<dir>.rebuild", skipping damaged blocks as Scan
//   does), closes this one, moves it aside as below, and opens the copy in
//   its place. The keys of damaged blocks are lost (logged; the entries are
//   compiled again, ReconcileLocalIndex drops their index records at the
//   next start). Dropping only the damaged file is not enough in general:
//   DeleteFile takes only a bottommost or oldest level-0 file, and
//   DeleteFilesInRange no level-0 file at all, where fresh tables live. A
//   write that failed on such damage is retried once after the heal.
//   Operations hold a shared lock; a heal holds it exclusively.
// - A database that cannot open because of corruption (MANIFEST, CURRENT, a
//   table's footer or other metadata block): Open runs RocksDB's repair,
//   which writes a new MANIFEST from every table file that reads whole and
//   from the WAL, and moves the rest (a damaged table, the old MANIFEST and
//   WAL) to "<dir>/lost"; Open moves that to "<dir>.corrupt-<unix ms>" and
//   keeps the entries that are whole (KeepCompleteEntries). So only what a
//   damaged file held is lost. The repair learns a family from its table
//   files and drops WAL records of a family it did not learn, so a new
//   store's first write flushes; and it replays every WAL file, so every
//   flush takes every family (atomic_flush): no WAL file outlives a table
//   holding its records. Only when the repair fails does Open move the
//   whole directory to "<dir>.corrupt-<unix ms>" and start empty.
// - Copies of damaged databases ("<dir>.corrupt-*", a heal's or a
//   repair's) are kept for inspection, the newest
//   Options::max_corrupt_copies of them: older ones are removed at Open
//   and whenever a new one is made.
// - A heal or repair keeps each family's readable keys on their own: an
//   entry may come out without its blob or usage record, or a usage record
//   or blob without its entry. KeepCompleteEntries drops those, so the
//   totals and listings count what a lookup finds.
// paranoid_checks stays on: it is what makes a failed WAL write or sync
// stop later writes (fail closed) rather than trust a log in an unknown state.
#ifndef KILN_CACHE_ROCKSDB_STORE_H_
#define KILN_CACHE_ROCKSDB_STORE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "cache/store.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"

namespace kiln {

inline constexpr int kStoreFormatVersion = 3;

struct RocksDbStoreOptions {
  // Copies of damaged databases kept beside the store (see above).
  int max_corrupt_copies = 2;
};

class RocksDbStore : public ArtifactStore {
 public:
  // Opens (creating if missing) the database in `directory`; a damaged one
  // is repaired, or when it cannot be, moved aside and replaced by an empty
  // one (see above).
  // FailedPrecondition when another process holds it open or its format
  // version differs.
  using Options = RocksDbStoreOptions;
  static absl::StatusOr<std::unique_ptr<RocksDbStore>> Open(const std::string& directory,
                                                            const Options& options = {});
  ~RocksDbStore() override;

  // `base` with the table options of the families read by key on every hit
  // and miss ("entries", "usage"): a block cache of their own and a bloom
  // filter. Each call makes a new cache. (//tools/bench:store reads the
  // entries with RocksDB's own Get through these.)
  static rocksdb::ColumnFamilyOptions LookupFamilyOptions(rocksdb::ColumnFamilyOptions base);

  absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> Lookup(const std::string& key) override;
  absl::StatusOr<std::optional<std::string>> ReadBlob(const std::string& digest) override;
  absl::Status Put(const kiln::v1::ArtifactMetadata& metadata, absl::string_view blob,
                   bool synced = true) override;
  absl::Status PutAll(
      const std::vector<std::pair<kiln::v1::ArtifactMetadata, std::string>>& entries) override;
  absl::Status PutBlob(const std::string& digest, absl::string_view blob) override;
  absl::Status PutEntries(
      const std::vector<std::pair<kiln::v1::ArtifactMetadata, int64_t>>& entries) override;
  absl::StatusOr<std::vector<kiln::v1::ArtifactMetadata>> List() override;
  absl::StatusOr<std::vector<ListedEntry>> ListAfter(const std::string& after_key,
                                                     int limit) override;
  absl::StatusOr<std::vector<std::string>> KeysWithPrefix(const std::string& prefix,
                                                          int limit) override;
  absl::StatusOr<std::optional<std::string>> Evict(const std::string& key,
                                                   bool synced = true) override;
  absl::StatusOr<StoreTotals> Totals() override;
  absl::Status RecordUse(const std::string& key, absl::Time when) override;
  absl::Status SetPinned(const std::string& key, bool pinned) override;
  absl::StatusOr<std::vector<EntryUsage>> Usage() override;

  // Where Open moved a damaged database or what its repair set aside, or
  // empty when it opened as it was.
  const std::string& moved_aside() const { return moved_aside_; }

  // Fault injection: replace a blob's bytes without updating its digest, or
  // an entry's bytes with anything.
  absl::Status OverwriteBlobForTesting(const std::string& digest, absl::string_view bytes);
  absl::Status OverwriteEntryForTesting(const std::string& key, absl::string_view bytes);
  // Writes the memtables to table files, so a test can damage one.
  absl::Status FlushForTesting();
  // Compacts every family into the last level (a compaction that meets a
  // damaged table heals the store first, see above).
  absl::Status CompactForTesting();
  // How many times the store rebuilt itself around damage.
  int heals() const { return heals_.load(); }

 private:
  // An open database and its families.
  struct Database {
    std::unique_ptr<rocksdb::DB> db;
    rocksdb::ColumnFamilyHandle* default_family = nullptr;
    rocksdb::ColumnFamilyHandle* entries = nullptr;
    rocksdb::ColumnFamilyHandle* blobs = nullptr;
    rocksdb::ColumnFamilyHandle* quarantine = nullptr;
    rocksdb::ColumnFamilyHandle* usage = nullptr;
    std::vector<rocksdb::ColumnFamilyHandle*> families() const {
      return {default_family, entries, blobs, quarantine, usage};
    }
    void Close();  // handles first, then the database; idempotent
  };

  RocksDbStore() = default;
  static rocksdb::DBOptions DatabaseOptions();
  static std::vector<rocksdb::ColumnFamilyDescriptor> FamilyDescriptors();
  static absl::StatusOr<std::unique_ptr<RocksDbStore>> OpenOnce(const std::string& directory);
  // RocksDB's repair of a database that cannot open; returns where what it
  // could not use was moved aside ("" when nothing was).
  static absl::StatusOr<std::string> Repair(const std::string& directory);
  static absl::StatusOr<Database> OpenDatabase(const std::string& directory);
  void Adopt(Database database);  // takes over db_ and the family handles

  // Runs `operation` under the shared lock, then heals the store if the
  // operation met damage.
  template <typename Operation>
  auto Serve(Operation operation) -> decltype(operation());
  // Rebuilds the database from what is readable (see above). Exclusive.
  absl::Status Heal() ABSL_LOCKS_EXCLUDED(mutex_);
  // After a write failed (writes_stopped_): asks RocksDB to resume writing,
  // or reopens the database once the disk has room again.
  absl::Status ResumeWrites() ABSL_LOCKS_EXCLUDED(mutex_);
  // Remembers that a write or compaction failed: on damage (heal after the
  // operation), or otherwise (resume writes before the next one).
  absl::Status NoteWriteFailure(absl::Status status);

  absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> LookupLocked(const std::string& key)
      ABSL_SHARED_LOCKS_REQUIRED(mutex_);
  absl::StatusOr<std::optional<std::string>> EvictLocked(const std::string& key, bool synced)
      ABSL_SHARED_LOCKS_REQUIRED(mutex_);
  // Writes every entry's usage record again from its metadata, keeping its
  // last use and pin (a format 1 or 2 store).
  absl::Status UpgradeUsage();
  // The in-memory totals and reference counts, from "usage" and
  // "quarantine".
  absl::Status LoadState();
  // After a repair or a heal: keeps the entries whose metadata parses and
  // whose blob is stored (or quarantined), writing a usage record for those
  // that lost theirs; drops every other entry and usage record, and blobs
  // no entry references; then LoadState.
  struct Recount {
    int64_t kept = 0, dropped = 0;
  };
  absl::StatusOr<Recount> KeepCompleteEntries();
  absl::StatusOr<std::optional<kiln::v1::StoredUsage>> ReadUsage(const std::string& key);

  // One entry to write: its metadata and blob (not owned), or, when
  // `blob_stored` (PutEntries), the length of its stored blob.
  struct EntryToWrite {
    const kiln::v1::ArtifactMetadata* metadata;
    absl::string_view blob;
    bool blob_stored = false;
    int64_t stored_blob_bytes = 0;
  };
  // Put, PutAll and PutEntries: checks every digest (or that the blob is
  // stored) and that no key repeats, then stores the entries in one synced
  // WriteBatch and updates the in-memory state after it is written;
  // retried once after a heal.
  absl::Status WriteEntries(const std::vector<EntryToWrite>& entries, bool synced = true);
  // An entry added to a batch, and what writing it changes in memory.
  struct StagedEntry {
    std::string digest;
    int64_t bytes = 0;
    std::optional<kiln::v1::StoredUsage> old;  // the entry it overwrites
    bool replaces_blob() const { return old.has_value() && old->digest() != digest; }
  };
  // Adds the entry and its usage (keeping the old entry's pin) to `batch`,
  // and its blob with `put_blob`.
  absl::StatusOr<StagedEntry> StageEntry(const EntryToWrite& entry, bool put_blob,
                                         rocksdb::WriteBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_mutex_);
  // The in-memory side of an entry coming (referencing `digest`, whose
  // blob a write just stored) or going.
  void Reference(const std::string& digest, int64_t bytes, bool new_reference);
  // Returns whether that was the blob's last reference.
  bool Unreference(const std::string& digest);

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

  std::string directory_;
  // Shared by every operation (RocksDB is thread-safe); exclusive while a
  // heal replaces the database under the handles below.
  absl::Mutex mutex_;
  std::unique_ptr<rocksdb::DB> db_;  // null only after a heal that could not reopen
  rocksdb::ColumnFamilyHandle* entries_ = nullptr;
  rocksdb::ColumnFamilyHandle* blobs_ = nullptr;
  rocksdb::ColumnFamilyHandle* quarantine_ = nullptr;
  rocksdb::ColumnFamilyHandle* default_ = nullptr;
  rocksdb::ColumnFamilyHandle* usage_ = nullptr;
  std::string moved_aside_;
  int max_corrupt_copies_ = RocksDbStoreOptions().max_corrupt_copies;

  // Serializes writes that read first; taken inside the shared mutex_.
  absl::Mutex writes_mutex_ ABSL_ACQUIRED_AFTER(mutex_);
  // The in-memory state (see above); never held across a RocksDB call.
  struct Blob {
    int64_t references = 0;
    int64_t bytes = 0;
    bool stored = true;  // false once quarantined, until a Put stores it again
  };
  absl::Mutex state_mutex_ ABSL_ACQUIRED_AFTER(writes_mutex_);
  absl::flat_hash_map<std::string, Blob> blobs_in_use_ ABSL_GUARDED_BY(state_mutex_);
  StoreTotals totals_ ABSL_GUARDED_BY(state_mutex_);
  std::atomic<bool> damaged_{false};         // met damage: heal after the operation
  std::atomic<bool> writes_stopped_{false};  // a write failed: resume before the next
  // RocksDB's repair learns a family from its table files and drops what
  // the WAL holds for a family it did not learn: true while "entries",
  // "blobs" or "usage" has no table file, so that the next write flushes.
  std::atomic<bool> untabled_{false};
  std::atomic<int> heals_{0};
};

}  // namespace kiln

#endif  // KILN_CACHE_ROCKSDB_STORE_H_
