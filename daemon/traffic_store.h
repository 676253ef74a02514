// The input sizes serving processes report running each graph at
// (client/traffic.h), summed per graph in one file under
// <cache>/traffic/, so that `kiln warmup --suggest` can propose a plan from
// them, after a kilnd restart too. Bounded: the first kMaxRows distinct
// sizes of a graph get a row; later ones count in other_calls.
#ifndef KILN_DAEMON_TRAFFIC_STORE_H_
#define KILN_DAEMON_TRAFFIC_STORE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/service.pb.h"

namespace kiln {

class TrafficStore {
 public:
  static constexpr int kMaxRows = 1024;

  explicit TrafficStore(std::string dir) : dir_(std::move(dir)) {}

  // Adds the report's counts. InvalidArgument for a digest that is not 64
  // hex digits or a count below zero.
  absl::Status Add(const kiln::v1::TrafficReport& report) ABSL_LOCKS_EXCLUDED(mutex_);
  // The sums for a graph: empty when nothing was reported.
  absl::StatusOr<kiln::v1::TrafficHistogram> Get(const std::string& graph_digest)
      ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  absl::StatusOr<kiln::v1::TrafficHistogram> Read(const std::string& graph_digest)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const std::string dir_;
  absl::Mutex mutex_;
};

}  // namespace kiln

#endif  // KILN_DAEMON_TRAFFIC_STORE_H_
