#include "cache/local_tier.h"

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace kiln {

LocalTier::LocalTier(std::unique_ptr<ArtifactStore> store, ObjectDirectory objects,
                     LocalIndex index, int64_t max_artifact_bytes, std::function<absl::Time()> now)
    : store_(std::move(store)),
      objects_(std::move(objects)),
      index_(std::move(index)),
      max_artifact_bytes_(max_artifact_bytes),
      now_(std::move(now)) {}

absl::StatusOr<Tier::Found> LocalTier::Find(Query& query) {
  const std::string& key = query.key;
  const bool want_bytes = query.want_bytes, repair = query.repair;
  Found found;
  absl::ReaderMutexLock lock(&mutex_);  // hits only rename files in: they may overlap
  ASSIGN_OR_RETURN(auto entry, store_->Lookup(key));
  if (!entry.has_value()) {
    // The store may have just quarantined a damaged entry: its index file
    // goes too. (A Commit needs the entry, which this lock keeps absent.)
    RETURN_IF_ERROR(index_.Remove(key));
    return found;
  }
  kiln::v1::CompileResponse& response = found.response.emplace();
  const std::string& digest = entry->digest();
  if (repair) {
    KILN_LOG(WARNING) << "object " << digest << " reported corrupt by a client; rewriting it";
  }
  if (want_bytes || repair || !objects_.Contains(digest)) {
    ASSIGN_OR_RETURN(auto blob, store_->ReadBlob(digest));
    if (!blob.has_value()) {
      KILN_LOG(WARNING) << "entry " << key << " has no intact blob; compiling again";
      RETURN_IF_ERROR(index_.Remove(key));  // clients must not find it either
      found.response.reset();
      return found;
    }
    RETURN_IF_ERROR(objects_.Write(digest, *blob, /*replace=*/repair));
    if (want_bytes) response.set_object_bytes(*std::move(blob));
  }
  const absl::Status published = index_.Publish(*entry);
  if (!published.ok()) KILN_LOG(WARNING) << "cannot index " << key << ": " << published;
  *response.mutable_artifact() = *std::move(entry);
  response.set_object_path(objects_.PathFor(digest));
  response.set_cache_hit(true);
  const absl::Status used = store_->RecordUse(key, now_());
  if (!used.ok()) KILN_LOG(WARNING) << "cannot record a use of " << key << ": " << used;
  return found;
}

absl::Status LocalTier::Commit(const kiln::v1::ArtifactMetadata& metadata, std::string object,
                               bool synced) {
  if (static_cast<int64_t>(object.size()) > max_artifact_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the artifact of ", metadata.key().substr(0, 12), " is ", object.size(),
        " bytes, past the limit of ", max_artifact_bytes_, " (kilnd --max_artifact_bytes)"));
  }
  RETURN_IF_ERROR(objects_.Write(metadata.digest(), object, /*replace=*/true, synced));
  absl::MutexLock lock(&mutex_);  // an Evict sees the entry and its index file, or neither
  RETURN_IF_ERROR(store_->Put(metadata, object, synced));
  const absl::Status published = index_.Publish(metadata, synced);
  if (!published.ok()) KILN_LOG(WARNING) << "cannot index " << metadata.key() << ": " << published;
  return absl::OkStatus();
}

absl::Status LocalTier::StageBlob(const kiln::v1::ArtifactMetadata& metadata,
                                  absl::string_view blob) {
  const absl::Status written =
      objects_.Write(metadata.digest(), blob, /*replace=*/false, /*synced=*/false);
  if (!written.ok()) {
    KILN_LOG(WARNING) << "cannot write the object of " << metadata.key()
                      << " (a request for it writes it): " << written;
  }
  return store_->PutBlob(metadata.digest(), blob);
}

absl::Status LocalTier::CommitImported(
    const std::vector<std::pair<kiln::v1::ArtifactMetadata, int64_t>>& entries, absl::Time now) {
  absl::MutexLock lock(&mutex_);
  // The entries in one write: a failure leaves the cache as it was.
  RETURN_IF_ERROR(store_->PutEntries(entries));
  for (const auto& [metadata, blob_bytes] : entries) {
    const absl::Status used = store_->RecordUse(metadata.key(), now);
    if (!used.ok())
      KILN_LOG(WARNING) << "cannot record a use of " << metadata.key() << ": " << used;
    const absl::Status published = index_.Publish(metadata, /*synced=*/false);
    if (!published.ok())
      KILN_LOG(WARNING) << "cannot index " << metadata.key() << ": " << published;
  }
  // Objects and index records unsynced, then one sync of them all.
  if (const absl::Status synced = SyncFileSystem(objects_.root()); !synced.ok()) {
    KILN_LOG(WARNING) << synced << " (an OS crash may leave imported objects short: clients "
                      << "catch that by their digests)";
  }
  return absl::OkStatus();
}

void LocalTier::CommitAlias(const std::string& request_digest, const std::string& key) {
  const absl::Status published = index_.PublishAlias(request_digest, key);
  if (!published.ok())
    KILN_LOG(WARNING) << "cannot index a request of " << key << ": " << published;
}

absl::Status LocalTier::Evict(const std::string& key, bool synced) {
  absl::MutexLock lock(&mutex_);
  RETURN_IF_ERROR(index_.Remove(key));  // first: clients stop finding it locally
  ASSIGN_OR_RETURN(const std::optional<std::string> removed_blob, store_->Evict(key, synced));
  // A process that has the object file mapped keeps its pages.
  if (removed_blob.has_value()) RETURN_IF_ERROR(objects_.Remove(*removed_blob));
  return absl::OkStatus();
}

absl::StatusOr<std::string> LocalTier::ResolveKey(const std::string& key_or_prefix) {
  if (key_or_prefix.size() < 6) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", key_or_prefix, "' is too short: give at least 6 hex digits"));
  }
  ASSIGN_OR_RETURN(auto keys, store_->KeysWithPrefix(key_or_prefix, 2));
  if (keys.empty()) return absl::NotFoundError(absl::StrCat("no entry with key ", key_or_prefix));
  if (keys.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("key prefix ", key_or_prefix, " is ambiguous: give more digits"));
  }
  return keys[0];
}

void LocalTier::RefreshTouches() {
  absl::StatusOr<absl::flat_hash_map<std::string, absl::Time>> touched = index_.AllTouched();
  if (!touched.ok()) {
    KILN_LOG(WARNING) << "cannot read the local index's uses: " << touched.status();
    return;
  }
  auto snapshot =
      std::make_shared<const absl::flat_hash_map<std::string, absl::Time>>(*std::move(touched));
  absl::MutexLock lock(&touches_mutex_);
  touches_ = std::move(snapshot);
}

LastTouchedFn LocalTier::LastTouched() {
  std::shared_ptr<const absl::flat_hash_map<std::string, absl::Time>> touches;
  {
    absl::MutexLock lock(&touches_mutex_);
    touches = touches_;
  }
  if (touches == nullptr) {
    return [this](const std::string& key) { return index_.LastTouched(key); };
  }
  return [touches](const std::string& key) -> std::optional<absl::Time> {
    auto it = touches->find(key);
    if (it == touches->end()) return std::nullopt;
    return it->second;
  };
}

bool LocalTier::TouchesRead() {
  absl::MutexLock lock(&touches_mutex_);
  return touches_ != nullptr;
}

}  // namespace kiln
