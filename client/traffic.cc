#include "client/traffic.h"

#include "cache/request_digest.h"
#include "common/sha256.h"

namespace kiln {
namespace {

// Not an atomic increment: a lost count under contention is cheaper than a
// locked instruction on every call.
void Bump(std::atomic<int64_t>& counter) {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// Rows a hash may take, from its home row on.
constexpr int kProbes = 8;

}  // namespace

std::string GraphDigest(const kiln::v1::Graph& graph) {
  return Sha256Hex(DeterministicBytes(graph));
}

void TrafficRecorder::Record(uint64_t sizes_hash, absl::Span<const TensorView> inputs) {
  const uint64_t hash = sizes_hash == 0 ? 1 : sizes_hash;
  for (int probe = 0; probe < kProbes; ++probe) {
    Row& row = rows_[(hash + probe) % kRows];
    uint64_t present = row.hash.load(std::memory_order_acquire);
    if (present == 0 && row.hash.compare_exchange_strong(present, hash)) {
      for (const TensorView& input : inputs) {
        row.sizes.insert(row.sizes.end(), input.sizes.begin(), input.sizes.end());
      }
      row.ready.store(true, std::memory_order_release);
      Bump(row.calls);
      return;
    }
    if (present == hash) {
      Bump(row.calls);
      return;
    }
  }
  Bump(other_calls_);
}

kiln::v1::TrafficHistogram TrafficRecorder::TakeNew() {
  absl::MutexLock lock(&take_mutex_);
  kiln::v1::TrafficHistogram histogram;
  for (Row& row : rows_) {
    if (!row.ready.load(std::memory_order_acquire)) continue;
    const int64_t calls = row.calls.load(std::memory_order_relaxed);
    if (calls == row.taken) continue;
    auto* out = histogram.add_rows();
    out->mutable_sizes()->Add(row.sizes.begin(), row.sizes.end());
    out->set_calls(calls - row.taken);
    row.taken = calls;
  }
  const int64_t other = other_calls_.load(std::memory_order_relaxed);
  histogram.set_other_calls(other - other_taken_);
  other_taken_ = other;
  return histogram;
}

const std::string& TrafficRecorder::graph_digest() {
  absl::MutexLock lock(&take_mutex_);
  if (digest_.empty()) digest_ = GraphDigest(*graph_);
  return digest_;
}

}  // namespace kiln
