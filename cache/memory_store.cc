#include "cache/memory_store.h"

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

absl::Status MemoryStore::Put(const kiln::v1::ArtifactMetadata& metadata, absl::string_view blob) {
  if (Sha256Hex(blob) != metadata.digest()) {
    return absl::InvalidArgumentError(
        absl::StrCat("entry ", metadata.key(), ": digest does not match the blob"));
  }
  absl::MutexLock lock(&mutex_);
  entries_[metadata.key()] = metadata.SerializeAsString();
  blobs_[metadata.digest()] = std::string(blob);
  return absl::OkStatus();
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

absl::StatusOr<std::optional<std::string>> MemoryStore::Evict(const std::string& key) {
  absl::MutexLock lock(&mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return absl::NotFoundError(absl::StrCat("no entry ", key));
  kiln::v1::ArtifactMetadata entry;
  if (!entry.ParseFromString(it->second)) {  // as Lookup: quarantined, then absent
    quarantined_entries_[key] = std::move(it->second);
    entries_.erase(it);
    return absl::NotFoundError(absl::StrCat("no entry ", key));
  }
  entries_.erase(it);
  for (const auto& [other, bytes] : entries_) {
    kiln::v1::ArtifactMetadata metadata;
    if (metadata.ParseFromString(bytes) && metadata.digest() == entry.digest()) return std::nullopt;
  }
  blobs_.erase(entry.digest());
  return entry.digest();
}

absl::StatusOr<StoreTotals> MemoryStore::Totals() {
  absl::MutexLock lock(&mutex_);
  StoreTotals totals;
  totals.entries = entries_.size();
  totals.blobs = blobs_.size();
  for (const auto& [digest, bytes] : blobs_) totals.blob_bytes += bytes.size();
  totals.quarantined = quarantine_.size();
  totals.corrupt_entries = quarantined_entries_.size();
  return totals;
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
