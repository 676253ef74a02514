#include "daemon/artifact_cache.h"

#include <sys/resource.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "cache/index_reconcile.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

CompilePath::Options CompilePathOptions(const ArtifactCache::Options& options) {
  CompilePath::Options path;
  path.compile_threads = options.compile_threads;
  path.max_graph_nodes = options.max_graph_nodes;
  path.failures = {options.remember_failures_for, options.max_remembered_failures, options.now};
  path.now = options.now;
  path.testonly_compile_delay = options.testonly_compile_delay;
  return path;
}

}  // namespace

ArtifactCache::ArtifactCache(std::unique_ptr<ArtifactStore> store, ObjectDirectory objects,
                             LocalIndex index, std::unique_ptr<Compiler> compiler,
                             TargetToolchains toolchains, Options options)
    : tier_(std::move(store), std::move(objects), std::move(index), options.max_artifact_bytes,
            options.now),
      fleet_(options.remote == nullptr ? nullptr
                                       : std::make_unique<FleetTier>(&tier_, options.remote)),
      compiler_(std::move(compiler)),
      toolchains_(std::move(toolchains)),
      options_(options),
      compile_path_(&tier_, fleet_ != nullptr ? static_cast<Tier*>(fleet_.get()) : &tier_,
                    compiler_.get(), &toolchains_, CompilePathOptions(options),
                    [this] { WakeGcIfOverCap(); }) {
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
  // A look waiting on another machine's lease gives up.
  if (options_.remote != nullptr) options_.remote->StopWaiting();
  compile_path_.Shutdown();
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
  compile_path_.AddStats(stats);
  stats.set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - started_));
  stats.set_evictions(evictions_);
  stats.set_max_cache_bytes(options_.max_cache_bytes);
  stats.set_local_index_hits(local_index_hits_);
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

bool ArtifactCache::UsesUnread() { return gc_thread_.joinable() && !tier_.TouchesRead(); }

absl::StatusOr<admin::GcResult> ArtifactCache::Gc(const admin::GcLimits& limits) {
  ASSIGN_OR_RETURN(admin::GcResult result, admin::Gc(tier_, limits, options_.now()));
  if (!limits.dry_run) evictions_ += static_cast<int64_t>(result.evicted.size());
  return result;
}

void ArtifactCache::Stored(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) compile_path_.failures().Forget(key);
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
  RememberedFailures& failures = compile_path_.failures();
  const std::vector<std::string> failed = failures.KeysWithPrefix(key);
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
  if (!failed.empty()) failures.Forget(full);
  if (!stored.ok()) return full;
  RETURN_IF_ERROR(tier_.Evict(full));
  return full;
}

}  // namespace kiln
