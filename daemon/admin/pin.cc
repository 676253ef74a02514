#include "daemon/admin/pin.h"

#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kiln::admin {
namespace {

absl::StatusOr<std::vector<std::string>> KeysWithPrefix(ArtifactStore& store,
                                                        const std::string& prefix) {
  if (prefix.size() < 6) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", prefix, "' is too short: give at least 6 hex digits"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> keys,
                   store.KeysWithPrefix(prefix, std::numeric_limits<int>::max()));
  if (keys.empty()) return absl::NotFoundError(absl::StrCat("no entry with key ", prefix));
  return keys;
}

absl::StatusOr<std::vector<std::string>> KeysOfGraph(ArtifactStore& store,
                                                     const std::string& graph_digest) {
  ASSIGN_OR_RETURN(const std::vector<EntryUsage> entries, store.Usage());  // no metadata
  std::vector<std::string> keys;
  for (const EntryUsage& entry : entries) {
    if (entry.source_graph == graph_digest) keys.push_back(entry.key);
  }
  if (keys.empty()) {
    return absl::NotFoundError(
        "no entry was compiled from this graph (CompiledGraph, kiln run and kiln warmup record "
        "the graph they were given)");
  }
  return keys;
}

}  // namespace

absl::StatusOr<kiln::v1::PinResponse> Pin(LocalTier& tier, const kiln::v1::PinRequest& request) {
  ArtifactStore& store = tier.store();
  ASSIGN_OR_RETURN(const std::vector<std::string> keys,
                   request.graph_digest().empty() ? KeysWithPrefix(store, request.key())
                                                  : KeysOfGraph(store, request.graph_digest()));
  for (const std::string& key : keys) RETURN_IF_ERROR(store.SetPinned(key, request.pinned()));
  kiln::v1::PinResponse pinned;
  *pinned.mutable_keys() = {keys.begin(), keys.end()};
  return pinned;
}

}  // namespace kiln::admin
