// RocksDB statuses, options, usage records and damaged copies for RocksDbStore.
#include "cache/rocksdb_util.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/logging.h"

namespace kiln {

kiln::v1::StoredUsage UsageRecord(const kiln::v1::ArtifactMetadata& metadata, int64_t object_bytes,
                                  int64_t last_use_unix_ms, bool pinned) {
  kiln::v1::StoredUsage usage;
  usage.set_digest(metadata.digest());
  usage.set_object_bytes(object_bytes);
  usage.set_last_use_unix_ms(last_use_unix_ms);
  usage.set_pinned(pinned);
  usage.set_graph_name(metadata.graph_name());
  usage.set_created_unix_ms(metadata.created_unix_ms());
  usage.set_compile_ms(metadata.timings().total_ms());
  usage.set_source_graph(metadata.source_graph());
  return usage;
}

EntryUsage FromUsageRecord(std::string key, const kiln::v1::StoredUsage& usage) {
  EntryUsage entry;
  entry.key = std::move(key);
  entry.digest = usage.digest();
  entry.object_bytes = usage.object_bytes();
  entry.last_use = absl::FromUnixMillis(usage.last_use_unix_ms());
  entry.pinned = usage.pinned();
  entry.graph_name = usage.graph_name();
  entry.created = absl::FromUnixMillis(usage.created_unix_ms());
  entry.compile_ms = usage.compile_ms();
  entry.source_graph = usage.source_graph();
  return entry;
}

absl::Status FromRocks(const rocksdb::Status& status, absl::string_view what) {
  if (status.ok()) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", status.ToString());
  if (status.IsIOError() && absl::StrContains(status.ToString(), "lock")) {
    return absl::FailedPreconditionError(
        absl::StrCat(message, " (is another kilnd using this cache directory?)"));
  }
  if (status.IsCorruption()) return absl::DataLossError(message);
  return absl::InternalError(message);
}

bool IsDamage(const rocksdb::Status& status) { return status.IsCorruption() || status.IsIOError(); }

rocksdb::WriteOptions SyncedWrite() {
  rocksdb::WriteOptions options;
  options.sync = true;  // a compile costs far more than an fsync
  return options;
}

rocksdb::ReadOptions CheckedRead() {
  rocksdb::ReadOptions options;
  options.verify_checksums = true;  // the default, and the point: damage must show as damage
  return options;
}

// "<directory>.corrupt-<unix ms>", kept for inspection.
absl::StatusOr<std::string> MoveAside(const std::string& from, const std::string& directory) {
  std::string aside = absl::StrCat(directory, ".corrupt-", absl::ToUnixMillis(absl::Now()));
  // Two heals within one millisecond must not collide.
  for (int n = 2; access(aside.c_str(), F_OK) == 0; ++n) {
    aside = absl::StrCat(directory, ".corrupt-", absl::ToUnixMillis(absl::Now()), "-", n);
  }
  if (rename(from.c_str(), aside.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot move ", from, " to ", aside, ": ", strerror(errno)));
  }
  return aside;
}

// Removes all but the newest `keep` of the copies MoveAside made beside
// `directory` (newest by the time in their names).
void SweepCorruptCopies(const std::string& directory, int keep) {
  const std::filesystem::path path(directory);
  const std::string prefix = path.filename().string() + ".corrupt-";
  std::vector<std::tuple<int64_t, int64_t, std::string>> copies;  // unix ms, n, path
  std::error_code error;
  std::filesystem::directory_iterator it(
      path.has_parent_path() ? path.parent_path() : std::filesystem::path("."), error);
  for (; !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!absl::StartsWith(name, prefix)) continue;
    const std::vector<std::string> parts = absl::StrSplit(name.substr(prefix.size()), '-');
    int64_t unix_ms = 0, n = 1;
    if (!absl::SimpleAtoi(parts[0], &unix_ms) ||
        (parts.size() > 1 && !absl::SimpleAtoi(parts[1], &n))) {
      continue;
    }
    copies.emplace_back(unix_ms, n, it->path().string());
  }
  std::sort(copies.begin(), copies.end());
  for (size_t i = 0; i + std::max(keep, 0) < copies.size(); ++i) {
    const std::string& copy = std::get<2>(copies[i]);
    if (const absl::Status removed = RemoveRecursively(copy); !removed.ok()) {
      KILN_LOG(WARNING) << "cannot remove " << copy << ": " << removed;
    } else {
      KILN_LOG(INFO) << "removed " << copy << " (keeping the newest " << keep
                     << " copies of damaged stores)";
    }
  }
}

}  // namespace kiln
