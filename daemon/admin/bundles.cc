#include "daemon/admin/bundles.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache/bundle.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace kiln::admin {
namespace {

// kilnd opens bundles as its user, from its own working directory: a
// relative path would name a file the client did not mean.
absl::Status CheckBundlePath(const std::string& path) {
  if (absl::StartsWith(path, "/")) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("bundle path '", path, "' is not absolute"));
}

// The keys the request names, in the order asked for, each once; every
// stored key when it names none.
absl::StatusOr<std::vector<std::string>> ChooseKeys(LocalTier& tier,
                                                    const ToolchainDigests& toolchains,
                                                    const kiln::v1::ExportRequest& request) {
  std::vector<std::string> keys;
  absl::flat_hash_set<std::string> chosen;
  auto choose = [&](const std::string& key) {
    if (chosen.insert(key).second) keys.push_back(key);
  };
  for (const std::string& key_or_prefix : request.keys()) {
    ASSIGN_OR_RETURN(const std::string key, tier.ResolveKey(key_or_prefix));
    choose(key);
  }
  for (const kiln::v1::ExportRequest::NamedRequest& named : request.requests()) {
    absl::StatusOr<KeyedRequest> keyed = KeyRequest(named.request(), toolchains);
    if (!keyed.ok()) {
      return absl::Status(keyed.status().code(),
                          absl::StrCat(named.name(), ": ", keyed.status().message()));
    }
    ASSIGN_OR_RETURN(const std::optional<kiln::v1::ArtifactMetadata> stored,
                     tier.store().Lookup(keyed->key.key));
    if (!stored.has_value()) {
      return absl::NotFoundError(absl::StrCat(named.name(), " is not in the cache (key ",
                                              keyed->key.key.substr(0, 12),
                                              "): compile or warm it first"));
    }
    choose(keyed->key.key);
  }
  if (request.keys().empty() && request.requests().empty()) {
    ASSIGN_OR_RETURN(const std::vector<EntryUsage> everything, tier.store().Usage());
    for (const EntryUsage& entry : everything) choose(entry.key);
  }
  return keys;
}

}  // namespace

absl::StatusOr<kiln::v1::ExportResponse> Export(LocalTier& tier, const ToolchainDigests& toolchains,
                                                const kiln::v1::ExportRequest& request) {
  RETURN_IF_ERROR(CheckBundlePath(request.path()));
  ASSIGN_OR_RETURN(const std::vector<std::string> keys, ChooseKeys(tier, toolchains, request));
  ASSIGN_OR_RETURN(std::unique_ptr<BundleWriter> writer,
                   BundleWriter::Create(request.path(), keys.size()));
  kiln::v1::ExportResponse response;
  for (const std::string& key : keys) {
    ASSIGN_OR_RETURN(const std::optional<kiln::v1::ArtifactMetadata> entry,
                     tier.store().Lookup(key));
    if (!entry.has_value()) {
      return absl::NotFoundError(
          absl::StrCat("entry ", key, " was evicted during the export: export again"));
    }
    ASSIGN_OR_RETURN(const std::optional<std::string> blob, tier.store().ReadBlob(entry->digest()));
    if (!blob.has_value()) {
      return absl::DataLossError(
          absl::StrCat("entry ", key,
                       " has no intact blob (quarantined): evict it or compile it again, then "
                       "export again"));
    }
    RETURN_IF_ERROR(writer->Add(*entry, *blob));
    kiln::v1::BundledEntry* bundled = response.add_entries();
    bundled->set_key(key);
    bundled->set_graph_name(entry->graph_name());
    bundled->set_object_bytes(static_cast<int64_t>(blob->size()));
  }
  RETURN_IF_ERROR(writer->Finish());
  response.set_bundle_bytes(writer->bytes_written());
  KILN_LOG(INFO) << "exported " << keys.size() << " entries to " << request.path();
  return response;
}

absl::StatusOr<kiln::v1::ImportResponse> Import(LocalTier& tier, const ToolchainDigests& toolchains,
                                                const ImportOptions& options,
                                                const kiln::v1::ImportRequest& request) {
  RETURN_IF_ERROR(CheckBundlePath(request.path()));
  BundleLimits limits;
  limits.max_blob_bytes = static_cast<uint64_t>(options.max_blob_bytes);
  limits.max_metadata_bytes = static_cast<uint64_t>(options.max_metadata_bytes);
  KILN_LOG(INFO) << "importing " << request.path();
  // First pass: the whole file checked, holding no blob.
  std::vector<std::pair<kiln::v1::ArtifactMetadata, int64_t>> entries;  // with blob lengths
  RETURN_IF_ERROR(ScanBundle(
      request.path(), limits, /*with_blobs=*/false,
      [&](const kiln::v1::ArtifactMetadata& metadata, uint64_t blob_bytes, absl::string_view) {
        entries.emplace_back(metadata, static_cast<int64_t>(blob_bytes));
        return absl::OkStatus();
      }));
  kiln::v1::ImportResponse response;
  std::vector<std::string> refused;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [metadata, blob_bytes] = entries[i];
    const std::string reason = StaleReason(metadata, toolchains);
    kiln::v1::BundledEntry* entry = response.add_entries();
    entry->set_key(metadata.key());
    entry->set_graph_name(metadata.graph_name());
    entry->set_object_bytes(blob_bytes);
    entry->set_stale_reason(reason);
    if (!reason.empty()) {
      refused.push_back(
          absl::StrCat("entry ", i, " (key ", metadata.key().substr(0, 12), ", graph ",
                       metadata.graph_name().empty() ? "-" : metadata.graph_name(), "): ", reason));
    }
  }
  if (!refused.empty() && !request.force()) {
    constexpr size_t kListed = 5;
    const size_t more = refused.size() > kListed ? refused.size() - kListed : 0;
    refused.resize(refused.size() - more);
    return absl::FailedPreconditionError(absl::StrCat(
        request.path(), ": ", refused.size() + more, " of ", entries.size(),
        " entries were built for another toolchain, codegen version or target than this kilnd "
        "compiles for, and their keys cover those, so they could never be a hit here: ",
        absl::StrJoin(refused, "; "), more > 0 ? absl::StrCat("; and ", more, " more") : "",
        ". Nothing was imported; --force imports them anyway"));
  }

  // Second pass: one blob at a time into the tier, where no entry
  // references it yet. A file that changed since the first pass is refused
  // by its checks, or here.
  size_t next = 0;
  RETURN_IF_ERROR(
      ScanBundle(request.path(), limits, /*with_blobs=*/true,
                 [&](const kiln::v1::ArtifactMetadata& metadata, uint64_t, absl::string_view blob) {
                   if (next >= entries.size() || entries[next].first.key() != metadata.key() ||
                       entries[next].first.digest() != metadata.digest()) {
                     return absl::AbortedError(absl::StrCat(
                         request.path(), " changed during the import: import it again"));
                   }
                   ++next;
                   return tier.StageBlob(metadata, blob);
                 }));
  if (next != entries.size()) {
    return absl::AbortedError(
        absl::StrCat(request.path(), " changed during the import: import it again"));
  }
  absl::SleepFor(options.testonly_delay);
  // Imported now: not the oldest in the cache for eviction.
  RETURN_IF_ERROR(tier.CommitImported(entries, options.now));
  KILN_LOG(INFO) << "imported " << entries.size() << " entries from " << request.path()
                 << (refused.empty() ? "" : absl::StrCat(" (", refused.size(), " forced)"));
  return response;
}

}  // namespace kiln::admin
