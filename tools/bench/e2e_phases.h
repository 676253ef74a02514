// What //tools/bench:e2e measures, phase by phase (tools/bench/e2e.cc
// runs them and reports): f = relu(x @ x.T + 1) at 64x64 float32 through
// cold compiles, fresh processes (this binary re-executed as a timed
// child), warm calls beside eager PyTorch, direct dispatch, and memory.
#ifndef KILN_TOOLS_BENCH_E2E_PHASES_H_
#define KILN_TOOLS_BENCH_E2E_PHASES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/compiled_graph.h"
#include "proto/graph_file.h"
#include "tools/bench/bench_util.h"

namespace kiln::bench {

inline constexpr int64_t kSize = 64;  // f is 64x64
inline constexpr int kReportFd = 3;   // a child's report pipe
inline constexpr char kNoopChild[] = "--child=noop";

// The flags of a timed child (e2e --child=MODE --socket --cache_dir --graph).
struct ChildFlags {
  std::string mode;  // fresh, hold or smaps
  std::string socket, cache_dir, graph;
};

// A fresh process's first call on a hit: connect, fetch, load, run once.
// Writes one byte to kReportFd the moment the first result exists (the
// parent timestamps its arrival), then its own timings there as one
// `key=value ...` line. `hold` then waits for EOF on stdin, keeping the
// artifact mapped; `smaps` adds what the artifact's mappings cost here.
absl::Status RunChild(const ChildFlags& flags);

// eager.py, alive across batches: torch is imported once, as in a serving
// process, and its allocator and caches stay warm.
class Eager {
 public:
  // Unavailable (with the reason) when python3 or torch is missing.
  static absl::StatusOr<std::unique_ptr<Eager>> Start(const std::string& python,
                                                      const std::string& script);

  // One batch of `calls` timed calls per variant; eager.py's answer.
  absl::StatusOr<Fields> Batch(int calls);

  // torch version, threads and the BLAS libraries it mapped.
  const Fields& facts() const { return process_->facts(); }

 private:
  Eager() = default;
  std::unique_ptr<LineProcess> process_;
};

// Each phase adds its figures (docs/BENCHMARKS.md, "End to end") to
// `samples`, over `rounds` rounds, baseline and Kiln alternating.
absl::Status MeasureColdCompile(const kiln::v1::Graph& graph, Daemon& subprocess, Daemon& worker,
                                int rounds, Samples& samples);
absl::Status MeasureFreshProcess(const std::string& self, const std::string& graph_path,
                                 const Daemon& daemon, int rounds, Samples& samples);
// Without `eager` (torch unavailable), Kiln's side alone.
absl::Status MeasureWarmCalls(CompiledGraph& compiled, Eager* eager, int rounds, int calls,
                              Samples& samples);
absl::Status MeasureDispatch(CompiledGraph& compiled, int rounds, int calls, Samples& samples);
absl::Status MeasureSecondClient(const std::string& self, const std::string& graph_path,
                                 const Daemon& daemon, Samples& samples);
absl::Status MeasureMemory(const Daemon& worker, const Daemon& subprocess, Samples& samples);

}  // namespace kiln::bench

#endif  // KILN_TOOLS_BENCH_E2E_PHASES_H_
