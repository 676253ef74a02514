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
