#include "cache/memory_store.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/sha256.h"

namespace kiln {

absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> MemoryStore::Lookup(
    const std::string& key) {
  absl::MutexLock lock(&mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  kiln::v1::ArtifactMetadata metadata;
  if (!metadata.ParseFromString(it->second)) {
    KILN_LOG(ERROR) << "entry " << key << " is damaged (its bytes do not parse); quarantined";
    quarantined_entries_[key] = std::move(it->second);
    entries_.erase(it);
    usage_.erase(key);
    return std::nullopt;
  }
  return metadata;
}

absl::StatusOr<std::optional<std::string>> MemoryStore::ReadBlob(const std::string& digest) {
  absl::MutexLock lock(&mutex_);
  auto it = blobs_.find(digest);
  if (it == blobs_.end()) return std::nullopt;
  if (Sha256Hex(it->second) != digest) {
    KILN_LOG(ERROR) << "blob " << digest << " is corrupt; quarantined";
    quarantine_[digest] = std::move(it->second);
    blobs_.erase(it);
    return std::nullopt;
  }
  return it->second;
}

absl::Status MemoryStore::Put(const kiln::v1::ArtifactMetadata& metadata, absl::string_view blob,
                              bool /*synced*/) {
  if (Sha256Hex(blob) != metadata.digest()) {
    return absl::InvalidArgumentError(
        absl::StrCat("entry ", metadata.key(), ": digest does not match the blob"));
  }
  absl::MutexLock lock(&mutex_);
  blobs_[metadata.digest()] = std::string(blob);
  PutLocked(metadata, static_cast<int64_t>(blob.size()));
  return absl::OkStatus();
}

absl::Status MemoryStore::PutAll(
    const std::vector<std::pair<kiln::v1::ArtifactMetadata, std::string>>& entries) {
  std::set<std::string> keys;
  for (const auto& [metadata, blob] : entries) {
    if (Sha256Hex(blob) != metadata.digest()) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry ", metadata.key(), ": digest does not match the blob"));
    }
    if (!keys.insert(metadata.key()).second) {
      return absl::InvalidArgumentError(absl::StrCat("entry ", metadata.key(), " is given twice"));
    }
  }
  absl::MutexLock lock(&mutex_);  // one lock: no reader sees part of them
  for (const auto& [metadata, blob] : entries) {
    blobs_[metadata.digest()] = blob;
    PutLocked(metadata, static_cast<int64_t>(blob.size()));
  }
  return absl::OkStatus();
}

absl::Status MemoryStore::PutBlob(const std::string& digest, absl::string_view blob) {
  if (Sha256Hex(blob) != digest) {
    return absl::InvalidArgumentError(
        absl::StrCat("blob ", digest, ": digest does not match the blob"));
  }
  absl::MutexLock lock(&mutex_);
  blobs_[digest] = std::string(blob);
  return absl::OkStatus();
}

absl::Status MemoryStore::PutEntries(
    const std::vector<std::pair<kiln::v1::ArtifactMetadata, int64_t>>& entries) {
  std::set<std::string> keys;
  for (const auto& [metadata, blob_bytes] : entries) {
    if (!keys.insert(metadata.key()).second) {
      return absl::InvalidArgumentError(absl::StrCat("entry ", metadata.key(), " is given twice"));
    }
  }
  absl::MutexLock lock(&mutex_);
  for (const auto& [metadata, blob_bytes] : entries) {
    if (blobs_.count(metadata.digest()) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("entry ", metadata.key(), ": its blob ", metadata.digest(),
                       " is not stored (evicted since it was put?)"));
    }
  }
  for (const auto& [metadata, blob_bytes] : entries) PutLocked(metadata, blob_bytes);
  return absl::OkStatus();
}

void MemoryStore::PutLocked(const kiln::v1::ArtifactMetadata& metadata, int64_t blob_bytes) {
  entries_[metadata.key()] = metadata.SerializeAsString();
  const std::string old_digest = usage_.count(metadata.key()) ? usage_[metadata.key()].digest : "";
  EntryUsage& usage = usage_[metadata.key()];
  usage.key = metadata.key();
  usage.digest = metadata.digest();
  usage.object_bytes = blob_bytes;
  usage.last_use = absl::FromUnixMillis(metadata.created_unix_ms());
  usage.graph_name = metadata.graph_name();
  usage.created = absl::FromUnixMillis(metadata.created_unix_ms());
  usage.compile_ms = metadata.timings().total_ms();
  usage.source_graph = metadata.source_graph();
  if (!old_digest.empty() && old_digest != metadata.digest() &&
      std::none_of(usage_.begin(), usage_.end(),
                   [&](const auto& other) { return other.second.digest == old_digest; })) {
    blobs_.erase(old_digest);
  }
}

absl::StatusOr<std::vector<kiln::v1::ArtifactMetadata>> MemoryStore::List() {
  absl::MutexLock lock(&mutex_);
  std::vector<kiln::v1::ArtifactMetadata> entries;
  for (const auto& [key, bytes] : entries_) {
    kiln::v1::ArtifactMetadata metadata;
    if (metadata.ParseFromString(bytes)) entries.push_back(std::move(metadata));
  }
  return entries;
}

absl::StatusOr<std::vector<ListedEntry>> MemoryStore::ListAfter(const std::string& after_key,
                                                                int limit) {
  absl::MutexLock lock(&mutex_);
  std::vector<ListedEntry> entries;
  for (auto it = entries_.upper_bound(after_key);
       it != entries_.end() && static_cast<int>(entries.size()) < limit; ++it) {
    ListedEntry entry;
    if (!entry.metadata.ParseFromString(it->second)) continue;  // as List
    if (auto usage = usage_.find(it->first); usage != usage_.end()) entry.usage = usage->second;
    entries.push_back(std::move(entry));
  }
  return entries;
}

absl::StatusOr<std::vector<std::string>> MemoryStore::KeysWithPrefix(const std::string& prefix,
                                                                     int limit) {
  absl::MutexLock lock(&mutex_);
  std::vector<std::string> keys;
  for (auto it = entries_.lower_bound(prefix);
       it != entries_.end() && absl::StartsWith(it->first, prefix) &&
       static_cast<int>(keys.size()) < limit;
       ++it) {
    keys.push_back(it->first);
  }
  return keys;
}

absl::StatusOr<std::optional<std::string>> MemoryStore::Evict(const std::string& key,
                                                              bool /*synced*/) {
  absl::MutexLock lock(&mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return absl::NotFoundError(absl::StrCat("no entry ", key));
  kiln::v1::ArtifactMetadata entry;
  const bool parsed = entry.ParseFromString(it->second);
  if (!parsed) quarantined_entries_[key] = std::move(it->second);  // as Lookup
  entries_.erase(it);
  const std::string digest = usage_[key].digest;
  usage_.erase(key);
  if (!parsed) return absl::NotFoundError(absl::StrCat("no entry ", key));
  for (const auto& [other, usage] : usage_) {
    if (usage.digest == digest) return std::nullopt;
  }
  blobs_.erase(digest);
  return digest;
}

absl::StatusOr<StoreTotals> MemoryStore::Totals() {
  absl::MutexLock lock(&mutex_);
  StoreTotals totals;
  totals.entries = entries_.size();
  std::map<std::string, int64_t> referenced;
  for (const auto& [key, usage] : usage_) {
    if (blobs_.count(usage.digest)) referenced[usage.digest] = usage.object_bytes;
  }
  totals.blobs = referenced.size();
  for (const auto& [digest, bytes] : referenced) totals.blob_bytes += bytes;
  totals.quarantined = quarantine_.size();
  totals.corrupt_entries = quarantined_entries_.size();
  return totals;
}

absl::Status MemoryStore::RecordUse(const std::string& key, absl::Time when) {
  absl::MutexLock lock(&mutex_);
  auto it = usage_.find(key);
  if (it == usage_.end()) return absl::NotFoundError(absl::StrCat("no entry ", key));
  it->second.last_use = std::max(it->second.last_use, when);
  return absl::OkStatus();
}

absl::Status MemoryStore::SetPinned(const std::string& key, bool pinned) {
  absl::MutexLock lock(&mutex_);
  auto it = usage_.find(key);
  if (it == usage_.end()) return absl::NotFoundError(absl::StrCat("no entry ", key));
  it->second.pinned = pinned;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<EntryUsage>> MemoryStore::Usage() {
  absl::MutexLock lock(&mutex_);
  std::vector<EntryUsage> usage;
  for (const auto& [key, entry] : usage_) usage.push_back(entry);
  return usage;
}

void MemoryStore::OverwriteBlobForTesting(const std::string& digest, std::string bytes) {
  absl::MutexLock lock(&mutex_);
  blobs_[digest] = std::move(bytes);
}

void MemoryStore::OverwriteEntryForTesting(const std::string& key, std::string bytes) {
  absl::MutexLock lock(&mutex_);
  entries_[key] = std::move(bytes);
}

}  // namespace kiln
