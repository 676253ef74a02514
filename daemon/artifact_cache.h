// What kilnd does, without the RPC layer: request -> key -> store, and on a
// miss the compile pipeline, once per key.
//
//   Compile(request):
//     PrepareGraph (import, verify, canonicalize) -> ResolveGuards ->
//     ComputeCacheKey -> store lookup -> hit: make sure the object file
//     exists -> reply
//     miss -> a failure remembered for this key? reply with it
//     miss -> CompileQueue (single-flight) -> GenerateCode -> Compiler ->
//     store Put (entry + blob, one batch) -> object file -> reply
//
// With a fleet tier (Options::remote, cache/remote/remote_tier.h), a miss
// first goes to a fleet job (single-flight too, on threads of its own, and
// holding none while it waits on another machine's lease between looks):
// another machine's entry is stored here and answered; otherwise the
// compile job compiles under the fleet-wide lease the fleet job took, and
// publishes the artifact behind the reply.
//
// Remembered failures: a compile that fails deterministically (see
// IsDeterministicFailure) is remembered per key for
// Options::remember_failures_for, so a retry (a training loop calling a
// broken graph again) fails at once with the same error instead of
// occupying a compile thread; Evict forgets it. Transient failures (disk
// full, a crashed or killed worker, shutdown) are never remembered. In
// memory only: a restarted daemon tries again.
//
// Eviction (Gc): least recently used first — a hit here (RecordUse) or a
// client's local-index hit (LocalIndex::Touch) is a use — until the store
// is within Options::max_cache_bytes, and every entry unused for longer
// than Options::max_entry_age; pinned entries never. A background thread
// runs it every Options::gc_interval and after a compile that went past the
// cap, so a hit never waits on it. An entry leaves the local index before
// its object file goes; a process that has the object mapped keeps it.
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
#include "cache/object_dir.h"
#include "cache/remote/remote_tier.h"
#include "cache/request_key.h"
#include "cache/store.h"
#include "codegen/codegen_inputs.h"
#include "codegen/compile/compiler.h"
#include "codegen/compile/target.h"
#include "codegen/limits.h"
#include "daemon/compile_queue.h"
#include "daemon/failure_kind.h"
#include "daemon/list_page.h"
#include "daemon/miss_explainer.h"
#include "proto/service.pb.h"

namespace kiln {

// Whether compiling the same inputs again would fail the same way: a
// compiler error or a crash-free failure in codegen (Internal,
// InvalidArgument, Unimplemented, FailedPrecondition, OutOfRange) and a
// timeout (DeadlineExceeded). Not: Unavailable (no worker, shutdown),
// ResourceExhausted (disk full, memory cap), and an Internal that reports a
// crashed or killed compiler process (worker_compiler.cc's "compile worker
// crashed/exited", subprocess_compiler.cc's "clang++ crashed").
bool IsDeterministicFailure(const absl::Status& status);

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

  struct GcOptions {
    std::optional<int64_t> max_bytes;       // default: Options::max_cache_bytes
    std::optional<absl::Duration> max_age;  // default: Options::max_entry_age
    bool dry_run = false;                   // choose, but evict nothing
    // Spares entries used this recently from the size cap; default:
    // Options::eviction_grace (what the background eviction uses).
    std::optional<absl::Duration> grace;
  };
  struct GcResult {
    std::vector<EntryUsage> evicted;  // oldest use first
    int64_t bytes_before = 0;
    int64_t bytes_after = 0;
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
  // One page of entries with their usage (daemon/list_page.h).
  absl::StatusOr<kiln::v1::ListResponse> List(const kiln::v1::ListRequest& request = {});
  // `key` may be a unique prefix of at least 6 hex digits.
  absl::StatusOr<kiln::v1::ArtifactMetadata> Show(const std::string& key);
  // Removes the entry and forgets a failure remembered for the key; either
  // one suffices. `key` may be a unique prefix of at least 6 hex digits.
  absl::StatusOr<std::string> Evict(const std::string& key);
  // Evicts what the limits say (see above); a limit of 0 is none.
  absl::StatusOr<GcResult> Gc(const GcOptions& options);
  // Reads every entry, blob, object file and index record (see
  // VerifyRequest in proto/service.proto).
  absl::StatusOr<kiln::v1::VerifyResponse> Verify(bool repair);
  // Removes (or, dry, lists) entries that can never hit here (StaleReason).
  absl::StatusOr<kiln::v1::PruneResponse> Prune(bool dry_run);
  // The last misses (at most kRememberedMisses), or `request`, explained
  // against the stored entries (daemon/miss_explainer.h).
  absl::StatusOr<kiln::v1::WhyResponse> Why(const kiln::v1::WhyRequest& request);
  static constexpr int kRememberedMisses = 64;
  // Pins or unpins every entry whose key starts with `key_or_prefix` (at
  // least 6 hex digits); the full keys. NotFound when none does.
  absl::StatusOr<std::vector<std::string>> SetPinned(const std::string& key_or_prefix, bool pinned);
  // The same for every entry compiled from the graph of this GraphDigest
  // (CompileRequest.source_graph).
  absl::StatusOr<std::vector<std::string>> SetPinnedForGraph(const std::string& graph_digest,
                                                             bool pinned);

  // Stops accepting compiles; running ones finish.
  void Shutdown();

  // Writes the entries the request names (every entry when it names none)
  // with their blobs to a bundle (cache/bundle.h) at request.path. Keys as
  // Show takes them; requests are keyed as Compile keys them, and one that
  // is not stored is NotFound naming it. Reads one blob at a time.
  absl::StatusOr<kiln::v1::ExportResponse> Export(const kiln::v1::ExportRequest& request);
  // Stores every entry of the bundle at request.path in one write, after
  // checking the whole file: DataLoss or InvalidArgument naming the file
  // and entry, ResourceExhausted for a length past max_artifact_bytes or
  // max_bundle_metadata_bytes, and FailedPrecondition listing the entries
  // that can never hit here (StaleReason) unless request.force — and then
  // no entry is stored. Reads the file twice (checks, then blobs and object
  // files one at a time: ArtifactStore::PutBlob), holding one blob and
  // every entry's metadata. Then publishes their index records, records now
  // as their last use and forgets failures remembered for their keys.
  absl::StatusOr<kiln::v1::ImportResponse> Import(const kiln::v1::ImportRequest& request);

 private:
  // The artifact for `key` if the store has it and its object is on disk
  // (rebuilt from the blob when missing); nullopt on a miss or a corrupt blob.
  // With `repair`, the object file is rewritten from the blob first.
  absl::StatusOr<std::optional<kiln::v1::CompileResponse>> FindStored(const std::string& key,
                                                                      bool want_bytes,
                                                                      bool repair = false);
  absl::StatusOr<kiln::v1::CompileResponse> Build(const CodegenInputs& inputs,
                                                  const kiln::v1::KeyComponents& components,
                                                  const std::string& key,
                                                  const std::string& source_graph, bool want_bytes,
                                                  absl::Time received,
                                                  std::unique_ptr<RemoteTier::Lease> lease);
  // Writes the object file, then stores and indexes the entry (a compile's
  // or one fetched from the fleet tier).
  absl::Status StoreLocally(const kiln::v1::ArtifactMetadata& metadata, absl::string_view object,
                            bool synced);
  // The fleet tier's answer to a local miss, on a fleet thread: a response
  // from another machine's entry (stored here), or nullopt (compile here),
  // leaving the lease to compile under, if any, for TakeLease.
  std::optional<kiln::v1::CompileResponse> UseClaim(const std::string& key, bool want_bytes,
                                                    RemoteTier::Claim claim);
  std::unique_ptr<RemoteTier::Lease> TakeLease(const std::string& key);
  absl::StatusOr<std::string> ResolveKey(const std::string& key_or_prefix);
  // Takes the entry out of the local index, then the store, then its
  // object file when no other entry shares it. Not `synced`: one of many,
  // as ArtifactStore::Evict.
  absl::Status EvictStored(const std::string& key, bool synced = true);
  // The background thread: the index's reconciliation, then every
  // gc_interval the local index's uses (RefreshTouches) and eviction (see
  // above).
  void GcLoop();
  void ReconcileIndex();
  void RefreshTouches();
  // Local-index uses: from the background thread's last walk of the index
  // (a local hit shows within a gc_interval), or, before one, a stat per
  // entry asked about.
  LastTouchedFn LastTouched();
  // Whether the background thread has walked the index since the start.
  bool TouchesRead();

  // The failure remembered for `key`, if it has not expired.
  std::optional<absl::Status> RememberedFailure(const std::string& key);
  void RememberIfDeterministic(const std::string& key, const absl::Status& failure);
  // Keys of remembered failures that start with `prefix` (expired or not).
  std::vector<std::string> RememberedKeysWithPrefix(const std::string& prefix);

  const std::unique_ptr<ArtifactStore> store_;
  const ObjectDirectory objects_;
  const LocalIndex index_;
  const std::unique_ptr<Compiler> compiler_;
  const TargetToolchains toolchains_;
  const ToolchainDigests toolchain_digests_;  // their key components
  const absl::Time started_ = absl::Now();
  const Options options_;

  struct Failure {
    absl::Status status;
    absl::Time expiry;
  };
  absl::Mutex failures_mutex_;
  std::map<std::string, Failure> failures_ ABSL_GUARDED_BY(failures_mutex_);  // ordered: prefixes

  // Keeps publishing (Build; shared: a hit's lookup-then-publish) and Evict
  // apart, so an eviction never interleaves with a publish of its entry.
  absl::Mutex index_mutex_;

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

  absl::Mutex touches_mutex_;
  std::shared_ptr<const absl::flat_hash_map<std::string, absl::Time>> touches_
      ABSL_GUARDED_BY(touches_mutex_);

  absl::Mutex gc_mutex_;
  bool gc_stopping_ ABSL_GUARDED_BY(gc_mutex_) = false;
  bool gc_wanted_ ABSL_GUARDED_BY(gc_mutex_) = false;  // a compile went past the cap
  std::thread gc_thread_;

  // Fleet-tier leases between a fleet job and the compile job it hands over to.
  absl::Mutex leases_mutex_;
  absl::flat_hash_map<std::string, std::unique_ptr<RemoteTier::Lease>> leases_
      ABSL_GUARDED_BY(leases_mutex_);

  // With a fleet tier: single-flight jobs that ask it before a compile job
  // is queued. Each look is a few Redis round trips; a job waiting on
  // another machine's lease holds no thread between looks.
  static constexpr int kFleetThreads = 8;
  const std::unique_ptr<CompileQueue> fleet_queue_;
  CompileQueue queue_;  // last: its threads use the members above
};

}  // namespace kiln

#endif  // KILN_DAEMON_ARTIFACT_CACHE_H_
