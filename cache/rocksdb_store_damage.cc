// RocksDbStore: stopped writes, healing, quarantine and scans that skip damaged blocks.
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

}  // namespace

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
}  // namespace kiln
