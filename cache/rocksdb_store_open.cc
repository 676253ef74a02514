// RocksDbStore: opening, options, format upgrades and the reference counts loaded at open.
#include <errno.h>
#include <stdio.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cache/rocksdb_store.h"
#include "cache/rocksdb_util.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "rocksdb/cache.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"

namespace kiln {
namespace {

constexpr char kFormatKey[] = "format";

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbStore>> RocksDbStore::Open(const std::string& directory,
                                                                 const Options& options) {
  SweepCorruptCopies(directory, options.max_corrupt_copies);
  absl::StatusOr<std::unique_ptr<RocksDbStore>> store = OpenOnce(directory);
  std::string aside;
  if (absl::IsDataLoss(store.status())) {
    const absl::Status damage = store.status();
    absl::StatusOr<std::string> repaired = Repair(directory);
    if (repaired.ok()) {
      store = OpenOnce(directory);
      if (store.ok()) {
        aside = *std::move(repaired);
        ASSIGN_OR_RETURN(const Recount recount, (*store)->KeepCompleteEntries());
        KILN_LOG(ERROR) << "THE STORE WAS DAMAGED AND IS REPAIRED: " << damage.message()
                        << "; kept " << recount.kept << " entries, dropped " << recount.dropped
                        << " whose records were incomplete (they will be compiled again, as "
                        << "will those of the damaged files); set aside in "
                        << (aside.empty() ? "(nothing)" : aside);
      }
    } else {
      KILN_LOG(ERROR) << repaired.status();
      store = damage;
    }
  }
  if (absl::IsDataLoss(store.status())) {
    // A cache can always recompile: losing the artifacts beats a daemon
    // that cannot start until someone deletes files by hand.
    absl::StatusOr<std::string> moved = MoveAside(directory, directory);
    if (!moved.ok()) return store.status();
    KILN_LOG(ERROR) << "THE STORE WAS DAMAGED AND IS RESET: " << store.status().message()
                    << "; moved it to " << *moved << " and started an empty store (every "
                    << "artifact will be compiled again)";
    aside = *std::move(moved);
    store = OpenOnce(directory);
  }
  if (!store.ok()) return store.status();
  (*store)->max_corrupt_copies_ = options.max_corrupt_copies;
  (*store)->moved_aside_ = aside;
  if (!aside.empty()) SweepCorruptCopies(directory, options.max_corrupt_copies);
  return store;
}

absl::StatusOr<std::string> RocksDbStore::Repair(const std::string& directory) {
  RETURN_IF_ERROR(FromRocks(rocksdb::RepairDB(directory, DatabaseOptions(), FamilyDescriptors()),
                            absl::StrCat("cannot repair the store in ", directory)));
  // Where RepairDB moved what it could not use (and the old MANIFEST and
  // WAL files, whose contents it rewrote).
  const std::string lost = directory + "/lost";
  if (access(lost.c_str(), F_OK) != 0) return std::string();
  return MoveAside(lost, directory);
}

rocksdb::ColumnFamilyOptions RocksDbStore::LookupFamilyOptions(rocksdb::ColumnFamilyOptions base) {
  // With RocksDB's default 8 MiB of block cache and no filter, a store of
  // 100,000 entries (~4 KiB of metadata each) read most blocks from the
  // file system. The cache fills only as blocks are read.
  rocksdb::BlockBasedTableOptions tables;
  tables.block_cache = rocksdb::NewLRUCache(512 << 20);
  tables.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  base.table_factory.reset(rocksdb::NewBlockBasedTableFactory(tables));
  return base;
}

rocksdb::DBOptions RocksDbStore::DatabaseOptions() {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.max_open_files = 256;
  options.keep_log_file_num = 4;
  // Chosen, not defaulted; the header says why.
  options.paranoid_checks = true;
  options.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  // Every flush takes every family, so a WAL file is never left holding
  // what a table file holds too: RocksDB's repair would replay it into a
  // second table with the same sequence numbers, and fail.
  options.atomic_flush = true;
  return options;
}

std::vector<rocksdb::ColumnFamilyDescriptor> RocksDbStore::FamilyDescriptors() {
  rocksdb::ColumnFamilyOptions plain_options;
  // Reads every table file back after writing it: a bad write is found at
  // flush, not by the first request for an artifact (writes are rare here).
  plain_options.paranoid_file_checks = true;
  rocksdb::ColumnFamilyOptions blob_options = plain_options;
  blob_options.OptimizeForPointLookup(64);
  // One cache for entries and usage (this database's own: a block must
  // never outlive a reopen).
  const rocksdb::ColumnFamilyOptions lookup_options = LookupFamilyOptions(plain_options);
  return {
      {rocksdb::kDefaultColumnFamilyName, plain_options},
      {"entries", lookup_options},
      {"blobs", blob_options},
      {"quarantine", plain_options},
      {"usage", lookup_options},
  };
}

absl::StatusOr<RocksDbStore::Database> RocksDbStore::OpenDatabase(const std::string& directory) {
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  const rocksdb::Status opened =
      rocksdb::DB::Open(DatabaseOptions(), directory, FamilyDescriptors(), &handles, &db);
  const std::string what = absl::StrCat("cannot open the store in ", directory);
  // CURRENT naming a MANIFEST that is not there is damage too.
  if (opened.IsPathNotFound())
    return absl::DataLossError(absl::StrCat(what, ": ", opened.ToString()));
  RETURN_IF_ERROR(FromRocks(opened, what));
  Database database;
  database.db.reset(db);
  database.default_family = handles[0];
  database.entries = handles[1];
  database.blobs = handles[2];
  database.quarantine = handles[3];
  database.usage = handles[4];
  return database;
}

void RocksDbStore::Database::Close() {
  if (db == nullptr) return;
  for (auto* handle : families()) {
    if (handle != nullptr) db->DestroyColumnFamilyHandle(handle);
  }
  default_family = entries = blobs = quarantine = usage = nullptr;
  db->Close().PermitUncheckedError();
  db.reset();
}

void RocksDbStore::Adopt(Database database) {
  db_ = std::move(database.db);
  default_ = database.default_family;
  entries_ = database.entries;
  blobs_ = database.blobs;
  quarantine_ = database.quarantine;
  usage_ = database.usage;
  untabled_ = false;
  for (rocksdb::ColumnFamilyHandle* family : {entries_, blobs_, usage_}) {
    rocksdb::ColumnFamilyMetaData files;
    db_->GetColumnFamilyMetaData(family, &files);
    if (files.file_count == 0) untabled_ = true;
  }
}

absl::StatusOr<std::unique_ptr<RocksDbStore>> RocksDbStore::OpenOnce(const std::string& directory) {
  ASSIGN_OR_RETURN(Database database, OpenDatabase(directory));
  rocksdb::DB* const db = database.db.get();
  rocksdb::ColumnFamilyHandle* const default_family = database.default_family;
  std::unique_ptr<RocksDbStore> store(new RocksDbStore());
  store->directory_ = directory;
  store->Adopt(std::move(database));

  std::string format;
  const rocksdb::Status read = db->Get(CheckedRead(), default_family, kFormatKey, &format);
  const std::string expected = absl::StrCat(kStoreFormatVersion);
  if (read.ok() && (format == "1" || format == "2")) {
    RETURN_IF_ERROR(store->UpgradeUsage());
    format = expected;
  }
  if (read.IsNotFound() || format == expected) {
    RETURN_IF_ERROR(FromRocks(db->Put(SyncedWrite(), default_family, kFormatKey, expected),
                              "cannot write the store format"));
  } else if (IsDamage(read)) {
    return absl::DataLossError(
        absl::StrCat("cannot read the store format in ", directory, ": ", read.ToString()));
  } else if (!read.ok()) {
    return FromRocks(read, "cannot read the store format");
  } else if (format != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat("the store in ", directory, " has format ", format, "; this kilnd reads ",
                     expected, ". Use another --cache_dir or remove the old one"));
  }
  RETURN_IF_ERROR(store->LoadState());
  return store;
}

absl::Status RocksDbStore::UpgradeUsage() {
  rocksdb::WriteBatch batch;
  absl::Status read_usage;
  ASSIGN_OR_RETURN(
      const int64_t skipped,
      Scan(entries_, [&](const rocksdb::Slice& key, const rocksdb::Slice& value) {
        kiln::v1::ArtifactMetadata metadata;
        if (!metadata.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          return;  // Lookup quarantines it
        }
        // Format 2's record keeps its use and pin; format 1 has none.
        absl::StatusOr<std::optional<kiln::v1::StoredUsage>> old = ReadUsage(key.ToString());
        if (!old.ok()) read_usage.Update(old.status());
        const kiln::v1::StoredUsage usage = UsageRecord(
            metadata, metadata.object_bytes(),
            old.ok() && old->has_value() ? (*old)->last_use_unix_ms() : metadata.created_unix_ms(),
            old.ok() && old->has_value() && (*old)->pinned());
        batch.Put(usage_, key, usage.SerializeAsString()).PermitUncheckedError();
      }));
  RETURN_IF_ERROR(read_usage);
  KILN_LOG(INFO) << "upgraded the store in " << directory_ << " to format " << kStoreFormatVersion
                 << ": " << batch.Count() << " entries (" << skipped << " damaged stretches)";
  return FromRocks(db_->Write(SyncedWrite(), &batch), "cannot upgrade the store");
}

absl::Status RocksDbStore::LoadState() {
  absl::flat_hash_map<std::string, Blob> blobs;
  StoreTotals totals;
  ASSIGN_OR_RETURN(const int64_t usage_skipped,
                   Scan(usage_, [&](const rocksdb::Slice&, const rocksdb::Slice& value) {
                     kiln::v1::StoredUsage usage;
                     if (!usage.ParseFromArray(value.data(), static_cast<int>(value.size())))
                       return;
                     ++totals.entries;
                     Blob& blob = blobs[usage.digest()];
                     ++blob.references;
                     blob.bytes = usage.object_bytes();
                   }));
  ASSIGN_OR_RETURN(
      const int64_t quarantine_skipped,
      Scan(quarantine_, [&](const rocksdb::Slice& key, const rocksdb::Slice&) {
        ++(key.starts_with(kEntryQuarantinePrefix) ? totals.corrupt_entries : totals.quarantined);
      }));
  totals.unreadable_ranges = usage_skipped + quarantine_skipped;
  for (const auto& [digest, blob] : blobs) totals.blob_bytes += blob.bytes;
  totals.blobs = static_cast<int64_t>(blobs.size());
  absl::MutexLock lock(&state_mutex_);
  blobs_in_use_ = std::move(blobs);
  totals_ = totals;
  return absl::OkStatus();
}

absl::StatusOr<RocksDbStore::Recount> RocksDbStore::KeepCompleteEntries() {
  absl::flat_hash_set<std::string> blobs, quarantined, usage;
  auto collect = [](absl::flat_hash_set<std::string>& keys) {
    return
        [&keys](const rocksdb::Slice& key, const rocksdb::Slice&) { keys.insert(key.ToString()); };
  };
  RETURN_IF_ERROR(Scan(blobs_, collect(blobs)).status());
  RETURN_IF_ERROR(Scan(quarantine_, collect(quarantined)).status());
  RETURN_IF_ERROR(Scan(usage_, collect(usage)).status());
  rocksdb::WriteBatch batch;
  absl::flat_hash_set<std::string> referenced;
  Recount recount;
  RETURN_IF_ERROR(
      Scan(entries_, [&](const rocksdb::Slice& key, const rocksdb::Slice& value) {
        const bool has_usage = usage.erase(key.ToString()) > 0;
        kiln::v1::ArtifactMetadata metadata;
        if (!metadata.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          batch.Put(quarantine_, kEntryQuarantinePrefix + key.ToString(), value);
        } else if (blobs.contains(metadata.digest()) || quarantined.contains(metadata.digest())) {
          // A quarantined blob's entry stays, as after a damaged read: the
          // next request compiles it again and its Put stores the blob.
          ++recount.kept;
          referenced.insert(metadata.digest());
          if (has_usage) return;
          const kiln::v1::StoredUsage record = UsageRecord(
              metadata, metadata.object_bytes(), metadata.created_unix_ms(), /*pinned=*/false);
          batch.Put(usage_, key, record.SerializeAsString());
          return;
        }
        ++recount.dropped;
        batch.Delete(entries_, key);
        batch.Delete(usage_, key);
      }).status());
  recount.dropped += static_cast<int64_t>(usage.size());
  for (const std::string& key : usage) batch.Delete(usage_, key);
  for (const std::string& digest : blobs) {
    if (!referenced.contains(digest)) batch.Delete(blobs_, digest);
  }
  RETURN_IF_ERROR(FromRocks(db_->Write(SyncedWrite(), &batch),
                            absl::StrCat("cannot drop incomplete entries in ", directory_)));
  RETURN_IF_ERROR(LoadState());
  return recount;
}

void RocksDbStore::Reference(const std::string& digest, int64_t bytes, bool new_reference) {
  absl::MutexLock lock(&state_mutex_);
  Blob& blob = blobs_in_use_[digest];
  const bool counted = blob.references > 0 && blob.stored;
  if (new_reference) ++blob.references;
  if (!counted) {
    blob.bytes = bytes;
    blob.stored = true;
    ++totals_.blobs;
    totals_.blob_bytes += bytes;
  }
}

bool RocksDbStore::Unreference(const std::string& digest) {
  absl::MutexLock lock(&state_mutex_);
  auto it = blobs_in_use_.find(digest);
  if (it == blobs_in_use_.end()) return true;
  if (--it->second.references > 0) return false;
  if (it->second.stored) {
    --totals_.blobs;
    totals_.blob_bytes -= it->second.bytes;
  }
  blobs_in_use_.erase(it);
  return true;
}

absl::StatusOr<std::optional<kiln::v1::StoredUsage>> RocksDbStore::ReadUsage(
    const std::string& key) {
  std::string bytes;
  const rocksdb::Status status = db_->Get(CheckedRead(), usage_, key, &bytes);
  if (status.IsNotFound()) return std::nullopt;
  if (IsDamage(status)) damaged_ = true;
  RETURN_IF_ERROR(FromRocks(status, absl::StrCat("cannot read the usage of ", key)));
  kiln::v1::StoredUsage usage;
  if (!usage.ParseFromString(bytes)) return std::nullopt;  // rewritten by the next Put
  return usage;
}
}  // namespace kiln
