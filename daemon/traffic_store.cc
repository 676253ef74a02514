#include "daemon/traffic_store.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<kiln::v1::TrafficHistogram> TrafficStore::Read(const std::string& graph_digest) {
  if (!IsSha256Hex(graph_digest)) {
    return absl::InvalidArgumentError(absl::StrCat("graph digest '", graph_digest.substr(0, 80),
                                                   "' is not 64 lowercase hex digits"));
  }
  kiln::v1::TrafficHistogram histogram;
  const absl::StatusOr<std::string> bytes = ReadFile(absl::StrCat(dir_, "/", graph_digest));
  if (absl::IsNotFound(bytes.status())) return histogram;
  RETURN_IF_ERROR(bytes.status());
  // A damaged file only loses the counts: traffic starts again.
  if (!histogram.ParseFromString(*bytes)) histogram.Clear();
  return histogram;
}

absl::Status TrafficStore::Add(const kiln::v1::TrafficReport& report) {
  absl::MutexLock lock(&mutex_);
  ASSIGN_OR_RETURN(kiln::v1::TrafficHistogram sums, Read(report.graph_digest()));
  std::map<std::vector<int64_t>, int64_t> calls;
  for (const auto& row : sums.rows()) calls[{row.sizes().begin(), row.sizes().end()}] = row.calls();
  if (report.histogram().other_calls() < 0) {
    return absl::InvalidArgumentError("a traffic report counts below zero other calls");
  }
  int64_t other_calls = sums.other_calls() + report.histogram().other_calls();
  for (const auto& row : report.histogram().rows()) {
    if (row.calls() < 0) return absl::InvalidArgumentError("a traffic row counts below zero calls");
    std::vector<int64_t> sizes(row.sizes().begin(), row.sizes().end());
    if (calls.count(sizes) == 0 && calls.size() >= kMaxRows) {
      other_calls += row.calls();
    } else {
      calls[std::move(sizes)] += row.calls();
    }
  }
  sums.Clear();
  for (const auto& [sizes, count] : calls) {
    auto* row = sums.add_rows();
    row->mutable_sizes()->Add(sizes.begin(), sizes.end());
    row->set_calls(count);
  }
  sums.set_other_calls(other_calls);
  RETURN_IF_ERROR(MakeDirectories(dir_, 0700));
  return WriteFileAtomically(absl::StrCat(dir_, "/", report.graph_digest()),
                             sums.SerializeAsString(), 0600);
}

absl::StatusOr<kiln::v1::TrafficHistogram> TrafficStore::Get(const std::string& graph_digest) {
  absl::MutexLock lock(&mutex_);
  return Read(graph_digest);
}

}  // namespace kiln
