#include "daemon/artifact_cache.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

// An Internal error that reports the compiler process dying rather than the
// compiler rejecting the source (compiler.h gives both the same code).
bool IsCompilerCrash(const absl::Status& status) {
  const absl::string_view message = status.message();
  return absl::StartsWith(message, "compile worker crashed") ||
         absl::StartsWith(message, "compile worker exited") ||
         absl::StartsWith(message, "clang++ failed (signal");
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
      queue_(options.compile_threads) {
  if (options_.max_cache_bytes > 0 || options_.max_entry_age > absl::ZeroDuration()) {
    gc_thread_ = std::thread([this] { GcLoop(); });
  }
}

ArtifactCache::~ArtifactCache() {
  Shutdown();
  if (gc_thread_.joinable()) gc_thread_.join();
}

void ArtifactCache::Shutdown() {
  queue_.Shutdown();
  absl::MutexLock lock(&gc_mutex_);
  gc_stopping_ = true;
}

void ArtifactCache::GcLoop() {
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

void ArtifactCache::Compile(const kiln::v1::CompileRequest& request, bool allow_compile,
                            Done done) {
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
  const bool joined = queue_.Submit(
      want_bytes ? key.key + "+bytes" : key.key,
      [this, inputs, key, want_bytes, received]() -> CompileQueue::Result {
        // Checked again: the job that just finished may have stored it.
        ASSIGN_OR_RETURN(auto stored, FindStored(key.key, want_bytes));
        if (stored.has_value()) return *std::move(stored);
        return Build(*inputs, key.components, key.key, want_bytes, received);
      },
      std::move(done), job);
  if (joined) ++coalesced_;
}

absl::StatusOr<kiln::v1::CompileResponse> ArtifactCache::Build(
    const CodegenInputs& inputs, const kiln::v1::KeyComponents& components, const std::string& key,
    bool want_bytes, absl::Time received) {
  ++compiles_;
  const absl::Time start = absl::Now();
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
    RememberIfDeterministic(key, object.status());
    return object.status();
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
  metadata.set_compiler(object->compiler);
  metadata.mutable_timings()->set_codegen_ms(codegen_ms);
  metadata.mutable_timings()->set_compile_ms(object->compile_ms);
  metadata.mutable_timings()->set_total_ms(MillisecondsSince(received));

  // Object file first: an entry in the store always has its file, or gets
  // it back from the blob (a hit rewrites a missing one).
  RETURN_IF_ERROR(objects_.Write(metadata.digest(), object->shared_object, /*replace=*/true));
  {
    absl::MutexLock lock(&index_mutex_);  // an Evict sees the entry and its index file, or neither
    RETURN_IF_ERROR(store_->Put(metadata, object->shared_object));
    // Last: an index file always has its entry and object behind it.
    const absl::Status published = index_.Publish(metadata);
    if (!published.ok()) KILN_LOG(WARNING) << "cannot index " << key << ": " << published;
  }
  if (options_.max_cache_bytes > 0) {
    const absl::StatusOr<StoreTotals> totals = store_->Totals();
    if (totals.ok() && totals->blob_bytes > options_.max_cache_bytes) {
      absl::MutexLock lock(&gc_mutex_);
      gc_wanted_ = true;
    }
  }
  KILN_LOG(INFO) << "compiled " << key.substr(0, 12) << " (" << inputs.graph.name << ") in "
                 << metadata.timings().total_ms() << " ms";

  kiln::v1::CompileResponse response;
  response.set_object_path(objects_.PathFor(metadata.digest()));
  if (want_bytes) response.set_object_bytes(std::move(object->shared_object));
  *response.mutable_artifact() = std::move(metadata);
  return response;
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

absl::StatusOr<kiln::v1::ListResponse> ArtifactCache::List() {
  ASSIGN_OR_RETURN(auto entries, store_->List());
  kiln::v1::ListResponse response;
  for (auto& entry : entries) *response.add_entries() = std::move(entry);
  return response;
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

absl::Status ArtifactCache::EvictStored(const std::string& key) {
  absl::MutexLock lock(&index_mutex_);
  RETURN_IF_ERROR(index_.Remove(key));  // first: clients stop finding it locally
  ASSIGN_OR_RETURN(const std::optional<std::string> removed_blob, store_->Evict(key));
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
  const absl::Time now = options_.now();
  absl::flat_hash_map<std::string, int> references;  // entries per blob
  GcResult result;
  for (EntryUsage& entry : entries) {
    if (std::optional<absl::Time> touched = index_.LastTouched(entry.key)) {
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
    const absl::Status status = EvictStored(entry.key);
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

}  // namespace kiln
