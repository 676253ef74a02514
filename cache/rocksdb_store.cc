#include "cache/rocksdb_store.h"

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
constexpr char kEntryQuarantinePrefix[] = "entry:";

// The usage record of an entry with `metadata`.
kiln::v1::StoredUsage UsageRecord(const kiln::v1::ArtifactMetadata& metadata, int64_t object_bytes,
                                  int64_t last_use_unix_ms, bool pinned) {
  kiln::v1::StoredUsage usage;
  usage.set_digest(metadata.digest());
  usage.set_object_bytes(object_bytes);
  usage.set_last_use_unix_ms(last_use_unix_ms);
  usage.set_pinned(pinned);
  usage.set_graph_name(metadata.graph_name());
  usage.set_created_unix_ms(metadata.created_unix_ms());
  usage.set_compile_ms(metadata.timings().total_ms());
  usage.set_source_graph(metadata.source_graph());
  return usage;
}

EntryUsage FromUsageRecord(std::string key, const kiln::v1::StoredUsage& usage) {
  EntryUsage entry;
  entry.key = std::move(key);
  entry.digest = usage.digest();
  entry.object_bytes = usage.object_bytes();
  entry.last_use = absl::FromUnixMillis(usage.last_use_unix_ms());
  entry.pinned = usage.pinned();
  entry.graph_name = usage.graph_name();
  entry.created = absl::FromUnixMillis(usage.created_unix_ms());
  entry.compile_ms = usage.compile_ms();
  entry.source_graph = usage.source_graph();
  return entry;
}

absl::Status FromRocks(const rocksdb::Status& status, absl::string_view what) {
  if (status.ok()) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", status.ToString());
  if (status.IsIOError() && absl::StrContains(status.ToString(), "lock")) {
    return absl::FailedPreconditionError(
        absl::StrCat(message, " (is another kilnd using this cache directory?)"));
  }
  if (status.IsCorruption()) return absl::DataLossError(message);
  return absl::InternalError(message);
}

// What a read reports when the bytes behind a key are damaged: a block that
// fails its checksum, or a read the device refuses. Either way the data is
// gone for this store; a cache recompiles.
bool IsDamage(const rocksdb::Status& status) { return status.IsCorruption() || status.IsIOError(); }

rocksdb::WriteOptions SyncedWrite() {
  rocksdb::WriteOptions options;
  options.sync = true;  // a compile costs far more than an fsync
  return options;
}

rocksdb::ReadOptions CheckedRead() {
  rocksdb::ReadOptions options;
  options.verify_checksums = true;  // the default, and the point: damage must show as damage
  return options;
}

// Keys beyond the damaged block that follows `after`, nearest first: `after`
// with its last byte incremented (and the rest cut), then its second-to-last,
// ..., then every single byte above its first. Each is greater than `after`.
std::vector<std::string> SkipTargets(const std::string& after) {
  std::vector<std::string> targets;
  for (size_t length = after.size(); length > 1; --length) {
    std::string target = after.substr(0, length);
    if (static_cast<unsigned char>(target.back()) == 0xff) continue;
    ++target.back();
    targets.push_back(std::move(target));
  }
  const int first = after.empty() ? 0 : static_cast<unsigned char>(after[0]);
  for (int byte = first + 1; byte < 256; ++byte) targets.push_back(std::string(1, char(byte)));
  return targets;
}

// Moves `from` (a damaged database, or what a repair set aside) to a new
// "<directory>.corrupt-<unix ms>", kept for inspection.
absl::StatusOr<std::string> MoveAside(const std::string& from, const std::string& directory) {
  std::string aside = absl::StrCat(directory, ".corrupt-", absl::ToUnixMillis(absl::Now()));
  // Two heals within one millisecond must not collide.
  for (int n = 2; access(aside.c_str(), F_OK) == 0; ++n) {
    aside = absl::StrCat(directory, ".corrupt-", absl::ToUnixMillis(absl::Now()), "-", n);
  }
  if (rename(from.c_str(), aside.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot move ", from, " to ", aside, ": ", strerror(errno)));
  }
  return aside;
}

// Removes all but the newest `keep` of the copies MoveAside made beside
// `directory` (newest by the time in their names).
void SweepCorruptCopies(const std::string& directory, int keep) {
  const std::filesystem::path path(directory);
  const std::string prefix = path.filename().string() + ".corrupt-";
  std::vector<std::tuple<int64_t, int64_t, std::string>> copies;  // unix ms, n, path
  std::error_code error;
  std::filesystem::directory_iterator it(
      path.has_parent_path() ? path.parent_path() : std::filesystem::path("."), error);
  for (; !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!absl::StartsWith(name, prefix)) continue;
    const std::vector<std::string> parts = absl::StrSplit(name.substr(prefix.size()), '-');
    int64_t unix_ms = 0, n = 1;
    if (!absl::SimpleAtoi(parts[0], &unix_ms) ||
        (parts.size() > 1 && !absl::SimpleAtoi(parts[1], &n))) {
      continue;
    }
    copies.emplace_back(unix_ms, n, it->path().string());
  }
  std::sort(copies.begin(), copies.end());
  for (size_t i = 0; i + std::max(keep, 0) < copies.size(); ++i) {
    const std::string& copy = std::get<2>(copies[i]);
    if (const absl::Status removed = RemoveRecursively(copy); !removed.ok()) {
      KILN_LOG(WARNING) << "cannot remove " << copy << ": " << removed;
    } else {
      KILN_LOG(INFO) << "removed " << copy << " (keeping the newest " << keep
                     << " copies of damaged stores)";
    }
  }
}

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

RocksDbStore::~RocksDbStore() {
  Database database{std::move(db_), default_, entries_, blobs_, quarantine_, usage_};
  database.Close();
}

template <typename Operation>
auto RocksDbStore::Serve(Operation operation) -> decltype(operation()) {
  if (writes_stopped_.exchange(false) && !ResumeWrites().ok()) writes_stopped_ = true;
  auto result = [&]() -> decltype(operation()) {
    absl::ReaderMutexLock lock(&mutex_);
    if (db_ == nullptr) {
      return absl::UnavailableError(absl::StrCat(
          "the store in ", directory_, " could not be reopened after healing; restart kilnd"));
    }
    return operation();
  }();
  if (damaged_.exchange(false)) {
    if (const absl::Status healed = Heal(); !healed.ok()) {
      KILN_LOG(ERROR) << "cannot heal the store in " << directory_ << ": " << healed;
    }
  }
  return result;
}

absl::Status RocksDbStore::NoteWriteFailure(absl::Status status) {
  // A compaction that met a damaged table stops writes (paranoid_checks):
  // the write reports that background error, Corruption.
  if (absl::IsDataLoss(status)) {
    damaged_ = true;
  } else if (absl::IsInternal(status)) {
    writes_stopped_ = true;  // an I/O error: a full disk, say
  }
  return status;
}

absl::Status RocksDbStore::ResumeWrites() {
  absl::MutexLock lock(&mutex_);
  if (db_ == nullptr || db_->Resume().ok()) return absl::OkStatus();
  // RocksDB recovers from a full disk by itself only once the disk has
  // room for every family's write buffer (hundreds of MiB); until then it
  // answers Busy. With room for some writes again, reopening clears it.
  constexpr uint64_t kRoomToReopen = 1 << 20;
  struct statvfs disk;
  if (statvfs(directory_.c_str(), &disk) != 0 ||
      static_cast<uint64_t>(disk.f_bavail) * disk.f_frsize < kRoomToReopen) {
    return absl::ResourceExhaustedError(absl::StrCat("no space left on device in ", directory_));
  }
  Database current{std::move(db_), default_, entries_, blobs_, quarantine_, usage_};
  current.Close();
  // A store that cannot open answers Unavailable, as after a failed heal.
  ASSIGN_OR_RETURN(Database reopened, OpenDatabase(directory_));
  Adopt(std::move(reopened));
  KILN_LOG(WARNING) << "the store in " << directory_
                    << " is writable again after a failed write (a full disk?)";
  return absl::OkStatus();
}

absl::Status RocksDbStore::Heal() {
  absl::MutexLock lock(&mutex_);
  if (db_ == nullptr) return absl::UnavailableError("no database to heal");
  const std::string fresh = directory_ + ".rebuild";
  RETURN_IF_ERROR(RemoveRecursively(fresh));  // a heal that died half-way
  ASSIGN_OR_RETURN(Database copy, OpenDatabase(fresh));
  const Database old{nullptr, default_, entries_, blobs_, quarantine_, usage_};
  const std::vector<rocksdb::ColumnFamilyHandle*> from = old.families(), to = copy.families();
  int64_t skipped = 0;
  for (size_t f = 0; f < from.size(); ++f) {
    rocksdb::WriteBatch batch;
    absl::Status written = absl::OkStatus();
    auto flush = [&] {
      if (batch.Count() == 0 || !written.ok()) return;
      written = FromRocks(copy.db->Write(SyncedWrite(), &batch), "cannot write the rebuilt store");
      batch.Clear();
    };
    ASSIGN_OR_RETURN(const int64_t stretches,
                     Scan(from[f], [&](const rocksdb::Slice& key, const rocksdb::Slice& value) {
                       batch.Put(to[f], key, value).PermitUncheckedError();
                       if (batch.GetDataSize() > (8 << 20)) flush();
                     }));
    flush();
    RETURN_IF_ERROR(written);
    skipped += stretches;
  }
  copy.Close();
  Database current{std::move(db_), default_, entries_, blobs_, quarantine_, usage_};
  current.Close();
  absl::StatusOr<std::string> aside = MoveAside(directory_, directory_);
  if (aside.ok() && rename(fresh.c_str(), directory_.c_str()) != 0) {
    aside = absl::InternalError(
        absl::StrCat("cannot move ", fresh, " to ", directory_, ": ", strerror(errno)));
  }
  // Whatever is at the directory now (the copy, or the old store if the
  // swap failed) serves; a store that cannot open answers Unavailable.
  absl::StatusOr<Database> reopened = OpenDatabase(directory_);
  if (reopened.ok()) Adopt(*std::move(reopened));
  RETURN_IF_ERROR(aside.status());
  SweepCorruptCopies(directory_, max_corrupt_copies_);
  RETURN_IF_ERROR(reopened.status());
  ASSIGN_OR_RETURN(const Recount recount, KeepCompleteEntries());
  damaged_ = false;  // the copy has none (the Scans above noted what they skipped)
  ++heals_;
  KILN_LOG(ERROR) << "THE STORE MET DAMAGED DATA AND WAS REBUILT from what was readable: "
                  << recount.kept << " entries kept, " << skipped
                  << " damaged stretches dropped and " << recount.dropped
                  << " entries left incomplete by them (they are compiled again); the damaged "
                  << "copy is in " << *aside;
  return absl::OkStatus();
}

absl::Status RocksDbStore::Quarantine(rocksdb::ColumnFamilyHandle* family, const std::string& key,
                                      const std::string& quarantine_key, absl::string_view kept,
                                      const std::string& reason) {
  KILN_LOG(ERROR) << family->GetName() << " " << key << " is damaged (" << reason
                  << "); quarantined, and read as a miss so that it is compiled again";
  rocksdb::WriteBatch batch;
  batch.Put(quarantine_, quarantine_key, rocksdb::Slice(kept.data(), kept.size()));
  // The tombstone is newer than the damaged block, so later reads stop at
  // it and never touch that block again; a fresh Put supersedes both.
  batch.Delete(family, key);
  const bool entry = family == entries_;
  std::optional<kiln::v1::StoredUsage> usage;
  if (entry) {
    absl::StatusOr<std::optional<kiln::v1::StoredUsage>> read = ReadUsage(key);
    if (read.ok()) usage = *std::move(read);
    batch.Delete(usage_, key);
  }
  RETURN_IF_ERROR(
      FromRocks(db_->Write(SyncedWrite(), &batch), absl::StrCat("cannot quarantine ", key)));
  if (usage.has_value()) Unreference(usage->digest());
  absl::MutexLock lock(&state_mutex_);
  if (entry) {
    ++totals_.corrupt_entries;
    if (usage.has_value()) --totals_.entries;
  } else {
    ++totals_.quarantined;
    auto it = blobs_in_use_.find(key);
    if (it != blobs_in_use_.end() && it->second.stored) {
      it->second.stored = false;
      --totals_.blobs;
      totals_.blob_bytes -= it->second.bytes;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> RocksDbStore::Scan(
    rocksdb::ColumnFamilyHandle* family,
    const std::function<void(const rocksdb::Slice& key, const rocksdb::Slice& value)>& visit) {
  int64_t skipped = 0;
  std::optional<std::string> start;  // nullopt: from the first key
  while (true) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(CheckedRead(), family));
    std::string after = start.value_or("");
    if (start.has_value()) {
      it->Seek(*start);
    } else {
      it->SeekToFirst();
    }
    for (; it->Valid(); it->Next()) {
      visit(it->key(), it->value());
      after = it->key().ToString();
    }
    if (it->status().ok()) return skipped;
    if (!IsDamage(it->status())) return FromRocks(it->status(), "cannot read the store");
    ++skipped;
    damaged_ = true;
    {
      absl::MutexLock lock(&state_mutex_);
      ++totals_.unreadable_ranges;
    }
    KILN_LOG(ERROR) << family->GetName() << ": skipping a damaged block after key '" << after
                    << "': " << it->status().ToString();
    start.reset();
    for (const std::string& target : SkipTargets(after)) {
      std::unique_ptr<rocksdb::Iterator> probe(db_->NewIterator(CheckedRead(), family));
      probe->Seek(target);
      if (probe->Valid()) {
        start = probe->key().ToString();
        break;
      }
      if (probe->status().ok()) return skipped;  // nothing after the damage
    }
    if (!start.has_value()) return skipped;
  }
}

absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> RocksDbStore::Lookup(
    const std::string& key) {
  return Serve([&] { return LookupLocked(key); });
}

absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> RocksDbStore::LookupLocked(
    const std::string& key) {
  rocksdb::PinnableSlice value;
  const rocksdb::Status status = db_->Get(CheckedRead(), entries_, key, &value);
  if (status.IsNotFound()) return std::nullopt;
  const std::string quarantine_key = kEntryQuarantinePrefix + key;
  if (IsDamage(status)) {
    // The damaged block stays in its table file until the store heals
    // (bytes that only fail to parse or hash were written so: the Delete
    // in Quarantine is all they need).
    damaged_ = true;
    RETURN_IF_ERROR(
        Quarantine(entries_, key, quarantine_key, status.ToString(), status.ToString()));
    return std::nullopt;
  }
  RETURN_IF_ERROR(FromRocks(status, absl::StrCat("cannot read entry ", key)));
  kiln::v1::ArtifactMetadata metadata;
  if (!metadata.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    RETURN_IF_ERROR(Quarantine(entries_, key, quarantine_key,
                               absl::string_view(value.data(), value.size()),
                               "its bytes do not parse"));
    return std::nullopt;
  }
  return metadata;
}

absl::StatusOr<std::optional<std::string>> RocksDbStore::ReadBlob(const std::string& digest) {
  return Serve([&]() -> absl::StatusOr<std::optional<std::string>> {
    std::string bytes;
    const rocksdb::Status status = db_->Get(CheckedRead(), blobs_, digest, &bytes);
    if (status.IsNotFound()) return std::nullopt;
    if (IsDamage(status)) {
      damaged_ = true;
      RETURN_IF_ERROR(Quarantine(blobs_, digest, digest, status.ToString(), status.ToString()));
      return std::nullopt;
    }
    RETURN_IF_ERROR(FromRocks(status, absl::StrCat("cannot read blob ", digest)));
    if (Sha256Hex(bytes) != digest) {
      RETURN_IF_ERROR(Quarantine(blobs_, digest, digest, bytes,
                                 absl::StrCat(bytes.size(), " bytes do not hash to their digest")));
      return std::nullopt;
    }
    return bytes;
  });
}

absl::Status RocksDbStore::Put(const kiln::v1::ArtifactMetadata& metadata, absl::string_view blob,
                               bool synced) {
  return WriteEntries({EntryToWrite{&metadata, blob}}, synced);
}

absl::Status RocksDbStore::PutAll(
    const std::vector<std::pair<kiln::v1::ArtifactMetadata, std::string>>& entries) {
  std::vector<EntryToWrite> to_write;
  to_write.reserve(entries.size());
  for (const auto& [metadata, blob] : entries) to_write.push_back(EntryToWrite{&metadata, blob});
  return WriteEntries(to_write);
}

absl::Status RocksDbStore::PutBlob(const std::string& digest, absl::string_view blob) {
  if (Sha256Hex(blob) != digest) {
    return absl::InvalidArgumentError(
        absl::StrCat("blob ", digest, ": digest does not match the blob"));
  }
  // Unsynced: PutEntries' synced write makes it durable with the entries.
  return Serve([&] {
    return NoteWriteFailure(FromRocks(
        db_->Put(rocksdb::WriteOptions(), blobs_, digest, rocksdb::Slice(blob.data(), blob.size())),
        absl::StrCat("cannot store blob ", digest)));
  });
}

absl::Status RocksDbStore::PutEntries(
    const std::vector<std::pair<kiln::v1::ArtifactMetadata, int64_t>>& entries) {
  std::vector<EntryToWrite> to_write;
  to_write.reserve(entries.size());
  for (const auto& [metadata, blob_bytes] : entries) {
    to_write.push_back(EntryToWrite{&metadata, {}, /*blob_stored=*/true, blob_bytes});
  }
  return WriteEntries(to_write);
}

absl::StatusOr<RocksDbStore::StagedEntry> RocksDbStore::StageEntry(const EntryToWrite& entry,
                                                                   bool put_blob,
                                                                   rocksdb::WriteBatch& batch) {
  const kiln::v1::ArtifactMetadata& metadata = *entry.metadata;
  StagedEntry staged;
  staged.digest = metadata.digest();
  staged.bytes =
      entry.blob_stored ? entry.stored_blob_bytes : static_cast<int64_t>(entry.blob.size());
  ASSIGN_OR_RETURN(staged.old, ReadUsage(metadata.key()));
  const kiln::v1::StoredUsage usage =
      UsageRecord(metadata, staged.bytes, metadata.created_unix_ms(),
                  staged.old.has_value() && staged.old->pinned());
  batch.Put(entries_, metadata.key(), metadata.SerializeAsString());
  if (put_blob) {
    batch.Put(blobs_, metadata.digest(), rocksdb::Slice(entry.blob.data(), entry.blob.size()));
  }
  batch.Put(usage_, metadata.key(), usage.SerializeAsString());
  return staged;
}

absl::Status RocksDbStore::WriteEntries(const std::vector<EntryToWrite>& entries, bool synced) {
  absl::flat_hash_set<absl::string_view> keys;
  for (const EntryToWrite& entry : entries) {
    const kiln::v1::ArtifactMetadata& metadata = *entry.metadata;
    if (!entry.blob_stored && Sha256Hex(entry.blob) != metadata.digest()) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry ", metadata.key(), ": digest does not match the blob"));
    }
    if (!keys.insert(metadata.key()).second) {
      return absl::InvalidArgumentError(absl::StrCat("entry ", metadata.key(), " is given twice"));
    }
  }
  const std::string what = entries.size() == 1
                               ? absl::StrCat("cannot store entry ", entries[0].metadata->key())
                               : absl::StrCat("cannot store ", entries.size(), " entries");
  auto write = [&]() -> absl::Status {
    absl::MutexLock writes(&writes_mutex_);
    rocksdb::WriteBatch batch;
    std::vector<StagedEntry> staged;
    staged.reserve(entries.size());
    absl::flat_hash_set<std::string> blobs_put;
    // References each blob gains (+) or loses (-) with this batch.
    absl::flat_hash_map<std::string, int64_t> reference_change;
    for (const EntryToWrite& entry : entries) {
      if (entry.blob_stored) {
        // Under writes_mutex_: no Evict can take the blob before the batch.
        rocksdb::PinnableSlice stored;
        const rocksdb::Status found =
            db_->Get(rocksdb::ReadOptions(), blobs_, entry.metadata->digest(), &stored);
        if (found.IsNotFound()) {
          return absl::FailedPreconditionError(
              absl::StrCat("entry ", entry.metadata->key(), ": its blob ", entry.metadata->digest(),
                           " is not stored (evicted since it was put?)"));
        }
        RETURN_IF_ERROR(
            FromRocks(found, absl::StrCat("cannot read blob ", entry.metadata->digest())));
      }
      const bool put_blob = !entry.blob_stored && blobs_put.insert(entry.metadata->digest()).second;
      ASSIGN_OR_RETURN(StagedEntry added, StageEntry(entry, put_blob, batch));
      staged.push_back(std::move(added));
      if (!staged.back().old.has_value() || staged.back().replaces_blob()) {
        ++reference_change[staged.back().digest];
      }
      if (staged.back().replaces_blob()) --reference_change[staged.back().old->digest()];
    }
    // A blob that loses its last reference goes in the same batch.
    {
      absl::MutexLock lock(&state_mutex_);
      for (const auto& [digest, change] : reference_change) {
        if (change >= 0 || blobs_put.contains(digest)) continue;
        auto it = blobs_in_use_.find(digest);
        const int64_t references = it == blobs_in_use_.end() ? 0 : it->second.references;
        if (references + change <= 0) batch.Delete(blobs_, digest);
      }
    }
    RETURN_IF_ERROR(NoteWriteFailure(
        FromRocks(db_->Write(synced ? SyncedWrite() : rocksdb::WriteOptions(), &batch), what)));
    // References first, so that a blob moving between entries of this
    // batch never looks unreferenced.
    for (const StagedEntry& entry : staged) {
      if (!entry.old.has_value()) {
        absl::MutexLock lock(&state_mutex_);
        ++totals_.entries;
      }
      Reference(entry.digest, entry.bytes, !entry.old.has_value() || entry.replaces_blob());
    }
    for (const StagedEntry& entry : staged) {
      if (entry.replaces_blob()) Unreference(entry.old->digest());
    }
    if (untabled_.exchange(false)) {
      const absl::Status flushed = FromRocks(
          db_->Flush(rocksdb::FlushOptions(), {default_, entries_, blobs_, quarantine_, usage_}),
          "cannot flush");
      if (!flushed.ok()) {
        untabled_ = true;
        KILN_LOG(WARNING) << flushed << " (a repair of the store would lose its first entries)";
      }
    }
    return absl::OkStatus();
  };
  const absl::Status written = Serve(write);
  if (!absl::IsDataLoss(written)) return written;
  return Serve(write);  // once more, after the heal
}

absl::StatusOr<std::vector<kiln::v1::ArtifactMetadata>> RocksDbStore::List() {
  return Serve([&]() -> absl::StatusOr<std::vector<kiln::v1::ArtifactMetadata>> {
    std::vector<kiln::v1::ArtifactMetadata> entries;
    ASSIGN_OR_RETURN(const int64_t skipped,
                     Scan(entries_, [&](const rocksdb::Slice& key, const rocksdb::Slice& value) {
                       kiln::v1::ArtifactMetadata metadata;
                       if (!metadata.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
                         // Lookup quarantines it; a listing only leaves it out.
                         KILN_LOG(ERROR)
                             << "entry " << key.ToString() << " does not parse; not listed";
                         return;
                       }
                       entries.push_back(std::move(metadata));
                     }));
    if (skipped > 0) KILN_LOG(ERROR) << "the listing skipped " << skipped << " damaged blocks";
    return entries;
  });
}

absl::StatusOr<std::vector<ListedEntry>> RocksDbStore::ListAfter(const std::string& after_key,
                                                                 int limit) {
  return Serve([&]() -> absl::StatusOr<std::vector<ListedEntry>> {
    std::vector<ListedEntry> entries;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(CheckedRead(), entries_));
    it->Seek(after_key);
    if (it->Valid() && it->key() == after_key) it->Next();
    for (; it->Valid() && static_cast<int>(entries.size()) < limit; it->Next()) {
      ListedEntry entry;
      if (!entry.metadata.ParseFromArray(it->value().data(),
                                         static_cast<int>(it->value().size()))) {
        KILN_LOG(ERROR) << "entry " << it->key().ToString() << " does not parse; not listed";
        continue;
      }
      const std::string key = it->key().ToString();
      ASSIGN_OR_RETURN(const std::optional<kiln::v1::StoredUsage> usage, ReadUsage(key));
      entry.usage = FromUsageRecord(
          key, usage.value_or(UsageRecord(entry.metadata, entry.metadata.object_bytes(),
                                          entry.metadata.created_unix_ms(), false)));
      entries.push_back(std::move(entry));
    }
    if (IsDamage(it->status())) {
      // The entries found so far are real; one behind the damage reads as
      // absent, and the store heals.
      KILN_LOG(ERROR) << "listing after " << after_key << ": " << it->status().ToString();
      damaged_ = true;
      return entries;
    }
    RETURN_IF_ERROR(FromRocks(it->status(), "cannot list entries"));
    return entries;
  });
}

absl::StatusOr<std::vector<std::string>> RocksDbStore::KeysWithPrefix(const std::string& prefix,
                                                                      int limit) {
  return Serve([&]() -> absl::StatusOr<std::vector<std::string>> {
    std::vector<std::string> keys;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(CheckedRead(), entries_));
    for (it->Seek(prefix);
         it->Valid() && it->key().starts_with(prefix) && static_cast<int>(keys.size()) < limit;
         it->Next()) {
      keys.push_back(it->key().ToString());
    }
    if (IsDamage(it->status())) {
      // The keys found so far are real; a damaged one behind them reads as
      // absent.
      KILN_LOG(ERROR) << "keys with prefix " << prefix << ": " << it->status().ToString();
      damaged_ = true;
      return keys;
    }
    RETURN_IF_ERROR(FromRocks(it->status(), "cannot list keys"));
    return keys;
  });
}

absl::StatusOr<std::optional<std::string>> RocksDbStore::Evict(const std::string& key,
                                                               bool synced) {
  return Serve([&] { return EvictLocked(key, synced); });
}

absl::StatusOr<std::optional<std::string>> RocksDbStore::EvictLocked(const std::string& key,
                                                                     bool synced) {
  absl::MutexLock writes(&writes_mutex_);
  ASSIGN_OR_RETURN(const auto entry, LookupLocked(key));
  if (!entry.has_value()) return absl::NotFoundError(absl::StrCat("no entry ", key));
  bool shared;
  {
    absl::MutexLock lock(&state_mutex_);
    auto it = blobs_in_use_.find(entry->digest());
    shared = it != blobs_in_use_.end() && it->second.references > 1;
  }
  rocksdb::WriteBatch batch;
  batch.Delete(entries_, key);
  batch.Delete(usage_, key);
  if (!shared) batch.Delete(blobs_, entry->digest());
  RETURN_IF_ERROR(NoteWriteFailure(
      FromRocks(db_->Write(synced ? SyncedWrite() : rocksdb::WriteOptions(), &batch),
                absl::StrCat("cannot evict ", key))));
  Unreference(entry->digest());
  {
    absl::MutexLock lock(&state_mutex_);
    --totals_.entries;
  }
  if (shared) return std::nullopt;
  return entry->digest();
}

absl::StatusOr<StoreTotals> RocksDbStore::Totals() {
  absl::MutexLock lock(&state_mutex_);
  return totals_;
}

absl::Status RocksDbStore::RecordUse(const std::string& key, absl::Time when) {
  return Serve([&]() -> absl::Status {
    absl::MutexLock writes(&writes_mutex_);
    ASSIGN_OR_RETURN(std::optional<kiln::v1::StoredUsage> usage, ReadUsage(key));
    if (!usage.has_value()) return absl::NotFoundError(absl::StrCat("no entry ", key));
    if (usage->last_use_unix_ms() >= absl::ToUnixMillis(when)) return absl::OkStatus();
    usage->set_last_use_unix_ms(absl::ToUnixMillis(when));
    // Not synced: a use lost in a crash only makes the entry look older.
    return NoteWriteFailure(
        FromRocks(db_->Put(rocksdb::WriteOptions(), usage_, key, usage->SerializeAsString()),
                  absl::StrCat("cannot record a use of ", key)));
  });
}

absl::Status RocksDbStore::SetPinned(const std::string& key, bool pinned) {
  return Serve([&]() -> absl::Status {
    absl::MutexLock writes(&writes_mutex_);
    ASSIGN_OR_RETURN(std::optional<kiln::v1::StoredUsage> usage, ReadUsage(key));
    if (!usage.has_value()) return absl::NotFoundError(absl::StrCat("no entry ", key));
    usage->set_pinned(pinned);
    return NoteWriteFailure(
        FromRocks(db_->Put(SyncedWrite(), usage_, key, usage->SerializeAsString()),
                  absl::StrCat("cannot pin ", key)));
  });
}

absl::StatusOr<std::vector<EntryUsage>> RocksDbStore::Usage() {
  return Serve([&]() -> absl::StatusOr<std::vector<EntryUsage>> {
    std::vector<EntryUsage> entries;
    RETURN_IF_ERROR(Scan(usage_, [&](const rocksdb::Slice& key, const rocksdb::Slice& value) {
                      kiln::v1::StoredUsage usage;
                      if (!usage.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
                        return;
                      }
                      entries.push_back(FromUsageRecord(key.ToString(), usage));
                    }).status());
    return entries;
  });
}

absl::Status RocksDbStore::OverwriteBlobForTesting(const std::string& digest,
                                                   absl::string_view bytes) {
  absl::ReaderMutexLock lock(&mutex_);
  return FromRocks(
      db_->Put(SyncedWrite(), blobs_, digest, rocksdb::Slice(bytes.data(), bytes.size())),
      "cannot overwrite blob");
}

absl::Status RocksDbStore::OverwriteEntryForTesting(const std::string& key,
                                                    absl::string_view bytes) {
  absl::ReaderMutexLock lock(&mutex_);
  return FromRocks(
      db_->Put(SyncedWrite(), entries_, key, rocksdb::Slice(bytes.data(), bytes.size())),
      "cannot overwrite entry");
}

absl::Status RocksDbStore::FlushForTesting() {
  auto flush = [&] {
    return NoteWriteFailure(FromRocks(
        db_->Flush(rocksdb::FlushOptions(), {default_, entries_, blobs_, quarantine_, usage_}),
        "cannot flush"));
  };
  const absl::Status flushed = Serve(flush);
  if (!absl::IsDataLoss(flushed)) return flushed;
  return Serve(flush);  // once more, after the heal
}

absl::Status RocksDbStore::CompactForTesting() {
  auto compact = [&]() -> absl::Status {
    rocksdb::CompactRangeOptions options;
    options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
    for (auto* family : {default_, entries_, blobs_, quarantine_, usage_}) {
      RETURN_IF_ERROR(NoteWriteFailure(
          FromRocks(db_->CompactRange(options, family, nullptr, nullptr), "cannot compact")));
    }
    return absl::OkStatus();
  };
  const absl::Status compacted = Serve(compact);
  if (!absl::IsDataLoss(compacted)) return compacted;
  return Serve(compact);  // once more, after the heal
}

}  // namespace kiln
