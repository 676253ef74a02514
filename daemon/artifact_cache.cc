#include "daemon/artifact_cache.h"

#include "absl/strings/str_cat.h"
#include "cache/key.h"
#include "codegen/abi/kiln_abi.h"
#include "codegen/guards.h"
#include "codegen/pipeline.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

double MillisecondsSince(absl::Time start) { return absl::ToDoubleMilliseconds(absl::Now() - start); }

}  // namespace

ArtifactCache::ArtifactCache(std::unique_ptr<ArtifactStore> store, ObjectDirectory objects,
                             LocalIndex index, std::unique_ptr<Compiler> compiler,
                             kiln::v1::Toolchain toolchain, Options options)
    : store_(std::move(store)),
      objects_(std::move(objects)),
      index_(std::move(index)),
      compiler_(std::move(compiler)),
      toolchain_(std::move(toolchain)),
      queue_(options.compile_threads) {}

ArtifactCache::~ArtifactCache() { Shutdown(); }

void ArtifactCache::Shutdown() { queue_.Shutdown(); }

absl::StatusOr<std::optional<kiln::v1::CompileResponse>> ArtifactCache::FindStored(
    const std::string& key, bool want_bytes, bool repair) {
  absl::ReaderMutexLock lock(&index_mutex_);  // hits only rename files in: they may overlap
  ASSIGN_OR_RETURN(auto entry, store_->Lookup(key));
  if (!entry.has_value()) return std::nullopt;
  kiln::v1::CompileResponse response;
  const std::string& digest = entry->digest();
  if (repair) {
    KILN_LOG(WARNING) << "object " << digest << " reported corrupt by a client; rewriting it";
  }
  if (want_bytes || repair || !objects_.Contains(digest)) {
    ASSIGN_OR_RETURN(auto blob, store_->ReadBlob(digest));
    if (!blob.has_value()) {
      KILN_LOG(WARNING) << "entry " << key << " has no intact blob; compiling again";
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
  auto graph = PrepareGraph(request.graph());
  if (!graph.ok()) return done(graph.status());
  auto guards = ResolveGuards(*graph, request.guards());
  if (!guards.ok()) return done(guards.status());
  auto inputs = std::make_shared<CodegenInputs>();
  inputs->graph = *std::move(graph);
  inputs->guards = *std::move(guards);
  inputs->options = request.options();
  inputs->toolchain = toolchain_;
  const CacheKey key = ComputeCacheKey(*inputs);
  const bool want_bytes = request.want_bytes();

  auto stored = FindStored(key.key, want_bytes, request.repair());
  if (!stored.ok()) return done(stored.status());
  if (stored->has_value()) {
    ++hits_;
    return done(**std::move(stored));
  }
  ++misses_;
  if (!allow_compile) {
    return done(absl::NotFoundError(absl::StrCat("no artifact for this graph (key ", key.key, ")")));
  }
  // A request that wants the bytes inline joins only jobs that fetch them.
  const bool joined = queue_.Submit(
      want_bytes ? key.key + "+bytes" : key.key,
      [this, inputs, key, want_bytes, received]() -> CompileQueue::Result {
        // Checked again: the job that just finished may have stored it.
        ASSIGN_OR_RETURN(auto stored, FindStored(key.key, want_bytes));
        if (stored.has_value()) return *std::move(stored);
        return Build(*inputs, key.components, key.key, want_bytes, received);
      },
      std::move(done));
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
    return code.status();
  }
  const double codegen_ms = MillisecondsSince(start);
  auto object = compiler_->Compile(code->source);
  if (!object.ok()) {
    ++compile_failures_;
    KILN_LOG(ERROR) << "compile of " << key << " failed: " << object.status();
    return object.status();
  }
  compile_us_total_ += static_cast<int64_t>(object->compile_ms * 1000);

  kiln::v1::ArtifactMetadata metadata;
  metadata.set_key(key);
  metadata.set_digest(Sha256Hex(object->shared_object));
  metadata.set_abi_version(KILN_ABI_VERSION);
  *metadata.mutable_signature() = std::move(code->signature);
  *metadata.mutable_guards() = inputs.guards;
  *metadata.mutable_toolchain() = toolchain_;
  metadata.set_object_bytes(object->shared_object.size());
  metadata.set_source_bytes(code->source.size());
  metadata.set_created_unix_ms(absl::ToUnixMillis(absl::Now()));
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
  auto totals = store_->Totals();
  if (totals.ok()) {
    stats.set_entries(totals->entries);
    stats.set_blobs(totals->blobs);
    stats.set_bytes_stored(totals->blob_bytes);
    stats.set_corrupt_blobs(totals->quarantined);
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

absl::StatusOr<kiln::v1::ArtifactMetadata> ArtifactCache::Show(const std::string& key) {
  ASSIGN_OR_RETURN(const std::string full, ResolveKey(key));
  ASSIGN_OR_RETURN(auto entry, store_->Lookup(full));
  if (!entry.has_value()) return absl::NotFoundError(absl::StrCat("no entry with key ", key));
  return *std::move(entry);
}

absl::StatusOr<std::string> ArtifactCache::Evict(const std::string& key) {
  ASSIGN_OR_RETURN(const std::string full, ResolveKey(key));
  absl::MutexLock lock(&index_mutex_);
  RETURN_IF_ERROR(index_.Remove(full));  // first: clients stop finding it locally
  ASSIGN_OR_RETURN(const std::optional<std::string> removed_blob, store_->Evict(full));
  // The object file goes with its blob: when no entry references it any more.
  if (removed_blob.has_value()) RETURN_IF_ERROR(objects_.Remove(*removed_blob));
  return full;
}

}  // namespace kiln
