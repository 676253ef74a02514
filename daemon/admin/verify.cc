#include "daemon/admin/verify.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace kiln::admin {

absl::StatusOr<kiln::v1::VerifyResponse> Verify(LocalTier& tier, bool repair) {
  ArtifactStore& store = tier.store();
  const ObjectDirectory& objects = tier.objects();
  const LocalIndex& index = tier.index();
  kiln::v1::VerifyResponse report;
  auto problem = [&](const std::string& key, absl::string_view what) {
    report.add_problems(absl::StrCat(key.substr(0, 16), ": ", what));
  };
  ASSIGN_OR_RETURN(const std::vector<EntryUsage> entries, store.Usage());
  absl::flat_hash_set<std::string> digests;
  for (const EntryUsage& usage : entries) {
    report.set_entries(report.entries() + 1);
    digests.insert(usage.digest);
    // Reading quarantines a damaged entry or blob (cache/store.h).
    ASSIGN_OR_RETURN(const std::optional<kiln::v1::ArtifactMetadata> entry,
                     store.Lookup(usage.key));
    if (!entry.has_value()) {
      report.set_bad_entries(report.bad_entries() + 1);
      problem(usage.key, "metadata unreadable: quarantined");
      absl::MutexLock lock(&tier.mutex());
      RETURN_IF_ERROR(index.Remove(usage.key));
      continue;
    }
    ASSIGN_OR_RETURN(const std::optional<std::string> blob, store.ReadBlob(entry->digest()));
    if (!blob.has_value()) {
      report.set_bad_blobs(report.bad_blobs() + 1);
      problem(usage.key, "blob does not match its digest: quarantined");
      if (repair) {
        const absl::Status evicted = tier.Evict(usage.key);
        if (!evicted.ok() && !absl::IsNotFound(evicted)) return evicted;
        report.set_repaired(report.repaired() + 1);
      }
      continue;
    }
    absl::MutexLock lock(&tier.mutex());
    const absl::StatusOr<std::string> object = ReadFile(objects.PathFor(entry->digest()));
    if (!object.ok() || Sha256Hex(*object) != entry->digest()) {
      report.set_bad_objects(report.bad_objects() + 1);
      problem(usage.key,
              object.ok() ? "object file does not match its digest" : "object file missing");
      if (repair) {
        RETURN_IF_ERROR(objects.Write(entry->digest(), *blob, /*replace=*/true));
        report.set_repaired(report.repaired() + 1);
      }
    }
    const absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> indexed = index.Find(usage.key);
    if (!indexed.ok()) {
      report.set_bad_index(report.bad_index() + 1);
      problem(usage.key, indexed.status().message());
    } else if (!indexed->has_value()) {
      report.set_unindexed(report.unindexed() + 1);
    }
    if (repair && (!indexed.ok() || !indexed->has_value())) {
      RETURN_IF_ERROR(index.Remove(usage.key));
      RETURN_IF_ERROR(index.Publish(*entry));
      if (!indexed.ok()) report.set_repaired(report.repaired() + 1);
    }
  }
  // Object files no entry references (left by a crash between writes).
  ASSIGN_OR_RETURN(const std::vector<std::string> orphans, objects.Digests());
  absl::MutexLock lock(&tier.mutex());  // a Commit writes its object before its entry
  for (const std::string& digest : orphans) {
    if (digests.contains(digest)) continue;
    report.set_orphan_objects(report.orphan_objects() + 1);
    if (repair) RETURN_IF_ERROR(objects.Remove(digest));
  }
  return report;
}

}  // namespace kiln::admin
