// Recorded traffic: the input sizes a CompiledGraph is run at, and how
// often, so that `kiln warmup --suggest` can propose the buckets that cover
// them (docs/WARMUP.md).
//
// A TrafficRecorder is a fixed table of kRows rows, one per distinct set of
// input sizes, filed by the hash of the sizes that Run computes anyway.
// Counting a call is a probe and a relaxed load and store: no lock, no
// allocation (only a new size's first call copies its sizes). Counts are
// approximate under concurrent calls at one size (an increment may be
// lost). Sizes past the table count in other_calls.
//
// The Client sends each recorder's new counts to kilnd now and then, only
// over a connection it already has (client/client.h).
#ifndef KILN_CLIENT_TRAFFIC_H_
#define KILN_CLIENT_TRAFFIC_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/tensor.h"
#include "proto/graph.pb.h"
#include "proto/warmup.pb.h"

namespace kiln {

// The SHA-256 of a graph's deterministic encoding: what traffic is filed
// under, in a serving process and in `kiln warmup --suggest GRAPH`.
std::string GraphDigest(const kiln::v1::Graph& graph);

class TrafficRecorder {
 public:
  static constexpr int kRows = 64;

  // `graph` (the one the CompiledGraph was given) must outlive it.
  explicit TrafficRecorder(const kiln::v1::Graph* graph) : graph_(graph) {}
  TrafficRecorder(const TrafficRecorder&) = delete;
  TrafficRecorder& operator=(const TrafficRecorder&) = delete;

  // Counts one call at `inputs`' sizes, whose hash is `sizes_hash`.
  void Record(uint64_t sizes_hash, absl::Span<const TensorView> inputs);

  // The calls counted since the last TakeNew (empty when none).
  kiln::v1::TrafficHistogram TakeNew() ABSL_LOCKS_EXCLUDED(take_mutex_);
  // GraphDigest of the graph, computed on first use.
  const std::string& graph_digest() ABSL_LOCKS_EXCLUDED(take_mutex_);

 private:
  struct Row {
    std::atomic<uint64_t> hash{0};   // 0: free
    std::atomic<bool> ready{false};  // `sizes` written
    std::vector<int64_t> sizes;
    std::atomic<int64_t> calls{0};
    int64_t taken = 0;  // calls already returned by TakeNew
  };

  const kiln::v1::Graph* const graph_;
  std::array<Row, kRows> rows_;
  std::atomic<int64_t> other_calls_{0};
  absl::Mutex take_mutex_;
  int64_t other_taken_ ABSL_GUARDED_BY(take_mutex_) = 0;
  std::string digest_ ABSL_GUARDED_BY(take_mutex_);
};

}  // namespace kiln

#endif  // KILN_CLIENT_TRAFFIC_H_
