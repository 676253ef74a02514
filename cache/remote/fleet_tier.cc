#include "cache/remote/fleet_tier.h"

#include <utility>

#include "common/logging.h"
#include "common/status_macros.h"

namespace kiln {

FleetTier::FleetTier(LocalTier* local, std::shared_ptr<RemoteTier> remote,
                     std::function<absl::Time()> now)
    : local_(local), remote_(std::move(remote)), now_(std::move(now)) {}

absl::StatusOr<FleetTier::Found> FleetTier::Find(const std::string& key, bool want_bytes,
                                                 RemoteTier::Wait* wait) {
  Found found;
  ASSIGN_OR_RETURN(found.response, local_->Find(key, want_bytes));
  if (found.response.has_value()) return found;
  RemoteTier::Claim claim = remote_->Look(key, wait);
  found.look_again_after = claim.look_again_after;
  if (claim.lease != nullptr) {
    absl::MutexLock lock(&mutex_);
    leases_[key] = std::move(claim.lease);
  }
  if (!claim.entry.has_value()) return found;
  kiln::v1::ArtifactMetadata& metadata = claim.entry->metadata;
  // Unsynced: an OS crash that loses the entry costs one fetch (a short
  // object file is caught by its digest before anything loads it).
  const absl::Status stored = local_->Commit(metadata, claim.entry->object, /*synced=*/false);
  if (!stored.ok()) {
    KILN_LOG(WARNING) << "cannot store the fleet tier's entry for " << key << " (" << stored
                      << "); compiling it here";
    return found;
  }
  // Its use here starts now: the entry may have been compiled long ago.
  const absl::Status used = local_->store().RecordUse(key, now_());
  if (!used.ok()) KILN_LOG(WARNING) << "cannot record a use of " << key << ": " << used;
  kiln::v1::CompileResponse& response = found.response.emplace();
  response.set_object_path(local_->objects().PathFor(metadata.digest()));
  if (want_bytes) response.set_object_bytes(std::move(claim.entry->object));
  *response.mutable_artifact() = std::move(metadata);
  response.set_cache_hit(true);
  return found;
}

absl::Status FleetTier::Commit(const kiln::v1::ArtifactMetadata& metadata, std::string object) {
  std::unique_ptr<RemoteTier::Lease> lease;
  {
    absl::MutexLock lock(&mutex_);
    if (auto it = leases_.find(metadata.key()); it != leases_.end()) {
      lease = std::move(it->second);
      leases_.erase(it);
    }
  }
  RETURN_IF_ERROR(local_->Commit(metadata, object, /*synced=*/true));
  remote_->PublishBehind(metadata, std::move(object), std::move(lease));
  return absl::OkStatus();
}

void FleetTier::Abandon(const std::string& key) {
  std::unique_ptr<RemoteTier::Lease> lease;  // released outside the lock
  absl::MutexLock lock(&mutex_);
  if (auto it = leases_.find(key); it != leases_.end()) {
    lease = std::move(it->second);
    leases_.erase(it);
  }
}

}  // namespace kiln
