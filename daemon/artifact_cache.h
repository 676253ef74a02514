// What kilnd does, without the RPC layer: request -> key -> store, and on a
// miss the compile pipeline, once per key.
//
//   Compile(request):
//     PrepareGraph (import, verify, canonicalize) -> ResolveGuards ->
//     ComputeCacheKey -> LocalTier::Find -> hit: reply
//     miss -> a failure remembered for this key? reply with it
//     miss -> CompileQueue (single-flight) -> GenerateCode -> Compiler ->
//     LocalTier::Commit (cache/local_tier.h) -> reply
//
// With a fleet tier (Options::remote, cache/remote/fleet_tier.h), a miss
// first goes to a fleet job (single-flight too, on threads of its own, and
// holding none while it waits on another machine's lease between looks):
// another machine's entry is stored here and answered; otherwise the
// compile job compiles under the fleet-wide lease the fleet tier holds,
// and its Commit publishes the artifact behind the reply.
//
// A compile that fails deterministically is remembered per key
// (daemon/remembered_failures.h) and replayed to a retry; Evict forgets it.
//
// Eviction (daemon/admin/gc.h) to Options::max_cache_bytes and
// Options::max_entry_age: a background thread runs it every
// Options::gc_interval and after a compile that went past the cap, so a hit
// never waits on it. The other admin commands are functions of tier()
// (daemon/admin/).
//
// Thread-safe. Bad requests fail with InvalidArgument/Unimplemented naming
// the node; nothing a request does can corrupt the store.
#ifndef KILN_DAEMON_ARTIFACT_CACHE_H_
#define KILN_DAEMON_ARTIFACT_CACHE_H_

#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/local_index.h"
#include "cache/local_tier.h"
#include "cache/object_dir.h"
#include "cache/remote/fleet_tier.h"
#include "cache/remote/remote_tier.h"
#include "cache/request_key.h"
#include "cache/store.h"
#include "codegen/codegen_inputs.h"
#include "codegen/compile/compiler.h"
#include "codegen/compile/target.h"
#include "codegen/limits.h"
#include "daemon/admin/gc.h"
#include "daemon/compile_queue.h"
#include "daemon/failure_kind.h"
#include "daemon/miss_explainer.h"
#include "daemon/remembered_failures.h"
#include "proto/service.pb.h"

namespace kiln {

class ArtifactCache {
 public:
  struct Options {
    int compile_threads = 2;
    // Graphs of more nodes are refused before they are prepared
    // (InvalidArgument naming the limit and kilnd's --max_graph_nodes).
    int64_t max_graph_nodes = limits::kDefaultMaxGraphNodes;
    absl::Duration remember_failures_for = absl::Minutes(10);
    // Bounds the memory: past it the failure closest to expiry is forgotten.
    size_t max_remembered_failures = 1024;
    std::function<absl::Time()> now = [] { return absl::Now(); };  // tests step time
    // Eviction limits (0: none) and how often the background thread checks.
    int64_t max_cache_bytes = 0;
    absl::Duration max_entry_age = absl::ZeroDuration();
    absl::Duration gc_interval = absl::Minutes(1);
    // Entries used more recently than this are never evicted by size: a
    // client that was just answered still has to load the object.
    absl::Duration eviction_grace = absl::Minutes(1);
    // Reconcile the local index with the store (cache/index_reconcile.h)
    // on the background thread, first thing, while serving.
    bool reconcile_index = false;
    // The largest artifact stored, from a compile, the fleet tier or a
    // bundle (ResourceExhausted past it; kilnd --max_artifact_bytes).
    int64_t max_artifact_bytes = int64_t{128} << 20;
    // The most metadata one bundle's entries may carry: an import holds it
    // all, with one blob at a time (kilnd --max_bundle_metadata_bytes).
    int64_t max_bundle_metadata_bytes = int64_t{64} << 20;
    // The fleet tier (null: this machine alone).
    std::shared_ptr<RemoteTier> remote;
    // Tests only: every compile takes at least this long (a fleet test
    // kills a lease holder mid-compile).
    absl::Duration testonly_compile_delay = absl::ZeroDuration();
    // Tests only: every import takes at least this long (before its
    // entries are stored).
    absl::Duration testonly_import_delay = absl::ZeroDuration();
    // Tests only: the background thread waits this long (or until
    // shutdown) before its first walk of the local index.
    absl::Duration testonly_first_walk_delay = absl::ZeroDuration();
  };

  using Done = std::function<void(absl::StatusOr<kiln::v1::CompileResponse>)>;

  // `index` is kept in step with the store for same-host clients' hits.
  // `toolchains`: the fingerprint of each target requests may ask for
  // (DetectToolchains); a request for a target it lacks is
  // FailedPrecondition.
  ArtifactCache(std::unique_ptr<ArtifactStore> store, ObjectDirectory objects, LocalIndex index,
                std::unique_ptr<Compiler> compiler, TargetToolchains toolchains, Options options);
  ~ArtifactCache();

  // Answers at once on a hit (on the calling thread); on a miss compiles on
  // the pool and calls `done` there — or, with `allow_compile` false
  // (Lookup), answers NotFound. `done` is called exactly once.
  void Compile(const kiln::v1::CompileRequest& request, bool allow_compile, Done done);

  kiln::v1::StatsResponse Stats();
  // Local-index hits clients report (ReportTraffic), for Stats.
  void AddLocalIndexHits(int64_t hits) { local_index_hits_ += hits; }
  // `key` may be a unique prefix of at least 6 hex digits.
  absl::StatusOr<kiln::v1::ArtifactMetadata> Show(const std::string& key);
  // Removes the entry and forgets a failure remembered for the key; either
  // one suffices. `key` may be a unique prefix of at least 6 hex digits.
  absl::StatusOr<std::string> Evict(const std::string& key);
  // Stops accepting compiles; running ones finish.
  void Shutdown();

  // What the admin commands (daemon/admin/) work on.
  LocalTier& tier() { return tier_; }
  const TargetToolchains& toolchains() const { return toolchains_; }
  const ToolchainDigests& toolchain_digests() const { return toolchain_digests_; }
  const Options& options() const { return options_; }
  // The last `count` misses (at most kRememberedMisses), newest first.
  std::vector<KeyedRequestSummary> RecentMisses(int count);
  static constexpr int kRememberedMisses = 64;
  // Whether listings must do without clients' local-index uses: the
  // background thread has not walked the index yet (a stat per entry would
  // slow `kiln ls` right after a start).
  bool UsesUnread();
  // Evicts what `limits` say (daemon/admin/gc.h) and counts the evictions.
  absl::StatusOr<admin::GcResult> Gc(const admin::GcLimits& limits);
  // After entries were stored outside a compile (an import): forgets the
  // failures remembered for their keys, and wakes eviction past the cap.
  void Stored(const std::vector<std::string>& keys);

 private:
  absl::StatusOr<kiln::v1::CompileResponse> Build(const CodegenInputs& inputs,
                                                  const kiln::v1::KeyComponents& components,
                                                  const std::string& key,
                                                  const std::string& source_graph, bool want_bytes,
                                                  absl::Time received);
  // Wakes eviction when the store is past Options::max_cache_bytes.
  void WakeGcIfOverCap();
  // The background thread: the index's reconciliation, then every
  // gc_interval the local index's uses (RefreshTouches) and eviction (see
  // above).
  void GcLoop();
  void ReconcileIndex();

  LocalTier tier_;
  const std::unique_ptr<FleetTier> fleet_;  // null without Options::remote
  const std::unique_ptr<Compiler> compiler_;
  const TargetToolchains toolchains_;
  const ToolchainDigests toolchain_digests_;  // their key components
  const absl::Time started_ = absl::Now();
  const Options options_;

  RememberedFailures failures_;

  std::atomic<int64_t> hits_{0}, misses_{0}, compiles_{0}, compile_failures_{0}, coalesced_{0},
      failures_replayed_{0};
  std::atomic<int64_t> compile_us_total_{0};
  // The compile-time histogram (StatsResponse.compile_ms_bounds/counts):
  // from tens of milliseconds (a pointwise graph) to the default timeout.
  static constexpr double kCompileMsBounds[] = {10,   25,   50,    100,   250,   500,   1000,
                                                2500, 5000, 10000, 30000, 60000, 120000};
  std::array<std::atomic<int64_t>, std::size(kCompileMsBounds) + 1> compile_ms_counts_{};
  std::atomic<int64_t> evictions_{0};
  std::atomic<int64_t> local_index_hits_{0};
  FailureCounts failures_by_kind_;  // failed Compile requests (not Lookups)

  absl::Mutex misses_mutex_;
  std::deque<KeyedRequestSummary> recent_misses_ ABSL_GUARDED_BY(misses_mutex_);  // newest first

  absl::Mutex gc_mutex_;
  bool gc_stopping_ ABSL_GUARDED_BY(gc_mutex_) = false;
  bool gc_wanted_ ABSL_GUARDED_BY(gc_mutex_) = false;  // a compile went past the cap
  std::thread gc_thread_;

  // With a fleet tier: single-flight jobs that ask it before a compile job
  // is queued. Each look is a few Redis round trips; a job waiting on
  // another machine's lease holds no thread between looks.
  static constexpr int kFleetThreads = 8;
  const std::unique_ptr<CompileQueue> fleet_queue_;
  CompileQueue queue_;  // last: its threads use the members above
};

}  // namespace kiln

#endif  // KILN_DAEMON_ARTIFACT_CACHE_H_
