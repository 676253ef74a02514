#include "cache/rocksdb_store.h"

#include <errno.h>
#include <stdio.h>

#include <cstring>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "rocksdb/write_batch.h"

namespace kiln {
namespace {

constexpr char kFormatKey[] = "format";
constexpr char kEntryQuarantinePrefix[] = "entry:";

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
bool IsDamage(const rocksdb::Status& status) {
  return status.IsCorruption() || status.IsIOError();
}

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

// Moves a damaged database aside (kept for inspection) so that an empty one
// can take its place.
absl::StatusOr<std::string> MoveAside(const std::string& directory) {
  const std::string aside =
      absl::StrCat(directory, ".corrupt-", absl::ToUnixMillis(absl::Now()));
  if (rename(directory.c_str(), aside.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot move ", directory, " to ", aside, ": ", strerror(errno)));
  }
  return aside;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbStore>> RocksDbStore::Open(const std::string& directory) {
  absl::StatusOr<std::unique_ptr<RocksDbStore>> store = OpenOnce(directory);
  if (store.ok() || !absl::IsDataLoss(store.status())) return store;
  // A cache can always recompile: losing the artifacts beats a daemon that
  // cannot start until someone deletes files by hand.
  absl::StatusOr<std::string> aside = MoveAside(directory);
  if (!aside.ok()) return store.status();
  KILN_LOG(ERROR) << "THE STORE WAS DAMAGED AND IS RESET: " << store.status().message()
                  << "; moved it to " << *aside << " and started an empty store (every "
                  << "artifact will be compiled again)";
  ASSIGN_OR_RETURN(store, OpenOnce(directory));
  (*store)->moved_aside_ = *std::move(aside);
  return store;
}

absl::StatusOr<std::unique_ptr<RocksDbStore>> RocksDbStore::OpenOnce(
    const std::string& directory) {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.max_open_files = 256;
  options.keep_log_file_num = 4;
  // Chosen, not defaulted; the header says why.
  options.paranoid_checks = true;
  options.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  rocksdb::ColumnFamilyOptions plain_options;
  // Reads every table file back after writing it: a bad write is found at
  // flush, not by the first request for an artifact (writes are rare here).
  plain_options.paranoid_file_checks = true;
  rocksdb::ColumnFamilyOptions blob_options = plain_options;
  blob_options.OptimizeForPointLookup(64);
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, plain_options},
      {"entries", plain_options},
      {"blobs", blob_options},
      {"quarantine", plain_options},
  };
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  const rocksdb::Status opened = rocksdb::DB::Open(options, directory, families, &handles, &db);
  const std::string what = absl::StrCat("cannot open the store in ", directory);
  // CURRENT naming a MANIFEST that is not there is damage too.
  if (opened.IsPathNotFound()) return absl::DataLossError(absl::StrCat(what, ": ", opened.ToString()));
  RETURN_IF_ERROR(FromRocks(opened, what));
  std::unique_ptr<RocksDbStore> store(new RocksDbStore());
  store->db_.reset(db);
  store->default_ = handles[0];
  store->entries_ = handles[1];
  store->blobs_ = handles[2];
  store->quarantine_ = handles[3];

  std::string format;
  const rocksdb::Status read = db->Get(CheckedRead(), store->default_, kFormatKey, &format);
  const std::string expected = absl::StrCat(kStoreFormatVersion);
  if (read.IsNotFound()) {
    RETURN_IF_ERROR(FromRocks(db->Put(SyncedWrite(), store->default_, kFormatKey, expected),
                              "cannot write the store format"));
  } else if (IsDamage(read)) {
    return absl::DataLossError(absl::StrCat("cannot read the store format in ", directory, ": ",
                                            read.ToString()));
  } else if (!read.ok()) {
    return FromRocks(read, "cannot read the store format");
  } else if (format != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat("the store in ", directory, " has format ", format, "; this kilnd reads ",
                     expected, ". Use another --cache_dir or remove the old one"));
  }
  return store;
}

RocksDbStore::~RocksDbStore() {
  for (auto* handle : {entries_, blobs_, quarantine_, default_}) {
    if (handle != nullptr) db_->DestroyColumnFamilyHandle(handle);
  }
  if (db_ != nullptr) db_->Close().PermitUncheckedError();
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
  return FromRocks(db_->Write(SyncedWrite(), &batch), absl::StrCat("cannot quarantine ", key));
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
  rocksdb::PinnableSlice value;
  const rocksdb::Status status = db_->Get(CheckedRead(), entries_, key, &value);
  if (status.IsNotFound()) return std::nullopt;
  const std::string quarantine_key = kEntryQuarantinePrefix + key;
  if (IsDamage(status)) {
    RETURN_IF_ERROR(Quarantine(entries_, key, quarantine_key, status.ToString(), status.ToString()));
    return std::nullopt;
  }
  RETURN_IF_ERROR(FromRocks(status, absl::StrCat("cannot read entry ", key)));
  kiln::v1::ArtifactMetadata metadata;
  if (!metadata.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    RETURN_IF_ERROR(Quarantine(entries_, key, quarantine_key, absl::string_view(value.data(), value.size()),
                               "its bytes do not parse"));
    return std::nullopt;
  }
  return metadata;
}

absl::StatusOr<std::optional<std::string>> RocksDbStore::ReadBlob(const std::string& digest) {
  std::string bytes;
  const rocksdb::Status status = db_->Get(CheckedRead(), blobs_, digest, &bytes);
  if (status.IsNotFound()) return std::nullopt;
  if (IsDamage(status)) {
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
}

absl::Status RocksDbStore::Put(const kiln::v1::ArtifactMetadata& metadata, absl::string_view blob) {
  if (Sha256Hex(blob) != metadata.digest()) {
    return absl::InvalidArgumentError(
        absl::StrCat("entry ", metadata.key(), ": digest does not match the blob"));
  }
  rocksdb::WriteBatch batch;
  batch.Put(entries_, metadata.key(), metadata.SerializeAsString());
  batch.Put(blobs_, metadata.digest(), rocksdb::Slice(blob.data(), blob.size()));
  return FromRocks(db_->Write(SyncedWrite(), &batch),
                   absl::StrCat("cannot store entry ", metadata.key()));
}

absl::StatusOr<std::vector<kiln::v1::ArtifactMetadata>> RocksDbStore::List() {
  std::vector<kiln::v1::ArtifactMetadata> entries;
  ASSIGN_OR_RETURN(
      const int64_t skipped,
      Scan(entries_, [&](const rocksdb::Slice& key, const rocksdb::Slice& value) {
        kiln::v1::ArtifactMetadata metadata;
        if (!metadata.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          // Lookup quarantines it; a listing only leaves it out.
          KILN_LOG(ERROR) << "entry " << key.ToString() << " does not parse; not listed";
          return;
        }
        entries.push_back(std::move(metadata));
      }));
  if (skipped > 0) KILN_LOG(ERROR) << "the listing skipped " << skipped << " damaged blocks";
  return entries;
}

absl::StatusOr<std::vector<std::string>> RocksDbStore::KeysWithPrefix(const std::string& prefix,
                                                                     int limit) {
  std::vector<std::string> keys;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(CheckedRead(), entries_));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix) &&
                         static_cast<int>(keys.size()) < limit;
       it->Next()) {
    keys.push_back(it->key().ToString());
  }
  if (IsDamage(it->status())) {
    // The keys found so far are real; a damaged one behind them reads as absent.
    KILN_LOG(ERROR) << "keys with prefix " << prefix << ": " << it->status().ToString();
    return keys;
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "cannot list keys"));
  return keys;
}

absl::StatusOr<std::optional<std::string>> RocksDbStore::Evict(const std::string& key) {
  ASSIGN_OR_RETURN(const auto entry, Lookup(key));
  if (!entry.has_value()) return absl::NotFoundError(absl::StrCat("no entry ", key));
  bool shared = false;
  ASSIGN_OR_RETURN(const int64_t skipped,
                   Scan(entries_, [&](const rocksdb::Slice& other, const rocksdb::Slice& value) {
                     kiln::v1::ArtifactMetadata metadata;
                     shared |= other != key &&
                               metadata.ParseFromArray(value.data(), static_cast<int>(value.size())) &&
                               metadata.digest() == entry->digest();
                   }));
  // An entry in a damaged block might share the blob: keep it (an orphan
  // blob costs space; a missing one would cost a recompile of that entry).
  shared |= skipped > 0;
  rocksdb::WriteBatch batch;
  batch.Delete(entries_, key);
  if (!shared) batch.Delete(blobs_, entry->digest());
  RETURN_IF_ERROR(
      FromRocks(db_->Write(SyncedWrite(), &batch), absl::StrCat("cannot evict ", key)));
  if (shared) return std::nullopt;
  return entry->digest();
}

absl::StatusOr<StoreTotals> RocksDbStore::Totals() {
  StoreTotals totals;
  auto count = [&](rocksdb::ColumnFamilyHandle* family,
                   const std::function<void(const rocksdb::Slice&, const rocksdb::Slice&)>& visit)
      -> absl::Status {
    ASSIGN_OR_RETURN(const int64_t skipped, Scan(family, visit));
    totals.unreadable_ranges += skipped;
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(count(entries_, [&](const rocksdb::Slice&, const rocksdb::Slice&) {
    ++totals.entries;
  }));
  RETURN_IF_ERROR(count(blobs_, [&](const rocksdb::Slice&, const rocksdb::Slice& value) {
    ++totals.blobs;
    totals.blob_bytes += value.size();
  }));
  RETURN_IF_ERROR(count(quarantine_, [&](const rocksdb::Slice& key, const rocksdb::Slice&) {
    ++(key.starts_with(kEntryQuarantinePrefix) ? totals.corrupt_entries : totals.quarantined);
  }));
  return totals;
}

absl::Status RocksDbStore::OverwriteBlobForTesting(const std::string& digest,
                                                   absl::string_view bytes) {
  return FromRocks(db_->Put(SyncedWrite(), blobs_, digest, rocksdb::Slice(bytes.data(), bytes.size())),
                   "cannot overwrite blob");
}

absl::Status RocksDbStore::OverwriteEntryForTesting(const std::string& key,
                                                    absl::string_view bytes) {
  return FromRocks(db_->Put(SyncedWrite(), entries_, key, rocksdb::Slice(bytes.data(), bytes.size())),
                   "cannot overwrite entry");
}

absl::Status RocksDbStore::FlushForTesting() {
  return FromRocks(db_->Flush(rocksdb::FlushOptions(), {default_, entries_, blobs_, quarantine_}),
                   "cannot flush");
}

}  // namespace kiln
