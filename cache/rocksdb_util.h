// RocksDB statuses, read and write options, usage records and damaged-copy
// handling shared by the RocksDbStore's files.
#ifndef KILN_CACHE_ROCKSDB_UTIL_H_
#define KILN_CACHE_ROCKSDB_UTIL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cache/store.h"
#include "proto/artifact.pb.h"
#include "rocksdb/options.h"
#include "rocksdb/status.h"

namespace kiln {

inline constexpr char kEntryQuarantinePrefix[] = "entry:";

// The usage record of an entry with `metadata`.
kiln::v1::StoredUsage UsageRecord(const kiln::v1::ArtifactMetadata& metadata, int64_t object_bytes,
                                  int64_t last_use_unix_ms, bool pinned);

EntryUsage FromUsageRecord(std::string key, const kiln::v1::StoredUsage& usage);

absl::Status FromRocks(const rocksdb::Status& status, absl::string_view what);

// What a read reports when the bytes behind a key are damaged: a block that
// fails its checksum, or a read the device refuses. Either way the data is
// gone for this store; a cache recompiles.
bool IsDamage(const rocksdb::Status& status);

rocksdb::WriteOptions SyncedWrite();

rocksdb::ReadOptions CheckedRead();

// Moves `from` (a damaged database, or what a repair set aside) to a new
// "<directory>.corrupt-<unix ms>", kept for inspection.
absl::StatusOr<std::string> MoveAside(const std::string& from, const std::string& directory);

// Removes all but the newest `keep` of the copies MoveAside made beside
// `directory` (newest by the time in their names).
void SweepCorruptCopies(const std::string& directory, int keep);

}  // namespace kiln

#endif  // KILN_CACHE_ROCKSDB_UTIL_H_
