// The cache on this machine: entries and blobs in the store (RocksDB), their
// object files, and the local index that same-host clients read. The one
// place that writes to them, in one order:
//
//   object file -> store batch (entry + blob) -> index record -> alias
//
// so that an index record always has its entry and object behind it, and an
// entry always has its object file or gets it back from its blob (Find
// rewrites a missing one). Eviction goes the other way: index record, then
// entry, then the object file when no other entry shares it.
//
// The bottom tier (cache/tier.h). One lock keeps writes and evictions of an
// entry apart: Find, Commit and Evict take it; the admin commands that walk the whole cache
// (verify, reconciliation) take it per entry through mutex(). Thread-safe.
#ifndef KILN_CACHE_LOCAL_TIER_H_
#define KILN_CACHE_LOCAL_TIER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/local_index.h"
#include "cache/object_dir.h"
#include "cache/store.h"
#include "cache/tier.h"
#include "proto/service.pb.h"

namespace kiln {

// A use the store has not recorded (a client's local-index hit,
// LocalIndex::LastTouched), or nullopt.
using LastTouchedFn = std::function<std::optional<absl::Time>(const std::string& key)>;

class LocalTier : public Tier {
 public:
  // `max_artifact_bytes`: the largest object Commit stores
  // (ResourceExhausted past it, naming kilnd --max_artifact_bytes). `now`
  // stamps the uses hits record.
  LocalTier(std::unique_ptr<ArtifactStore> store, ObjectDirectory objects, LocalIndex index,
            int64_t max_artifact_bytes, std::function<absl::Time()> now);

  // The artifact if the store has it, with its object file on disk
  // (written from the blob when missing, rewritten with `repair`), its
  // index record published and its use recorded. A miss on a corrupt blob
  // takes its index record out. Never asks to look again.
  absl::StatusOr<Found> Find(Query& query) override;
  // Stores one entry with its object, in the order above.
  absl::Status Commit(const kiln::v1::ArtifactMetadata& metadata, std::string object,
                      bool synced) override;
  // Writes one bundle entry's object file (unsynced) and stores its blob,
  // which no entry references until CommitImported.
  absl::Status StageBlob(const kiln::v1::ArtifactMetadata& metadata, absl::string_view blob);
  // Stores a bundle's entries, whose blobs StageBlob stored, in one batch; records `now` as their
  // last use and publishes their index records, then syncs the object directory once.
  absl::Status CommitImported(
      const std::vector<std::pair<kiln::v1::ArtifactMetadata, int64_t>>& entries, absl::Time now);
  // Publishes the alias from a request's digest to the key it was answered
  // with (cache/local_index.h); a failure is logged, not returned.
  void CommitAlias(const std::string& request_digest, const std::string& key);
  // Takes the entry out of the local index, then the store, then its object
  // file when no other entry shares it. Not `synced`: one of many.
  absl::Status Evict(const std::string& key, bool synced = true);

  // The full key of the one entry whose key starts with `key_or_prefix`
  // (at least 6 hex digits): InvalidArgument when shorter or ambiguous,
  // NotFound when none.
  absl::StatusOr<std::string> ResolveKey(const std::string& key_or_prefix);

  // Clients' local-index uses: from the last RefreshTouches (a walk of the
  // index), or, before one, a stat per entry asked about.
  void RefreshTouches();
  LastTouchedFn LastTouched();
  bool TouchesRead();

  ArtifactStore& store() { return *store_; }
  const ObjectDirectory& objects() const { return objects_; }
  const LocalIndex& index() const { return index_; }
  absl::Mutex& mutex() { return mutex_; }

 private:
  const std::unique_ptr<ArtifactStore> store_;
  const ObjectDirectory objects_;
  const LocalIndex index_;
  const int64_t max_artifact_bytes_;
  const std::function<absl::Time()> now_;
  // Shared by hits (they only rename files in), exclusive for the rest.
  absl::Mutex mutex_;

  absl::Mutex touches_mutex_;
  std::shared_ptr<const absl::flat_hash_map<std::string, absl::Time>> touches_
      ABSL_GUARDED_BY(touches_mutex_);
};

}  // namespace kiln

#endif  // KILN_CACHE_LOCAL_TIER_H_
