// An in-memory ArtifactStore, for tests. Same contract as RocksDbStore.
#ifndef KILN_CACHE_MEMORY_STORE_H_
#define KILN_CACHE_MEMORY_STORE_H_

#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cache/store.h"

namespace kiln {

class MemoryStore : public ArtifactStore {
 public:
  absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> Lookup(const std::string& key) override;
  absl::StatusOr<std::optional<std::string>> ReadBlob(const std::string& digest) override;
  absl::Status Put(const kiln::v1::ArtifactMetadata& metadata, absl::string_view blob,
                   bool synced = true) override;
  absl::Status PutAll(
      const std::vector<std::pair<kiln::v1::ArtifactMetadata, std::string>>& entries) override;
  absl::Status PutBlob(const std::string& digest, absl::string_view blob) override;
  absl::Status PutEntries(
      const std::vector<std::pair<kiln::v1::ArtifactMetadata, int64_t>>& entries) override;
  absl::StatusOr<std::vector<kiln::v1::ArtifactMetadata>> List() override;
  absl::StatusOr<std::vector<ListedEntry>> ListAfter(const std::string& after_key,
                                                     int limit) override;
  absl::StatusOr<std::vector<std::string>> KeysWithPrefix(const std::string& prefix,
                                                          int limit) override;
  absl::StatusOr<std::optional<std::string>> Evict(const std::string& key,
                                                   bool synced = true) override;
  absl::StatusOr<StoreTotals> Totals() override;
  absl::Status RecordUse(const std::string& key, absl::Time when) override;
  absl::Status SetPinned(const std::string& key, bool pinned) override;
  absl::StatusOr<std::vector<EntryUsage>> Usage() override;

  // Fault injection: replace a blob's bytes without updating its digest, or
  // an entry's bytes with anything.
  void OverwriteBlobForTesting(const std::string& digest, std::string bytes);
  void OverwriteEntryForTesting(const std::string& key, std::string bytes);

 private:
  // Put, PutAll and PutEntries, after their checks, with the blob stored.
  void PutLocked(const kiln::v1::ArtifactMetadata& metadata, int64_t blob_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  absl::Mutex mutex_;
  // Entries as serialized bytes, as RocksDbStore keeps them, so that a
  // damaged entry can be injected and must be parsed on every read.
  std::map<std::string, std::string> entries_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, std::string> blobs_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, std::string> quarantine_ ABSL_GUARDED_BY(mutex_);  // blobs
  std::map<std::string, std::string> quarantined_entries_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, EntryUsage> usage_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kiln

#endif  // KILN_CACHE_MEMORY_STORE_H_
