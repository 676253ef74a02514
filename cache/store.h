// Where artifacts live: cache entries (key -> metadata) and content-addressed
// blobs (digest -> shared-object bytes).
//
// Two implementations pass one conformance suite (store_conformance_test.cc):
// RocksDbStore (rocksdb_store.h), the daemon's, and MemoryStore
// (memory_store.h), for tests. A miss is a value (std::nullopt), never an
// error; errors are for a store that cannot answer. Damaged data is a miss
// too: an entry or blob that cannot be read (checksum mismatch, read error,
// bytes that do not parse or hash to their digest) is quarantined — removed
// from service, counted in Totals, logged — so the caller compiles again and
// the fresh Put heals it. All methods are thread-safe.
#ifndef KILN_CACHE_STORE_H_
#define KILN_CACHE_STORE_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/artifact.pb.h"

namespace kiln {

struct StoreTotals {
  int64_t entries = 0;
  int64_t blobs = 0;
  int64_t blob_bytes = 0;
  int64_t quarantined = 0;      // corrupt blobs set aside since the store was created
  int64_t corrupt_entries = 0;  // entries set aside as unreadable since then
  // Stretches of keys the count could not read (a damaged block): the
  // counts above are then lower bounds. Reading an entry in such a stretch
  // quarantines it.
  int64_t unreadable_ranges = 0;
};

// What eviction and listings need of an entry, without its metadata.
struct EntryUsage {
  std::string key;
  std::string digest;  // of its blob (entries may share one)
  int64_t object_bytes = 0;
  absl::Time last_use;  // its Put, or a later RecordUse
  bool pinned = false;  // never evicted by size or age
  // Copied from its metadata, for listings and pinning by graph.
  std::string graph_name;
  absl::Time created;
  double compile_ms = 0;
  std::string source_graph;
};

// An entry with its usage: what a listing shows.
struct ListedEntry {
  kiln::v1::ArtifactMetadata metadata;
  EntryUsage usage;
};

class ArtifactStore {
 public:
  virtual ~ArtifactStore() = default;

  // The entry for `key`, or nullopt — also when the entry is damaged (it is
  // quarantined).
  virtual absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> Lookup(
      const std::string& key) = 0;

  // The bytes of blob `digest`, verified against the digest on every read.
  // nullopt when absent — or damaged: a blob that fails its digest check or
  // cannot be read is moved to quarantine (kept for inspection, never
  // returned) and logged, so the caller treats it as a miss and compiles
  // again.
  virtual absl::StatusOr<std::optional<std::string>> ReadBlob(const std::string& digest) = 0;

  // Stores the entry and its blob in one atomic write. `metadata.digest()`
  // must be the SHA-256 of `blob` (InvalidArgument otherwise). Overwrites an
  // entry with the same key. `synced`: on disk before it returns; false for
  // what can be had again cheaply (another machine's entry from the fleet
  // tier), which an OS crash may then lose, but never tear.
  virtual absl::Status Put(const kiln::v1::ArtifactMetadata& metadata, absl::string_view blob,
                           bool synced = true) = 0;

  // Stores every entry and its blob in one atomic write, as Put each (an
  // import: all or nothing). Every digest is checked before anything is
  // written (InvalidArgument naming the entry); so is that no key repeats.
  virtual absl::Status PutAll(
      const std::vector<std::pair<kiln::v1::ArtifactMetadata, std::string>>& entries) = 0;

  // Stores `blob` under `digest` for a PutEntries to reference: an import
  // that holds one blob at a time. InvalidArgument unless it hashes to
  // `digest`. No entry references it until then, so it is in no count,
  // listing or lookup; Put, PutAll and PutEntries of its digest take it
  // over, and an Evict that drops the last reference to its digest removes
  // it.
  virtual absl::Status PutBlob(const std::string& digest, absl::string_view blob) = 0;

  // Stores every entry in one atomic write, as PutAll, each referencing the
  // blob of its digest (`blob_bytes` long) that a PutBlob or another entry
  // stored. FailedPrecondition naming the entry when that blob is not stored
  // (an eviction took it since); InvalidArgument when a key repeats.
  virtual absl::Status PutEntries(
      const std::vector<std::pair<kiln::v1::ArtifactMetadata, int64_t>>& entries) = 0;

  // Every readable entry, in key order (damaged ones are skipped and logged).
  virtual absl::StatusOr<std::vector<kiln::v1::ArtifactMetadata>> List() = 0;

  // At most `limit` readable entries with keys after `after_key` (empty:
  // from the first), in key order, each with its usage: one page of a
  // listing, reading nothing past it. Damaged entries are skipped and
  // logged, as in List.
  virtual absl::StatusOr<std::vector<ListedEntry>> ListAfter(const std::string& after_key,
                                                             int limit) = 0;

  // Keys that start with `prefix`, in order, at most `limit` of them.
  virtual absl::StatusOr<std::vector<std::string>> KeysWithPrefix(const std::string& prefix,
                                                                  int limit) = 0;

  // Removes the entry, and its blob when no other entry references it;
  // returns the digest of the blob removed with it (nullopt when the blob
  // stays). NotFound when there is no such entry. Not atomic with a
  // concurrent Put of an entry sharing the blob: callers serialize the two
  // (ArtifactCache does). `synced`: on disk before it returns; false for
  // one of many evictions (a gc) whose last is synced, which makes the
  // ones before it durable too. An OS crash before then may bring the
  // entry back, whole with its blob — never torn.
  virtual absl::StatusOr<std::optional<std::string>> Evict(const std::string& key,
                                                           bool synced = true) = 0;

  // Counts kept as entries come and go (never a scan of the store):
  // entries, the distinct blobs they reference and those blobs' bytes;
  // corrupt data found since the store was created.
  virtual absl::StatusOr<StoreTotals> Totals() = 0;

  // Notes a use of the entry (a hit) at `when`, for least-recently-used
  // eviction. NotFound when there is no such entry.
  virtual absl::Status RecordUse(const std::string& key, absl::Time when) = 0;
  // Pins or unpins the entry. NotFound when there is no such entry.
  virtual absl::Status SetPinned(const std::string& key, bool pinned) = 0;
  // Every entry's usage, in key order, read without reading any metadata.
  virtual absl::StatusOr<std::vector<EntryUsage>> Usage() = 0;
};

}  // namespace kiln

#endif  // KILN_CACHE_STORE_H_
