// kilnd's cache without the RPC layer: the local tier, the fleet tier over
// it (Options::remote, cache/remote/fleet_tier.h), the compile path
// (daemon/compile_path.h) that answers Compile and Lookup, and the upkeep
// around them: stats, show, evict.
//
// Eviction (daemon/admin/gc.h) to Options::max_cache_bytes and
// Options::max_entry_age: a background thread runs it every
// Options::gc_interval and after a commit that went past the cap, so a hit
// never waits on it. The other admin commands are functions of tier()
// (daemon/admin/).
//
// Thread-safe.
#ifndef KILN_DAEMON_ARTIFACT_CACHE_H_
#define KILN_DAEMON_ARTIFACT_CACHE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "abi/target.h"
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
#include "codegen/compile/compiler.h"
#include "codegen/limits.h"
#include "daemon/admin/gc.h"
#include "daemon/compile_path.h"
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

  // `index` is kept in step with the store for same-host clients' hits.
  // `toolchains`: the fingerprint of each target requests may ask for
  // (DetectToolchains); a request for a target it lacks is
  // FailedPrecondition.
  ArtifactCache(std::unique_ptr<ArtifactStore> store, ObjectDirectory objects, LocalIndex index,
                std::unique_ptr<Compiler> compiler, TargetToolchains toolchains, Options options);
  ~ArtifactCache();

  // The compile path's (daemon/compile_path.h).
  void Compile(const kiln::v1::CompileRequest& request, bool allow_compile,
               CompilePath::Done done) {
    compile_path_.Compile(request, allow_compile, std::move(done));
  }

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
  const ToolchainDigests& toolchain_digests() const { return compile_path_.toolchain_digests(); }
  const Options& options() const { return options_; }
  CompilePath& compile_path() { return compile_path_; }
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
  const absl::Time started_ = absl::Now();
  const Options options_;

  std::atomic<int64_t> evictions_{0};
  std::atomic<int64_t> local_index_hits_{0};

  absl::Mutex gc_mutex_;
  bool gc_stopping_ ABSL_GUARDED_BY(gc_mutex_) = false;
  bool gc_wanted_ ABSL_GUARDED_BY(gc_mutex_) = false;  // a commit went past the cap
  std::thread gc_thread_;

  CompilePath compile_path_;  // last: its threads use the members above
};

}  // namespace kiln

#endif  // KILN_DAEMON_ARTIFACT_CACHE_H_
