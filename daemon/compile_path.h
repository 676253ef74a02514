// The one place kilnd compiles: a request's key, the tiers, single-flight,
// the build and the commit, read top to bottom in Compile.
//
//   Compile(request):
//     KeyRequest (import, verify, canonicalize, ComputeCacheKey)
//     -> the local tier's point lookup (on the caller's thread) -> hit: reply
//     miss -> a failure remembered for this key? reply with it
//     -> the top tier (the fleet tier, cache/remote/fleet_tier.h), one look
//        at a time on threads of its own, single-flight per key
//     -> CompileQueue (single-flight) -> GenerateCode -> Compiler
//     -> Tier::Commit (the fleet tier publishes behind the reply) -> reply
//
// A compile that fails deterministically is remembered per key
// (daemon/remembered_failures.h) and replayed to a retry.
//
// Thread-safe. Bad requests fail with InvalidArgument/Unimplemented naming
// the node; nothing a request does can corrupt a tier.
#ifndef KILN_DAEMON_COMPILE_PATH_H_
#define KILN_DAEMON_COMPILE_PATH_H_

#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "abi/target.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/local_tier.h"
#include "cache/request_digest.h"
#include "cache/request_key.h"
#include "cache/tier.h"
#include "codegen/codegen_inputs.h"
#include "codegen/compile/compiler.h"
#include "codegen/limits.h"
#include "daemon/compile_queue.h"
#include "daemon/failure_kind.h"
#include "daemon/miss_explainer.h"
#include "daemon/remembered_failures.h"
#include "proto/service.pb.h"

namespace kiln {

class CompilePath {
 public:
  struct Options {
    int compile_threads = 2;
    // Graphs of more nodes are refused before they are prepared
    // (InvalidArgument naming the limit and kilnd's --max_graph_nodes).
    int64_t max_graph_nodes = limits::kDefaultMaxGraphNodes;
    RememberedFailures::Options failures;
    std::function<absl::Time()> now = [] { return absl::Now(); };
    // Tests only: every compile takes at least this long.
    absl::Duration testonly_compile_delay = absl::ZeroDuration();
  };
  using Done = std::function<void(absl::StatusOr<kiln::v1::CompileResponse>)>;

  // `local` answers the point lookup; `tier` is the top of the chain that a
  // miss asks and a compile commits to (`local` itself, or a tier wrapping
  // it). `committed` runs after each commit. All must outlive this object.
  CompilePath(LocalTier* local, Tier* tier, Compiler* compiler, const TargetToolchains* toolchains,
              Options options, std::function<void()> committed);

  // Answers at once on a hit (on the calling thread); on a miss compiles on
  // the pool and calls `done` there — or, with `allow_compile` false
  // (Lookup), answers NotFound. `done` is called exactly once.
  void Compile(const kiln::v1::CompileRequest& request, bool allow_compile, Done done);
  // Stops accepting compiles; running ones finish.
  void Shutdown();

  // Counters, the compile-time histogram and the queue's length.
  void AddStats(kiln::v1::StatsResponse& stats);
  // The last `count` misses (at most kRememberedMisses), newest first.
  std::vector<KeyedRequestSummary> RecentMisses(int count);
  static constexpr int kRememberedMisses = 64;
  RememberedFailures& failures() { return failures_; }
  const ToolchainDigests& toolchain_digests() const { return toolchain_digests_; }

 private:
  absl::StatusOr<kiln::v1::CompileResponse> Build(const CodegenInputs& inputs,
                                                  const kiln::v1::KeyComponents& components,
                                                  const std::string& key,
                                                  const std::string& source_graph, bool want_bytes,
                                                  absl::Time received);

  LocalTier* const local_;
  Tier* const tier_;
  Compiler* const compiler_;
  const TargetToolchains* const toolchains_;
  const ToolchainDigests toolchain_digests_;  // their key components
  const RequestSalts request_salts_;          // for the request aliases
  const Options options_;
  const std::function<void()> committed_;
  RememberedFailures failures_;

  std::atomic<int64_t> hits_{0}, misses_{0}, compiles_{0}, compile_failures_{0}, coalesced_{0},
      failures_replayed_{0};
  std::atomic<int64_t> compile_us_total_{0};
  // The compile-time histogram (StatsResponse.compile_ms_bounds/counts):
  // from tens of milliseconds (a pointwise graph) to the default timeout.
  static constexpr double kCompileMsBounds[] = {10,   25,   50,    100,   250,   500,   1000,
                                                2500, 5000, 10000, 30000, 60000, 120000};
  std::array<std::atomic<int64_t>, std::size(kCompileMsBounds) + 1> compile_ms_counts_{};
  FailureCounts failures_by_kind_;  // failed Compile requests (not Lookups)

  absl::Mutex misses_mutex_;
  std::deque<KeyedRequestSummary> recent_misses_ ABSL_GUARDED_BY(misses_mutex_);  // newest first

  // With a tier over the local one: single-flight jobs that look there
  // before a compile job is queued. A job waiting on another machine's
  // lease holds no thread between looks.
  static constexpr int kLookThreads = 8;
  const std::unique_ptr<CompileQueue> look_queue_;
  CompileQueue compile_queue_;  // last: its threads use the members above
};

}  // namespace kiln

#endif  // KILN_DAEMON_COMPILE_PATH_H_
