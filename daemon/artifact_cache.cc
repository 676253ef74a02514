#include "daemon/artifact_cache.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cache/index_reconcile.h"
#include "cache/request_key.h"
#include "codegen/abi/kiln_abi.h"
#include "codegen/limits.h"
#include "codegen/pipeline.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

double MillisecondsSince(absl::Time start) {
  return absl::ToDoubleMilliseconds(absl::Now() - start);
}

}  // namespace

ArtifactCache::ArtifactCache(std::unique_ptr<ArtifactStore> store, ObjectDirectory objects,
                             LocalIndex index, std::unique_ptr<Compiler> compiler,
                             TargetToolchains toolchains, Options options)
    : tier_(std::move(store), std::move(objects), std::move(index), options.max_artifact_bytes),
      fleet_(options.remote == nullptr
                 ? nullptr
                 : std::make_unique<FleetTier>(&tier_, options.remote, options.now)),
      compiler_(std::move(compiler)),
      toolchains_(std::move(toolchains)),
      toolchain_digests_(DigestToolchains(toolchains_)),
      options_(options),
      failures_({options.remember_failures_for, options.max_remembered_failures, options.now}),
      fleet_queue_(options.remote == nullptr ? nullptr
                                             : std::make_unique<CompileQueue>(kFleetThreads)),
      queue_(options.compile_threads) {
  if (options_.reconcile_index || options_.max_cache_bytes > 0 ||
      options_.max_entry_age > absl::ZeroDuration()) {
    gc_thread_ = std::thread([this] { GcLoop(); });
  }
}

ArtifactCache::~ArtifactCache() {
  Shutdown();
  if (gc_thread_.joinable()) gc_thread_.join();
}

void ArtifactCache::Shutdown() {
  if (options_.remote != nullptr) {
    options_.remote->StopWaiting();  // a fleet job waiting on a lease gives up
    fleet_queue_->Shutdown();
  }
  queue_.Shutdown();
  absl::MutexLock lock(&gc_mutex_);
  gc_stopping_ = true;
}

void ArtifactCache::ReconcileIndex() {
  ReconcileOptions reconcile;
  reconcile.per_record_lock = &tier_.mutex();
  reconcile.stop = [this] {
    absl::MutexLock lock(&gc_mutex_);
    return gc_stopping_;
  };
  const absl::StatusOr<ReconcileResult> reconciled =
      ReconcileLocalIndex(tier_.store(), tier_.index(), reconcile);
  if (reconciled.ok() || absl::IsCancelled(reconciled.status())) return;
  KILN_LOG(ERROR) << "cannot reconcile the local index (" << reconciled.status()
                  << "); removing it: clients ask kilnd, whose hits publish it again";
  absl::MutexLock lock(&tier_.mutex());
  if (absl::Status removed = tier_.index().RemoveAll(); !removed.ok()) {
    KILN_LOG(ERROR) << "cannot remove the local index: " << removed;
  }
}

void ArtifactCache::GcLoop() {
  // Maintenance yields the CPU to requests: after a start at 100,000
  // entries it is seconds of walking and reading the index, which `kiln ls`
  // and hits would otherwise share two cores with. (Linux: per thread.)
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19) != 0) {
    KILN_LOG(WARNING) << "cannot lower the priority of cache maintenance: " << strerror(errno);
  }
  if (options_.testonly_first_walk_delay > absl::ZeroDuration()) {
    absl::MutexLock lock(&gc_mutex_);
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(gc_mutex_) { return gc_stopping_; };
    gc_mutex_.AwaitWithTimeout(absl::Condition(&stopping), options_.testonly_first_walk_delay);
    if (gc_stopping_) return;
  }
  tier_.RefreshTouches();  // first: listings sort by it (a walk of the index)
  if (options_.reconcile_index) ReconcileIndex();
  const bool evicts = options_.max_cache_bytes > 0 || options_.max_entry_age > absl::ZeroDuration();
  while (true) {
    {
      absl::MutexLock lock(&gc_mutex_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(gc_mutex_) {
        return gc_stopping_ || gc_wanted_;
      };
      gc_mutex_.AwaitWithTimeout(absl::Condition(&woken), options_.gc_interval);
      if (gc_stopping_) return;
      gc_wanted_ = false;
    }
    if (!evicts) {
      tier_.RefreshTouches();  // Gc walks the index itself
      continue;
    }
    absl::StatusOr<admin::GcResult> result = Gc(
        admin::GcLimits{options_.max_cache_bytes, options_.max_entry_age, options_.eviction_grace});
    if (!result.ok()) {
      KILN_LOG(ERROR) << "eviction failed: " << result.status();
    } else if (!result->evicted.empty()) {
      KILN_LOG(INFO) << "evicted " << result->evicted.size() << " entries: " << result->bytes_before
                     << " -> " << result->bytes_after << " bytes";
    }
  }
}

namespace {

// What a fleet-tier job answers when this kilnd should compile (no machine
// had the entry): the compile queue's turn.
constexpr char kCompileHerePayload[] = "kiln/compile-here";
absl::Status CompileHere() {
  absl::Status status = absl::AbortedError("no machine has the artifact: compile it here");
  status.SetPayload(kCompileHerePayload, absl::Cord());
  return status;
}
bool IsCompileHere(const CompileQueue::Result& result) {
  return !result.ok() && result.status().GetPayload(kCompileHerePayload).has_value();
}

}  // namespace

void ArtifactCache::Compile(const kiln::v1::CompileRequest& request, bool allow_compile,
                            Done done) {
  if (allow_compile) {
    // Every failed Compile request is counted by kind; the compiler's mark
    // (failure_kind.h) stays inside kilnd.
    done = [this, done = std::move(done)](absl::StatusOr<kiln::v1::CompileResponse> response) {
      if (!response.ok()) response = failures_by_kind_.Count(response.status());
      done(std::move(response));
    };
  }
  if (request.graph().nodes_size() > options_.max_graph_nodes) {
    return done(absl::InvalidArgumentError(absl::StrCat(
        "the graph has ", request.graph().nodes_size(), " nodes, over the limit max_graph_nodes = ",
        options_.max_graph_nodes, " (kilnd --max_graph_nodes)")));
  }
  const absl::Time received = absl::Now();
  absl::StatusOr<KeyedRequest> keyed = KeyRequest(request, toolchain_digests_);
  if (!keyed.ok()) return done(keyed.status());
  auto inputs = std::make_shared<CodegenInputs>(std::move(keyed->inputs));
  const CacheKey key = std::move(keyed->key);
  // Once answered, the next process that sends this request finds its key
  // without preparing the graph (local_index.h). Written only the first
  // time, and before the reply, so that it never outlives the cache.
  absl::StatusOr<std::string> request_digest = RequestDigest(request, toolchain_digests_);
  if (request_digest.ok()) {
    done = [this, request_digest = *std::move(request_digest), key = key.key,
            done = std::move(done)](absl::StatusOr<kiln::v1::CompileResponse> response) {
      if (response.ok()) {
        tier_.CommitAlias(request_digest, key);
      }
      done(std::move(response));
    };
  }
  const bool want_bytes = request.want_bytes();

  auto stored = tier_.Find(key.key, want_bytes, request.repair());
  if (!stored.ok()) return done(stored.status());
  if (stored->has_value()) {
    ++hits_;
    const absl::Status used = tier_.store().RecordUse(key.key, options_.now());
    if (!used.ok()) KILN_LOG(WARNING) << "cannot record a use of " << key.key << ": " << used;
    return done(**std::move(stored));
  }
  ++misses_;
  {
    absl::MutexLock lock(&misses_mutex_);
    recent_misses_.push_front(
        SummarizeRequest(*inputs, key, toolchains_.at(request.options().target()), options_.now()));
    if (recent_misses_.size() > kRememberedMisses) recent_misses_.pop_back();
  }
  if (!allow_compile) {
    return done(
        absl::NotFoundError(absl::StrCat("no artifact for this graph (key ", key.key, ")")));
  }
  if (std::optional<absl::Status> failure = failures_.Find(key.key)) {
    ++failures_replayed_;
    return done(*std::move(failure));
  }
  // The node count stands for the compile's cost: small graphs keep a
  // thread of their own (daemon/compile_queue.h).
  CompileQueue::JobOptions job;
  job.cost = static_cast<int64_t>(inputs->graph.nodes.size());
  job.priority = request.priority() == kiln::v1::CompileRequest::PRIORITY_WARMUP
                     ? CompileQueue::kBackground
                     : CompileQueue::kInteractive;
  // A request that wants the bytes inline joins only jobs that fetch them.
  const std::string job_key = want_bytes ? key.key + "+bytes" : key.key;
  auto compile = [this, inputs, key, want_bytes, received, job, job_key,
                  source_graph = request.source_graph()](Done done) {
    const bool joined = queue_.Submit(
        job_key,
        [this, inputs, key, want_bytes, received, source_graph]() -> CompileQueue::Result {
          // Checked again: the job that just finished may have stored it.
          CompileQueue::Result result = [&]() -> CompileQueue::Result {
            ASSIGN_OR_RETURN(auto stored, tier_.Find(key.key, want_bytes));
            if (stored.has_value()) return *std::move(stored);
            return Build(*inputs, key.components, key.key, source_graph, want_bytes, received);
          }();
          if (fleet_ != nullptr) fleet_->Abandon(key.key);  // no-op after a commit
          return result;
        },
        std::move(done), job);
    if (joined) ++coalesced_;
  };
  if (fleet_ == nullptr) return compile(std::move(done));
  // The fleet tier first, on threads of its own, one look at a time: a
  // miss that waits for another machine's compile holds no thread between
  // looks, neither a compile thread nor a fleet one.
  const bool joined = fleet_queue_->SubmitSteps(
      job_key,
      [this, key = key.key, want_bytes, wait = std::make_shared<RemoteTier::Wait>()]()
          -> std::variant<CompileQueue::Result, absl::Duration> {
        absl::StatusOr<FleetTier::Found> found = fleet_->Find(key, want_bytes, wait.get());
        if (!found.ok()) return found.status();
        if (found->look_again_after > absl::ZeroDuration()) return found->look_again_after;
        if (!found->response.has_value()) return CompileHere();
        WakeGcIfOverCap();  // it may have been fetched
        return *std::move(found->response);
      },
      [compile = std::move(compile), done = std::move(done)](CompileQueue::Result result) mutable {
        if (IsCompileHere(result)) return compile(std::move(done));
        done(std::move(result));
      },
      CompileQueue::JobOptions{/*cost=*/0, job.priority});
  if (joined) ++coalesced_;
}

absl::StatusOr<kiln::v1::CompileResponse> ArtifactCache::Build(
    const CodegenInputs& inputs, const kiln::v1::KeyComponents& components, const std::string& key,
    const std::string& source_graph, bool want_bytes, absl::Time received) {
  ++compiles_;
  const absl::Time start = absl::Now();
  absl::SleepFor(options_.testonly_compile_delay);
  auto code = GenerateCode(inputs);
  if (!code.ok()) {
    ++compile_failures_;
    failures_.RememberIfDeterministic(key, code.status());
    return code.status();
  }
  const double codegen_ms = MillisecondsSince(start);
  auto object = compiler_->Compile(code->source, inputs.options.target());
  if (!object.ok()) {
    ++compile_failures_;
    KILN_LOG(ERROR) << "compile of " << key << " failed: " << object.status();
    const absl::Status failure = MarkedAsCompilerFailure(object.status());  // its kind
    failures_.RememberIfDeterministic(key, failure);
    return failure;
  }
  compile_us_total_ += static_cast<int64_t>(object->compile_ms * 1000);
  size_t bucket = 0;  // the first bound at or above the time; past them all, +Inf
  while (bucket < std::size(kCompileMsBounds) && object->compile_ms > kCompileMsBounds[bucket]) {
    ++bucket;
  }
  ++compile_ms_counts_[bucket];

  kiln::v1::ArtifactMetadata metadata;
  metadata.set_key(key);
  metadata.set_digest(Sha256Hex(object->shared_object));
  metadata.set_abi_version(KILN_ABI_VERSION);
  *metadata.mutable_signature() = std::move(code->signature);
  *metadata.mutable_guards() = inputs.guards;
  *metadata.mutable_toolchain() = toolchains_.at(inputs.options.target());
  metadata.set_target(inputs.options.target());
  if (!inputs.graph.symbols.empty()) {
    metadata.set_safe_symbol_value(limits::LargestSafeSymbolValue(inputs.graph));
  }
  metadata.set_object_bytes(object->shared_object.size());
  metadata.set_source_bytes(code->source.size());
  metadata.set_created_unix_ms(absl::ToUnixMillis(options_.now()));
  *metadata.mutable_key_components() = components;
  metadata.set_graph_name(inputs.graph.name);
  metadata.set_source_graph(source_graph);
  metadata.set_compiler(object->compiler);
  metadata.mutable_timings()->set_codegen_ms(codegen_ms);
  metadata.mutable_timings()->set_compile_ms(object->compile_ms);
  metadata.mutable_timings()->set_total_ms(MillisecondsSince(received));

  kiln::v1::CompileResponse response;
  if (want_bytes) response.set_object_bytes(object->shared_object);
  RETURN_IF_ERROR(fleet_ != nullptr
                      ? fleet_->Commit(metadata, std::move(object->shared_object))
                      : tier_.Commit(metadata, object->shared_object, /*synced=*/true));
  WakeGcIfOverCap();
  KILN_LOG(INFO) << "compiled " << key.substr(0, 12) << " (" << inputs.graph.name << ") in "
                 << metadata.timings().total_ms() << " ms";
  response.set_object_path(tier_.objects().PathFor(metadata.digest()));
  *response.mutable_artifact() = std::move(metadata);
  return response;
}

void ArtifactCache::WakeGcIfOverCap() {
  if (options_.max_cache_bytes <= 0) return;
  const absl::StatusOr<StoreTotals> totals = tier_.store().Totals();
  if (totals.ok() && totals->blob_bytes > options_.max_cache_bytes) {
    absl::MutexLock lock(&gc_mutex_);
    gc_wanted_ = true;
  }
}

kiln::v1::StatsResponse ArtifactCache::Stats() {
  kiln::v1::StatsResponse stats;
  stats.set_hits(hits_);
  stats.set_misses(misses_);
  stats.set_compiles(compiles_);
  stats.set_compile_failures(compile_failures_);
  stats.set_coalesced(coalesced_);
  stats.set_compile_ms_total(compile_us_total_ / 1000.0);
  stats.set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - started_));
  stats.set_failures_replayed(failures_replayed_);
  stats.set_evictions(evictions_);
  stats.set_max_cache_bytes(options_.max_cache_bytes);
  stats.set_local_index_hits(local_index_hits_);
  failures_by_kind_.AddTo(stats);
  if (options_.remote != nullptr) {
    const RemoteTier::Stats remote = options_.remote->stats();
    kiln::v1::RemoteStats& out = *stats.mutable_remote();
    out.set_url(options_.remote->options().url);
    out.set_available(remote.available);
    out.set_hits(remote.hits);
    out.set_misses(remote.misses);
    out.set_errors(remote.errors);
    out.set_refused(remote.refused);
    out.set_bytes_read(remote.bytes_read);
    out.set_bytes_written(remote.bytes_written);
    out.set_publishes(remote.publishes);
    out.set_publishes_dropped(remote.publishes_dropped);
    out.set_lease_waits(remote.lease_waits);
    out.set_lease_takeovers(remote.lease_takeovers);
    out.set_read_only(!options_.remote->can_publish());
  }
  stats.set_queue_length(queue_.queued());
  for (double bound : kCompileMsBounds) stats.add_compile_ms_bounds(bound);
  for (const std::atomic<int64_t>& count : compile_ms_counts_) stats.add_compile_ms_counts(count);
  stats.set_remembered_failures(failures_.Count());
  auto totals = tier_.store().Totals();
  if (totals.ok()) {
    stats.set_entries(totals->entries);
    stats.set_blobs(totals->blobs);
    stats.set_bytes_stored(totals->blob_bytes);
    stats.set_corrupt_blobs(totals->quarantined);
    stats.set_corrupt_entries(totals->corrupt_entries);
    stats.set_unreadable_ranges(totals->unreadable_ranges);
  } else {
    KILN_LOG(ERROR) << "cannot read store totals: " << totals.status();
  }
  return stats;
}

std::vector<KeyedRequestSummary> ArtifactCache::RecentMisses(int count) {
  absl::MutexLock lock(&misses_mutex_);
  const size_t n = std::min(recent_misses_.size(), static_cast<size_t>(std::max(count, 0)));
  return {recent_misses_.begin(), recent_misses_.begin() + n};
}

bool ArtifactCache::UsesUnread() { return gc_thread_.joinable() && !tier_.TouchesRead(); }

absl::StatusOr<admin::GcResult> ArtifactCache::Gc(const admin::GcLimits& limits) {
  ASSIGN_OR_RETURN(admin::GcResult result, admin::Gc(tier_, limits, options_.now()));
  if (!limits.dry_run) evictions_ += static_cast<int64_t>(result.evicted.size());
  return result;
}

void ArtifactCache::Stored(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) failures_.Forget(key);
  WakeGcIfOverCap();
}

absl::StatusOr<kiln::v1::ArtifactMetadata> ArtifactCache::Show(const std::string& key) {
  ASSIGN_OR_RETURN(const std::string full, tier_.ResolveKey(key));
  ASSIGN_OR_RETURN(auto entry, tier_.store().Lookup(full));
  if (!entry.has_value()) return absl::NotFoundError(absl::StrCat("no entry with key ", key));
  return *std::move(entry);
}

absl::StatusOr<std::string> ArtifactCache::Evict(const std::string& key) {
  // A key may name a stored entry, a remembered failure, or both; a prefix
  // must name one key among all of them.
  const std::vector<std::string> failed = failures_.KeysWithPrefix(key);
  absl::StatusOr<std::string> stored = tier_.ResolveKey(key);
  if (!stored.ok() && !(absl::IsNotFound(stored.status()) && !failed.empty())) {
    return stored.status();
  }
  const std::string full = stored.ok() ? *stored : failed[0];
  for (const std::string& other : failed) {
    if (other != full) {
      return absl::InvalidArgumentError(
          absl::StrCat("key prefix ", key, " is ambiguous: give more digits"));
    }
  }
  if (!failed.empty()) failures_.Forget(full);
  if (!stored.ok()) return full;
  RETURN_IF_ERROR(tier_.Evict(full));
  return full;
}

}  // namespace kiln
