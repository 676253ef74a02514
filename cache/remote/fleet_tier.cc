#include "cache/remote/fleet_tier.h"

#include <utility>

#include "common/logging.h"
#include "common/status_macros.h"

namespace kiln {

FleetTier::FleetTier(Tier* inner, std::shared_ptr<RemoteTier> remote)
    : inner_(inner), remote_(std::move(remote)) {}

absl::StatusOr<Tier::Found> FleetTier::Find(Query& query) {
  ASSIGN_OR_RETURN(Found found, inner_->Find(query));
  if (found.response.has_value()) return found;
  if (query.progress == nullptr) query.progress = std::make_shared<RemoteTier::Wait>();
  RemoteTier::Claim claim =
      remote_->Look(query.key, static_cast<RemoteTier::Wait*>(query.progress.get()));
  found.look_again_after = claim.look_again_after;
  if (claim.lease != nullptr) {
    absl::MutexLock lock(&mutex_);
    leases_[query.key] = std::move(claim.lease);
  }
  if (!claim.entry.has_value()) return found;
  // Unsynced: an OS crash that loses the entry costs one fetch (a short
  // object file is caught by its digest before anything loads it).
  const absl::Status stored =
      inner_->Commit(claim.entry->metadata, std::move(claim.entry->object), /*synced=*/false);
  if (!stored.ok()) {
    KILN_LOG(WARNING) << "cannot store the fleet tier's entry for " << query.key << " (" << stored
                      << "); compiling it here";
    return found;
  }
  // The inner tier answers it now, and records its first use here.
  return inner_->Find(query);
}

absl::Status FleetTier::Commit(const kiln::v1::ArtifactMetadata& metadata, std::string object,
                               bool synced) {
  std::unique_ptr<RemoteTier::Lease> lease;
  {
    absl::MutexLock lock(&mutex_);
    if (auto it = leases_.find(metadata.key()); it != leases_.end()) {
      lease = std::move(it->second);
      leases_.erase(it);
    }
  }
  RETURN_IF_ERROR(inner_->Commit(metadata, object, synced));
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
