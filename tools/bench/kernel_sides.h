// The two sides of //tools/bench:kernels: Kiln's (a traced graph compiled
// on Runtime(1) and Runtime(2), checked against float64 references) and
// eager PyTorch's (one long-lived eager_kernels.py process per
// configuration), and the hand-written and copy baselines beside them.
#ifndef KILN_TOOLS_BENCH_KERNEL_SIDES_H_
#define KILN_TOOLS_BENCH_KERNEL_SIDES_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "client/compiled_graph.h"
#include "client/runtime/runtime.h"
#include "client/tensor.h"
#include "proto/reference.pb.h"
#include "tools/bench/accuracy.h"
#include "tools/bench/bench_util.h"

namespace kiln::bench {

inline constexpr char kKernelsTarget[] = "//tools/bench:kernels";
inline constexpr char kTraced[] = "tools/bench/traced/";  // NAME{,.ref,.ref64}.json

// The eager processes: ATen dispatch x threads.
struct EagerConfig {
  const char* name;  // key part: "eager", "eager_default", "eager_fresh_heap"
  int threads;
  bool avx512;
  // glibc's initial malloc thresholds, held: without this, freeing the
  // references' 22 MiB strings at start-up raises them, and 16 MiB blocks
  // then stay on the heap. A fresh process calling relu(x + 1.0) in a loop
  // faults both 16 MiB buffers in on every call (glibc trims them off the
  // heap's top; held at these values it maps and unmaps them instead: the
  // same faults; docs/BENCHMARKS.md).
  // Only the tail's allocating variant runs here.
  bool fresh_heap = false;
};
inline constexpr EagerConfig kEagerConfigs[] = {{"eager", 1, true},
                                                {"eager_default", 1, false},
                                                {"eager", 2, true},
                                                {"eager_default", 2, false},
                                                {"eager_fresh_heap", 1, true, true},
                                                {"eager_fresh_heap", 2, true, true}};

// "" at 1 thread, "_2t" at 2: the suffix of a figure's key.
std::string ThreadSuffix(int threads);

// One traced graph on Kiln's side: its inputs (the trace's), preallocated
// outputs, and a CompiledGraph per runtime.
struct KilnGraph {
  std::string name;
  kiln::v1::Reference reference;
  // Eager PyTorch in float64 on the same inputs (reference64.py), and each
  // output's reduction length: what both sides are checked against.
  std::vector<std::vector<double>> reference64;
  std::vector<int64_t> reduction_lengths;
  bench::Accuracy accuracy;  // Kiln's outputs, the worst over runtimes and variants
  std::vector<Tensor> inputs;
  std::vector<TensorView> input_views;
  // Per thread count (index 0: 1 thread, 1: 2 threads).
  std::unique_ptr<CompiledGraph> compiled[2];
  std::vector<Tensor> outputs[2];
  std::vector<TensorView> output_views[2];
  std::string error;       // non-empty: wrong or failed; no Kiln figures
  bool hand = false;       // hand-written baselines exist for it and matched eager
  std::string hand_error;  // why a baseline that exists was left out
  // Calls per batch of each side (by batch name), set by the warm-up round
  // so that every batch takes about --batch_ms; until then --min_calls.
  std::map<std::string, int> calls;
};

// The hand-written baselines of `graph` at 1 thread (hand_kernels.h), by
// name: each writes Kiln's preallocated output.
std::vector<std::pair<std::string, std::function<void()>>> HandBaselines(KilnGraph& graph);

// NAME's traced graph, compiled on both runtimes and checked (a wrong or
// failed one has `error` set; its hand-written baselines, `hand`).
absl::StatusOr<std::unique_ptr<KilnGraph>> LoadKilnGraph(const std::string& name, Client& client,
                                                         Runtime* runtimes[2]);

// One eager configuration's process.
struct EagerSide {
  EagerConfig config;
  std::unique_ptr<LineProcess> process;  // null when unavailable
  std::string error;
  // Graphs whose eager output failed its float64 check: not timed here.
  std::map<std::string, std::string> wrong;

  // One batch of `calls` calls of `graph` (variant alloc or out).
  absl::StatusOr<Batch> Time(const std::string& graph, const char* variant, int calls);

  // Returns when the process's CPU time has not moved for 30 ms (at most
  // 1 s). CPU time comes in 10 ms ticks.
  void Settle();
};

// One process per configuration in kEagerConfigs that has a graph of
// `selected`, with its facts and its accuracy on `graphs` checked (a side
// that failed to start has `error` set).
absl::StatusOr<std::vector<EagerSide>> StartEager(
    const std::string& python, const std::string& script, const std::string& workloads,
    const std::string& traced, const std::vector<std::string>& selected,
    const std::vector<std::unique_ptr<KilnGraph>>& graphs, Fields& facts, Samples& samples);

// A batch of the plain copy loop over the tail's buffers (the bandwidth
// baseline), on runtimes[t]'s pool.
Batch TimeCopy(const KilnGraph& tail, int t, Runtime& runtime, int calls);

}  // namespace kiln::bench

#endif  // KILN_TOOLS_BENCH_KERNEL_SIDES_H_
