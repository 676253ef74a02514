#include "daemon/artifact_cache.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <tuple>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache/bundle.h"
#include "cache/index_reconcile.h"
#include "cache/request_key.h"
#include "codegen/abi/kiln_abi.h"
#include "codegen/limits.h"
#include "codegen/pipeline.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "daemon/list_page.h"

namespace kiln {
namespace {

double MillisecondsSince(absl::Time start) {
  return absl::ToDoubleMilliseconds(absl::Now() - start);
}

// An Internal error that reports the compiler process dying rather than the
// compiler rejecting the source (compiler.h gives both the same code).
bool IsCompilerCrash(const absl::Status& status) {
  const absl::string_view message = status.message();
  return absl::StartsWith(message, "compile worker crashed") ||
         absl::StartsWith(message, "compile worker exited") ||
         absl::StartsWith(message, "clang++ crashed");
}

// kilnd opens bundles as its user, from its own working directory: a
// relative path would name a file the client did not mean.
absl::Status CheckBundlePath(const std::string& path) {
  if (absl::StartsWith(path, "/")) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("bundle path '", path, "' is not absolute"));
}

}  // namespace

bool IsDeterministicFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return true;
    case absl::StatusCode::kInternal:
      return !IsCompilerCrash(status);
    default:
      return false;
  }
}

ArtifactCache::ArtifactCache(std::unique_ptr<ArtifactStore> store, ObjectDirectory objects,
                             LocalIndex index, std::unique_ptr<Compiler> compiler,
                             TargetToolchains toolchains, Options options)
    : store_(std::move(store)),
      objects_(std::move(objects)),
      index_(std::move(index)),
      compiler_(std::move(compiler)),
      toolchains_(std::move(toolchains)),
      toolchain_digests_(DigestToolchains(toolchains_)),
      options_(options),
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
  reconcile.per_record_lock = &index_mutex_;
  reconcile.stop = [this] {
    absl::MutexLock lock(&gc_mutex_);
    return gc_stopping_;
  };
  const absl::StatusOr<ReconcileResult> reconciled =
      ReconcileLocalIndex(*store_, index_, reconcile);
  if (reconciled.ok() || absl::IsCancelled(reconciled.status())) return;
  KILN_LOG(ERROR) << "cannot reconcile the local index (" << reconciled.status()
                  << "); removing it: clients ask kilnd, whose hits publish it again";
  absl::MutexLock lock(&index_mutex_);
  if (absl::Status removed = index_.RemoveAll(); !removed.ok()) {
    KILN_LOG(ERROR) << "cannot remove the local index: " << removed;
  }
}

LastTouchedFn ArtifactCache::LastTouched() {
  std::shared_ptr<const absl::flat_hash_map<std::string, absl::Time>> touches;
  {
    absl::MutexLock lock(&touches_mutex_);
    touches = touches_;
  }
  if (touches == nullptr) {
    return [this](const std::string& key) { return index_.LastTouched(key); };
  }
  return [touches](const std::string& key) -> std::optional<absl::Time> {
    auto it = touches->find(key);
    if (it == touches->end()) return std::nullopt;
    return it->second;
  };
}

bool ArtifactCache::TouchesRead() {
  absl::MutexLock lock(&touches_mutex_);
  return touches_ != nullptr;
}

void ArtifactCache::RefreshTouches() {
  absl::StatusOr<absl::flat_hash_map<std::string, absl::Time>> touched = index_.AllTouched();
  if (!touched.ok()) {
    KILN_LOG(WARNING) << "cannot read the local index's uses: " << touched.status();
    return;
  }
  auto snapshot =
      std::make_shared<const absl::flat_hash_map<std::string, absl::Time>>(*std::move(touched));
  absl::MutexLock lock(&touches_mutex_);
  touches_ = std::move(snapshot);
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
  RefreshTouches();  // first: listings sort by it (a walk of the index)
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
      RefreshTouches();  // Gc walks the index itself
      continue;
    }
    absl::StatusOr<GcResult> result = Gc({});
    if (!result.ok()) {
      KILN_LOG(ERROR) << "eviction failed: " << result.status();
    } else if (!result->evicted.empty()) {
      KILN_LOG(INFO) << "evicted " << result->evicted.size() << " entries: " << result->bytes_before
                     << " -> " << result->bytes_after << " bytes";
    }
  }
}

absl::StatusOr<std::optional<kiln::v1::CompileResponse>> ArtifactCache::FindStored(
    const std::string& key, bool want_bytes, bool repair) {
  absl::ReaderMutexLock lock(&index_mutex_);  // hits only rename files in: they may overlap
  ASSIGN_OR_RETURN(auto entry, store_->Lookup(key));
  if (!entry.has_value()) {
    // The store may have just quarantined a damaged entry: its index file
    // goes too. (A Publish needs the entry, which this lock keeps absent.)
    RETURN_IF_ERROR(index_.Remove(key));
    return std::nullopt;
  }
  kiln::v1::CompileResponse response;
  const std::string& digest = entry->digest();
  if (repair) {
    KILN_LOG(WARNING) << "object " << digest << " reported corrupt by a client; rewriting it";
  }
  if (want_bytes || repair || !objects_.Contains(digest)) {
    ASSIGN_OR_RETURN(auto blob, store_->ReadBlob(digest));
    if (!blob.has_value()) {
      KILN_LOG(WARNING) << "entry " << key << " has no intact blob; compiling again";
      RETURN_IF_ERROR(index_.Remove(key));  // clients must not find it either
      return std::nullopt;
    }
    RETURN_IF_ERROR(objects_.Write(digest, *blob, /*replace=*/repair));
    if (want_bytes) response.set_object_bytes(*std::move(blob));
  }
  const absl::Status published = index_.Publish(*entry);
  if (!published.ok()) KILN_LOG(WARNING) << "cannot index " << key << ": " << published;
  *response.mutable_artifact() = *std::move(entry);
  response.set_object_path(objects_.PathFor(digest));
  response.set_cache_hit(true);
  return response;
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
        const absl::Status published = index_.PublishAlias(request_digest, key);
        if (!published.ok()) {
          KILN_LOG(WARNING) << "cannot index a request of " << key << ": " << published;
        }
      }
      done(std::move(response));
    };
  }
  const bool want_bytes = request.want_bytes();

  auto stored = FindStored(key.key, want_bytes, request.repair());
  if (!stored.ok()) return done(stored.status());
  if (stored->has_value()) {
    ++hits_;
    const absl::Status used = store_->RecordUse(key.key, options_.now());
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
  if (std::optional<absl::Status> failure = RememberedFailure(key.key)) {
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
          ASSIGN_OR_RETURN(auto stored, FindStored(key.key, want_bytes));
          if (stored.has_value()) return *std::move(stored);
          return Build(*inputs, key.components, key.key, source_graph, want_bytes, received,
                       TakeLease(key.key));
        },
        std::move(done), job);
    if (joined) ++coalesced_;
  };
  if (options_.remote == nullptr) return compile(std::move(done));
  // The fleet tier first, on threads of its own, one look at a time: a
  // miss that waits for another machine's compile holds no thread between
  // looks, neither a compile thread nor a fleet one.
  const bool joined = fleet_queue_->SubmitSteps(
      job_key,
      [this, key = key.key, want_bytes, wait = std::make_shared<RemoteTier::Wait>()]()
          -> std::variant<CompileQueue::Result, absl::Duration> {
        absl::StatusOr<std::optional<kiln::v1::CompileResponse>> stored =
            FindStored(key, want_bytes);
        if (!stored.ok()) return stored.status();
        if (stored->has_value()) return **std::move(stored);
        RemoteTier::Claim claim = options_.remote->Look(key, wait.get());
        if (claim.look_again_after > absl::ZeroDuration()) return claim.look_again_after;
        if (auto fetched = UseClaim(key, want_bytes, std::move(claim))) return *std::move(fetched);
        return CompileHere();
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
    const std::string& source_graph, bool want_bytes, absl::Time received,
    std::unique_ptr<RemoteTier::Lease> lease) {
  ++compiles_;
  const absl::Time start = absl::Now();
  absl::SleepFor(options_.testonly_compile_delay);
  auto code = GenerateCode(inputs);
  if (!code.ok()) {
    ++compile_failures_;
    RememberIfDeterministic(key, code.status());
    return code.status();
  }
  const double codegen_ms = MillisecondsSince(start);
  auto object = compiler_->Compile(code->source, inputs.options.target());
  if (!object.ok()) {
    ++compile_failures_;
    KILN_LOG(ERROR) << "compile of " << key << " failed: " << object.status();
    const absl::Status failure = MarkedAsCompilerFailure(object.status());  // its kind
    RememberIfDeterministic(key, failure);
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

  RETURN_IF_ERROR(StoreLocally(metadata, object->shared_object, /*synced=*/true));
  KILN_LOG(INFO) << "compiled " << key.substr(0, 12) << " (" << inputs.graph.name << ") in "
                 << metadata.timings().total_ms() << " ms";
  if (options_.remote != nullptr) {
    options_.remote->PublishBehind(metadata, object->shared_object, std::move(lease));
  }

  kiln::v1::CompileResponse response;
  response.set_object_path(objects_.PathFor(metadata.digest()));
  if (want_bytes) response.set_object_bytes(std::move(object->shared_object));
  *response.mutable_artifact() = std::move(metadata);
  return response;
}

absl::Status ArtifactCache::StoreLocally(const kiln::v1::ArtifactMetadata& metadata,
                                         absl::string_view object, bool synced) {
  if (static_cast<int64_t>(object.size()) > options_.max_artifact_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the artifact of ", metadata.key().substr(0, 12), " is ", object.size(),
                     " bytes, past the limit of ", options_.max_artifact_bytes,
                     " (kilnd --max_artifact_bytes)"));
  }
  // Object file first: an entry in the store always has its file, or gets
  // it back from the blob (a hit rewrites a missing one).
  RETURN_IF_ERROR(objects_.Write(metadata.digest(), object, /*replace=*/true, synced));
  {
    absl::MutexLock lock(&index_mutex_);  // an Evict sees the entry and its index file, or neither
    RETURN_IF_ERROR(store_->Put(metadata, object, synced));
    // Last: an index file always has its entry and object behind it.
    const absl::Status published = index_.Publish(metadata, synced);
    if (!published.ok())
      KILN_LOG(WARNING) << "cannot index " << metadata.key() << ": " << published;
  }
  if (options_.max_cache_bytes > 0) {
    const absl::StatusOr<StoreTotals> totals = store_->Totals();
    if (totals.ok() && totals->blob_bytes > options_.max_cache_bytes) {
      absl::MutexLock lock(&gc_mutex_);
      gc_wanted_ = true;
    }
  }
  return absl::OkStatus();
}

std::optional<kiln::v1::CompileResponse> ArtifactCache::UseClaim(const std::string& key,
                                                                 bool want_bytes,
                                                                 RemoteTier::Claim claim) {
  if (claim.lease != nullptr) {
    absl::MutexLock lock(&leases_mutex_);
    leases_[key] = std::move(claim.lease);
  }
  if (!claim.entry.has_value()) return std::nullopt;
  kiln::v1::ArtifactMetadata& metadata = claim.entry->metadata;
  // Unsynced: three fsyncs would double a remote hit's time, and an OS
  // crash that loses the entry costs one fetch (a short object file is
  // caught by its digest before anything loads it).
  const absl::Status stored = StoreLocally(metadata, claim.entry->object, /*synced=*/false);
  if (!stored.ok()) {
    KILN_LOG(WARNING) << "cannot store the fleet tier's entry for " << key << " (" << stored
                      << "); compiling it here";
    return std::nullopt;
  }
  // Its use here starts now: the entry may have been compiled long ago.
  const absl::Status used = store_->RecordUse(key, options_.now());
  if (!used.ok()) KILN_LOG(WARNING) << "cannot record a use of " << key << ": " << used;
  kiln::v1::CompileResponse response;
  response.set_object_path(objects_.PathFor(metadata.digest()));
  if (want_bytes) response.set_object_bytes(std::move(claim.entry->object));
  *response.mutable_artifact() = std::move(metadata);
  response.set_cache_hit(true);
  return response;
}

std::unique_ptr<RemoteTier::Lease> ArtifactCache::TakeLease(const std::string& key) {
  absl::MutexLock lock(&leases_mutex_);
  auto it = leases_.find(key);
  if (it == leases_.end()) return nullptr;
  std::unique_ptr<RemoteTier::Lease> lease = std::move(it->second);
  leases_.erase(it);
  return lease;
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
  {
    absl::MutexLock lock(&failures_mutex_);
    const absl::Time now = options_.now();
    for (const auto& [key, failure] : failures_) {
      if (failure.expiry > now) stats.set_remembered_failures(stats.remembered_failures() + 1);
    }
  }
  auto totals = store_->Totals();
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

absl::StatusOr<kiln::v1::ListResponse> ArtifactCache::List(const kiln::v1::ListRequest& request) {
  // Before the background thread's first walk of the index, a listing
  // shows the store's uses alone and says so: a stat per entry here took
  // `kiln ls` 1.5 s at 100,000 entries in the seconds after a start.
  // (Without that thread, LastTouched stats per entry.)
  const bool unread = gc_thread_.joinable() && !TouchesRead();
  const LastTouchedFn store_only = [](const std::string&) { return std::optional<absl::Time>(); };
  ASSIGN_OR_RETURN(kiln::v1::ListResponse page,
                   ListPage(*store_, unread ? store_only : LastTouched(), request));
  page.set_local_uses_unread(unread);
  return page;
}

absl::StatusOr<std::string> ArtifactCache::ResolveKey(const std::string& key_or_prefix) {
  if (key_or_prefix.size() < 6) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", key_or_prefix, "' is too short: give at least 6 hex digits"));
  }
  ASSIGN_OR_RETURN(auto keys, store_->KeysWithPrefix(key_or_prefix, 2));
  if (keys.empty()) return absl::NotFoundError(absl::StrCat("no entry with key ", key_or_prefix));
  if (keys.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("key prefix ", key_or_prefix, " is ambiguous: give more digits"));
  }
  return keys[0];
}

std::optional<absl::Status> ArtifactCache::RememberedFailure(const std::string& key) {
  absl::MutexLock lock(&failures_mutex_);
  auto it = failures_.find(key);
  if (it == failures_.end()) return std::nullopt;
  if (it->second.expiry <= options_.now()) {
    failures_.erase(it);
    return std::nullopt;
  }
  return it->second.status;
}

void ArtifactCache::RememberIfDeterministic(const std::string& key, const absl::Status& failure) {
  if (!IsDeterministicFailure(failure) || options_.remember_failures_for <= absl::ZeroDuration()) {
    return;
  }
  absl::MutexLock lock(&failures_mutex_);
  const absl::Time now = options_.now();
  if (failures_.size() >= options_.max_remembered_failures) {
    for (auto it = failures_.begin(); it != failures_.end();) {
      it = it->second.expiry <= now ? failures_.erase(it) : std::next(it);
    }
  }
  if (failures_.size() >= options_.max_remembered_failures && !failures_.empty()) {
    auto soonest = failures_.begin();
    for (auto it = failures_.begin(); it != failures_.end(); ++it) {
      if (it->second.expiry < soonest->second.expiry) soonest = it;
    }
    failures_.erase(soonest);
  }
  failures_[key] = Failure{failure, now + options_.remember_failures_for};
  KILN_LOG(INFO) << "remembering the failure of " << key.substr(0, 12) << " for "
                 << absl::FormatDuration(options_.remember_failures_for) << " (`kiln evict "
                 << key.substr(0, 12) << "` forgets it)";
}

std::vector<std::string> ArtifactCache::RememberedKeysWithPrefix(const std::string& prefix) {
  absl::MutexLock lock(&failures_mutex_);
  std::vector<std::string> keys;
  for (auto it = failures_.lower_bound(prefix);
       it != failures_.end() && absl::StartsWith(it->first, prefix); ++it) {
    keys.push_back(it->first);
  }
  return keys;
}

absl::StatusOr<kiln::v1::ArtifactMetadata> ArtifactCache::Show(const std::string& key) {
  ASSIGN_OR_RETURN(const std::string full, ResolveKey(key));
  ASSIGN_OR_RETURN(auto entry, store_->Lookup(full));
  if (!entry.has_value()) return absl::NotFoundError(absl::StrCat("no entry with key ", key));
  return *std::move(entry);
}

absl::StatusOr<std::string> ArtifactCache::Evict(const std::string& key) {
  // A key may name a stored entry, a remembered failure, or both; a prefix
  // must name one key among all of them.
  const std::vector<std::string> failed = RememberedKeysWithPrefix(key);
  absl::StatusOr<std::string> stored = ResolveKey(key);
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
  if (!failed.empty()) {
    absl::MutexLock lock(&failures_mutex_);
    failures_.erase(full);
  }
  if (!stored.ok()) return full;
  RETURN_IF_ERROR(EvictStored(full));
  return full;
}

absl::Status ArtifactCache::EvictStored(const std::string& key, bool synced) {
  absl::MutexLock lock(&index_mutex_);
  RETURN_IF_ERROR(index_.Remove(key));  // first: clients stop finding it locally
  ASSIGN_OR_RETURN(const std::optional<std::string> removed_blob, store_->Evict(key, synced));
  // The object file goes with its blob: when no entry references it any
  // more. A process that has it mapped keeps its pages.
  if (removed_blob.has_value()) RETURN_IF_ERROR(objects_.Remove(*removed_blob));
  return absl::OkStatus();
}

absl::StatusOr<ArtifactCache::GcResult> ArtifactCache::Gc(const GcOptions& options) {
  const int64_t max_bytes = options.max_bytes.value_or(options_.max_cache_bytes);
  const absl::Duration max_age = options.max_age.value_or(options_.max_entry_age);
  const absl::Duration grace = options.grace.value_or(options_.eviction_grace);
  ASSIGN_OR_RETURN(std::vector<EntryUsage> entries, store_->Usage());
  // The local index's uses afresh, in one walk (what listings read next).
  RefreshTouches();
  const LastTouchedFn last_touched = LastTouched();
  const absl::Time now = options_.now();
  absl::flat_hash_map<std::string, int> references;  // entries per blob
  GcResult result;
  for (EntryUsage& entry : entries) {
    if (std::optional<absl::Time> touched = last_touched(entry.key)) {
      entry.last_use = std::max(entry.last_use, *touched);
    }
    if (references[entry.digest]++ == 0) result.bytes_before += entry.object_bytes;
  }
  std::sort(entries.begin(), entries.end(), [](const EntryUsage& a, const EntryUsage& b) {
    return std::tie(a.last_use, a.key) < std::tie(b.last_use, b.key);
  });
  result.bytes_after = result.bytes_before;
  for (const EntryUsage& entry : entries) {
    if (entry.pinned) continue;
    const bool too_old = max_age > absl::ZeroDuration() && now - entry.last_use > max_age;
    const bool too_big =
        max_bytes > 0 && result.bytes_after > max_bytes && now - entry.last_use >= grace;
    if (!too_old && !too_big) break;  // every later entry is newer
    if (--references[entry.digest] == 0) result.bytes_after -= entry.object_bytes;
    result.evicted.push_back(entry);
  }
  if (options.dry_run || result.evicted.empty()) return result;
  absl::flat_hash_set<std::string> evicted;
  for (const EntryUsage& entry : result.evicted) {
    // One sync, with the last (an fsync each held gc to ~700 entries/s).
    const absl::Status status = EvictStored(entry.key, &entry == &result.evicted.back());
    // A concurrent `kiln evict` may have been first; anything else stops.
    if (!status.ok() && !absl::IsNotFound(status)) return status;
    evicted.insert(entry.key);
    ++evictions_;
  }
  // Requests that named the evicted keys (local_index.h) go too.
  ASSIGN_OR_RETURN(const std::vector<std::string> aliases, index_.AliasDigests());
  for (const std::string& digest : aliases) {
    absl::StatusOr<std::optional<std::string>> key = index_.FindAlias(digest);
    if (key.ok() && key->has_value() && evicted.contains(**key)) {
      RETURN_IF_ERROR(index_.RemoveAlias(digest));
    }
  }
  return result;
}

absl::StatusOr<kiln::v1::VerifyResponse> ArtifactCache::Verify(bool repair) {
  kiln::v1::VerifyResponse report;
  auto problem = [&](const std::string& key, absl::string_view what) {
    report.add_problems(absl::StrCat(key.substr(0, 16), ": ", what));
  };
  ASSIGN_OR_RETURN(const std::vector<EntryUsage> entries, store_->Usage());
  absl::flat_hash_set<std::string> digests;
  for (const EntryUsage& usage : entries) {
    report.set_entries(report.entries() + 1);
    digests.insert(usage.digest);
    // Reading quarantines a damaged entry or blob (cache/store.h).
    ASSIGN_OR_RETURN(const std::optional<kiln::v1::ArtifactMetadata> entry,
                     store_->Lookup(usage.key));
    if (!entry.has_value()) {
      report.set_bad_entries(report.bad_entries() + 1);
      problem(usage.key, "metadata unreadable: quarantined");
      absl::MutexLock lock(&index_mutex_);
      RETURN_IF_ERROR(index_.Remove(usage.key));
      continue;
    }
    ASSIGN_OR_RETURN(const std::optional<std::string> blob, store_->ReadBlob(entry->digest()));
    if (!blob.has_value()) {
      report.set_bad_blobs(report.bad_blobs() + 1);
      problem(usage.key, "blob does not match its digest: quarantined");
      if (repair) {
        const absl::Status evicted = EvictStored(usage.key);
        if (!evicted.ok() && !absl::IsNotFound(evicted)) return evicted;
        report.set_repaired(report.repaired() + 1);
      }
      continue;
    }
    absl::MutexLock lock(&index_mutex_);
    const absl::StatusOr<std::string> object = ReadFile(objects_.PathFor(entry->digest()));
    if (!object.ok() || Sha256Hex(*object) != entry->digest()) {
      report.set_bad_objects(report.bad_objects() + 1);
      problem(usage.key,
              object.ok() ? "object file does not match its digest" : "object file missing");
      if (repair) {
        RETURN_IF_ERROR(objects_.Write(entry->digest(), *blob, /*replace=*/true));
        report.set_repaired(report.repaired() + 1);
      }
    }
    const absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> indexed =
        index_.Find(usage.key);
    if (!indexed.ok()) {
      report.set_bad_index(report.bad_index() + 1);
      problem(usage.key, indexed.status().message());
    } else if (!indexed->has_value()) {
      report.set_unindexed(report.unindexed() + 1);
    }
    if (repair && (!indexed.ok() || !indexed->has_value())) {
      RETURN_IF_ERROR(index_.Remove(usage.key));
      RETURN_IF_ERROR(index_.Publish(*entry));
      if (!indexed.ok()) report.set_repaired(report.repaired() + 1);
    }
  }
  // Object files no entry references (left by a crash between writes).
  ASSIGN_OR_RETURN(const std::vector<std::string> objects, objects_.Digests());
  absl::MutexLock lock(&index_mutex_);  // a Build writes its object before its entry
  for (const std::string& digest : objects) {
    if (digests.contains(digest)) continue;
    report.set_orphan_objects(report.orphan_objects() + 1);
    if (repair) RETURN_IF_ERROR(objects_.Remove(digest));
  }
  return report;
}

absl::StatusOr<kiln::v1::PruneResponse> ArtifactCache::Prune(bool dry_run) {
  ASSIGN_OR_RETURN(const std::vector<kiln::v1::ArtifactMetadata> entries, store_->List());
  kiln::v1::PruneResponse response;
  for (const kiln::v1::ArtifactMetadata& entry : entries) {
    const std::string reason = StaleReason(entry, toolchain_digests_);
    if (reason.empty()) continue;
    kiln::v1::PruneResponse::Pruned* pruned = response.add_pruned();
    pruned->set_key(entry.key());
    pruned->set_reason(reason);
    pruned->set_object_bytes(entry.object_bytes());
    if (dry_run) continue;
    const absl::Status evicted = EvictStored(entry.key());
    if (!evicted.ok() && !absl::IsNotFound(evicted)) return evicted;
  }
  return response;
}

absl::StatusOr<kiln::v1::WhyResponse> ArtifactCache::Why(const kiln::v1::WhyRequest& request) {
  std::vector<KeyedRequestSummary> asked;
  if (request.has_request()) {
    ASSIGN_OR_RETURN(const KeyedRequest keyed, KeyRequest(request.request(), toolchain_digests_));
    asked.push_back(SummarizeRequest(keyed.inputs, keyed.key,
                                     toolchains_.at(request.request().options().target()),
                                     options_.now()));
  } else {
    absl::MutexLock lock(&misses_mutex_);
    const int last = request.last() > 0 ? request.last() : 1;
    for (int i = 0; i < last && i < static_cast<int>(recent_misses_.size()); ++i) {
      asked.push_back(recent_misses_[i]);
    }
  }
  kiln::v1::WhyResponse response;
  if (asked.empty()) return response;
  ASSIGN_OR_RETURN(const std::vector<kiln::v1::ArtifactMetadata> entries, store_->List());
  for (const KeyedRequestSummary& one : asked) {
    *response.add_requests() = Explain(one, entries, request.nearest() > 0 ? request.nearest() : 3);
  }
  return response;
}

absl::StatusOr<std::vector<std::string>> ArtifactCache::SetPinned(const std::string& key_or_prefix,
                                                                  bool pinned) {
  if (key_or_prefix.size() < 6) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", key_or_prefix, "' is too short: give at least 6 hex digits"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> keys,
                   store_->KeysWithPrefix(key_or_prefix, std::numeric_limits<int>::max()));
  if (keys.empty()) {
    return absl::NotFoundError(absl::StrCat("no entry with key ", key_or_prefix));
  }
  for (const std::string& key : keys) RETURN_IF_ERROR(store_->SetPinned(key, pinned));
  return keys;
}

absl::StatusOr<std::vector<std::string>> ArtifactCache::SetPinnedForGraph(
    const std::string& graph_digest, bool pinned) {
  ASSIGN_OR_RETURN(const std::vector<EntryUsage> entries, store_->Usage());  // no metadata
  std::vector<std::string> keys;
  for (const EntryUsage& entry : entries) {
    if (entry.source_graph != graph_digest) continue;
    RETURN_IF_ERROR(store_->SetPinned(entry.key, pinned));
    keys.push_back(entry.key);
  }
  if (keys.empty()) {
    return absl::NotFoundError(
        "no entry was compiled from this graph (CompiledGraph, kiln run and kiln warmup record "
        "the graph they were given)");
  }
  return keys;
}

absl::StatusOr<kiln::v1::ExportResponse> ArtifactCache::Export(
    const kiln::v1::ExportRequest& request) {
  RETURN_IF_ERROR(CheckBundlePath(request.path()));
  std::vector<std::string> keys;  // in the order asked for, each once
  absl::flat_hash_set<std::string> chosen;
  auto choose = [&](const std::string& key) {
    if (chosen.insert(key).second) keys.push_back(key);
  };
  for (const std::string& key_or_prefix : request.keys()) {
    ASSIGN_OR_RETURN(const std::string key, ResolveKey(key_or_prefix));
    choose(key);
  }
  for (const kiln::v1::ExportRequest::NamedRequest& named : request.requests()) {
    absl::StatusOr<KeyedRequest> keyed = KeyRequest(named.request(), toolchain_digests_);
    if (!keyed.ok()) {
      return absl::Status(keyed.status().code(),
                          absl::StrCat(named.name(), ": ", keyed.status().message()));
    }
    ASSIGN_OR_RETURN(const std::optional<kiln::v1::ArtifactMetadata> stored,
                     store_->Lookup(keyed->key.key));
    if (!stored.has_value()) {
      return absl::NotFoundError(absl::StrCat(named.name(), " is not in the cache (key ",
                                              keyed->key.key.substr(0, 12),
                                              "): compile or warm it first"));
    }
    choose(keyed->key.key);
  }
  if (request.keys().empty() && request.requests().empty()) {
    ASSIGN_OR_RETURN(const std::vector<EntryUsage> everything, store_->Usage());
    for (const EntryUsage& entry : everything) choose(entry.key);
  }

  ASSIGN_OR_RETURN(std::unique_ptr<BundleWriter> writer,
                   BundleWriter::Create(request.path(), keys.size()));
  kiln::v1::ExportResponse response;
  for (const std::string& key : keys) {
    ASSIGN_OR_RETURN(const std::optional<kiln::v1::ArtifactMetadata> entry, store_->Lookup(key));
    if (!entry.has_value()) {
      return absl::NotFoundError(
          absl::StrCat("entry ", key, " was evicted during the export: export again"));
    }
    ASSIGN_OR_RETURN(const std::optional<std::string> blob, store_->ReadBlob(entry->digest()));
    if (!blob.has_value()) {
      return absl::DataLossError(
          absl::StrCat("entry ", key,
                       " has no intact blob (quarantined): evict it or compile it again, then "
                       "export again"));
    }
    RETURN_IF_ERROR(writer->Add(*entry, *blob));
    kiln::v1::BundledEntry* bundled = response.add_entries();
    bundled->set_key(key);
    bundled->set_graph_name(entry->graph_name());
    bundled->set_object_bytes(static_cast<int64_t>(blob->size()));
  }
  RETURN_IF_ERROR(writer->Finish());
  response.set_bundle_bytes(writer->bytes_written());
  KILN_LOG(INFO) << "exported " << keys.size() << " entries to " << request.path();
  return response;
}

absl::StatusOr<kiln::v1::ImportResponse> ArtifactCache::Import(
    const kiln::v1::ImportRequest& request) {
  RETURN_IF_ERROR(CheckBundlePath(request.path()));
  BundleLimits limits;
  limits.max_blob_bytes = static_cast<uint64_t>(options_.max_artifact_bytes);
  limits.max_metadata_bytes = static_cast<uint64_t>(options_.max_bundle_metadata_bytes);
  KILN_LOG(INFO) << "importing " << request.path();
  // First pass: the whole file checked, holding no blob.
  std::vector<std::pair<kiln::v1::ArtifactMetadata, int64_t>> entries;  // with blob lengths
  RETURN_IF_ERROR(ScanBundle(
      request.path(), limits, /*with_blobs=*/false,
      [&](const kiln::v1::ArtifactMetadata& metadata, uint64_t blob_bytes, absl::string_view) {
        entries.emplace_back(metadata, static_cast<int64_t>(blob_bytes));
        return absl::OkStatus();
      }));
  kiln::v1::ImportResponse response;
  std::vector<std::string> refused;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [metadata, blob_bytes] = entries[i];
    const std::string reason = StaleReason(metadata, toolchain_digests_);
    kiln::v1::BundledEntry* entry = response.add_entries();
    entry->set_key(metadata.key());
    entry->set_graph_name(metadata.graph_name());
    entry->set_object_bytes(blob_bytes);
    entry->set_stale_reason(reason);
    if (!reason.empty()) {
      refused.push_back(
          absl::StrCat("entry ", i, " (key ", metadata.key().substr(0, 12), ", graph ",
                       metadata.graph_name().empty() ? "-" : metadata.graph_name(), "): ", reason));
    }
  }
  if (!refused.empty() && !request.force()) {
    constexpr size_t kListed = 5;
    const size_t more = refused.size() > kListed ? refused.size() - kListed : 0;
    refused.resize(refused.size() - more);
    return absl::FailedPreconditionError(absl::StrCat(
        request.path(), ": ", refused.size() + more, " of ", entries.size(),
        " entries were built for another toolchain, codegen version or target than this kilnd "
        "compiles for, and their keys cover those, so they could never be a hit here: ",
        absl::StrJoin(refused, "; "), more > 0 ? absl::StrCat("; and ", more, " more") : "",
        ". Nothing was imported; --force imports them anyway"));
  }

  // Second pass: one blob at a time into the store and the object
  // directory, where no entry references it yet (object files first, as
  // StoreLocally: an entry always has its file or gets it back from the
  // blob). A file that changed since the first pass is refused by its
  // checks, or here.
  size_t next = 0;
  RETURN_IF_ERROR(
      ScanBundle(request.path(), limits, /*with_blobs=*/true,
                 [&](const kiln::v1::ArtifactMetadata& metadata, uint64_t, absl::string_view blob) {
                   if (next >= entries.size() || entries[next].first.key() != metadata.key() ||
                       entries[next].first.digest() != metadata.digest()) {
                     return absl::AbortedError(absl::StrCat(
                         request.path(), " changed during the import: import it again"));
                   }
                   ++next;
                   const absl::Status written =
                       objects_.Write(metadata.digest(), blob, /*replace=*/false, /*synced=*/false);
                   if (!written.ok()) {
                     KILN_LOG(WARNING) << "cannot write the object of " << metadata.key()
                                       << " (a request for it writes it): " << written;
                   }
                   return store_->PutBlob(metadata.digest(), blob);
                 }));
  if (next != entries.size()) {
    return absl::AbortedError(
        absl::StrCat(request.path(), " changed during the import: import it again"));
  }
  absl::SleepFor(options_.testonly_import_delay);
  {
    // As Build: an Evict sees the entries and their index records, or
    // neither. The entries in one write (the one atomic step: a failure
    // leaves the cache as it was), then the index records (one always has
    // its entry and object behind it).
    absl::MutexLock lock(&index_mutex_);
    RETURN_IF_ERROR(store_->PutEntries(entries));
    const absl::Time now = options_.now();
    for (const auto& [metadata, blob_bytes] : entries) {
      // Imported now: not the oldest in the cache for eviction.
      const absl::Status used = store_->RecordUse(metadata.key(), now);
      if (!used.ok())
        KILN_LOG(WARNING) << "cannot record a use of " << metadata.key() << ": " << used;
      const absl::Status published = index_.Publish(metadata, /*synced=*/false);
      if (!published.ok()) {
        KILN_LOG(WARNING) << "cannot index " << metadata.key() << ": " << published;
      }
    }
    // Objects and index records unsynced, then one sync of them all (an
    // fsync each held imports to ~600 entries/s).
    if (const absl::Status synced = SyncFileSystem(objects_.root()); !synced.ok()) {
      KILN_LOG(WARNING) << synced << " (an OS crash may leave imported objects short: clients "
                        << "catch that by their digests)";
    }
  }
  {
    absl::MutexLock lock(&failures_mutex_);
    for (const auto& [metadata, blob_bytes] : entries) failures_.erase(metadata.key());
  }
  if (options_.max_cache_bytes > 0) {
    const absl::StatusOr<StoreTotals> totals = store_->Totals();
    if (totals.ok() && totals->blob_bytes > options_.max_cache_bytes) {
      absl::MutexLock lock(&gc_mutex_);
      gc_wanted_ = true;
    }
  }
  KILN_LOG(INFO) << "imported " << entries.size() << " entries from " << request.path()
                 << (refused.empty() ? "" : absl::StrCat(" (", refused.size(), " forced)"));
  return response;
}

}  // namespace kiln
