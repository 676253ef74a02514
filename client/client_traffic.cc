// Client's traffic reports: what the CompiledGraphs counted, and the
// local-index hits, sent to kilnd while connected.
#include "client/client.h"
#include "common/logging.h"

namespace kiln {

void Client::ReportLocalIndexHitsAtExit() {
  if (local_index_hits_ == 0 || ForkedAfterGrpc() ||
      options_.traffic_report_interval <= absl::ZeroDuration()) {
    return;
  }
  std::shared_ptr<Transport> transport;
  {
    absl::MutexLock lock(&mutex_);
    // Never started or replaced for this: with no kilnd, no one counts.
    if (transport_ == nullptr && !ConnectLocked(/*replace_other_version=*/false).ok()) return;
    transport = transport_;
  }
  SendReport(*transport, nullptr);
}

void Client::AddTrafficSource(TrafficRecorder* recorder) {
  if (options_.traffic_report_interval <= absl::ZeroDuration()) return;
  absl::MutexLock lock(&traffic_mutex_);
  traffic_sources_.push_back(recorder);
  if (!traffic_reporter_.joinable())
    traffic_reporter_ = std::thread([this] { ReportTrafficLoop(); });
}

void Client::RemoveTrafficSource(TrafficRecorder* recorder) {
  {
    absl::MutexLock lock(&traffic_mutex_);
    const auto it = std::find(traffic_sources_.begin(), traffic_sources_.end(), recorder);
    if (it == traffic_sources_.end()) return;
    traffic_sources_.erase(it);
    // The reporter may be sending this one's counts: wait for it.
    traffic_mutex_.Await(
        absl::Condition(+[](bool* reporting) { return !*reporting; }, &traffic_reporting_));
  }
  SendTraffic(recorder);
}

void Client::SendTraffic(TrafficRecorder* recorder) {
  std::shared_ptr<Transport> transport;
  {
    absl::MutexLock lock(&mutex_);
    transport = transport_;
  }
  if (transport == nullptr) return;
  SendReport(*transport, recorder);
}

void Client::SendReport(Transport& transport, TrafficRecorder* recorder) {
  kiln::v1::TrafficReport report;
  if (recorder != nullptr) {
    *report.mutable_histogram() = recorder->TakeNew();
    if (report.histogram().rows_size() > 0 || report.histogram().other_calls() != 0) {
      report.set_graph_digest(recorder->graph_digest());
    } else {
      report.clear_histogram();
    }
  }
  report.set_local_index_hits(local_index_hits_.exchange(0, std::memory_order_relaxed));
  if (report.graph_digest().empty() && report.local_index_hits() == 0) return;
  // Best effort: counts a daemon did not take are not worth a retry.
  kiln::v1::TrafficReportResponse answer;
  const absl::Status sent = CallOnce(transport, "ReportTraffic", report, absl::Seconds(2), answer);
  // A daemon that has gone away (or is going) is no news.
  const absl::StatusCode code = sent.code();
  if (!sent.ok() && code != absl::StatusCode::kUnavailable &&
      code != absl::StatusCode::kCancelled) {
    KILN_LOG(WARNING) << "traffic report not sent: " << sent;
  }
}

void Client::ReportTrafficLoop() {
  absl::MutexLock lock(&traffic_mutex_);
  while (!stopping_) {
    traffic_mutex_.AwaitWithTimeout(absl::Condition(&stopping_), options_.traffic_report_interval);
    if (stopping_) return;
    // Sent without the lock (a new CompiledGraph does not wait for an
    // RPC); one being removed waits until traffic_reporting_ clears.
    const std::vector<TrafficRecorder*> sources = traffic_sources_;
    traffic_reporting_ = true;
    traffic_mutex_.Unlock();
    for (TrafficRecorder* recorder : sources) SendTraffic(recorder);
    SendTraffic(nullptr);  // local-index hits no recorder's report carried
    traffic_mutex_.Lock();
    traffic_reporting_ = false;
  }
}

}  // namespace kiln
