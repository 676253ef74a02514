#include "daemon/compile_path.h"

#include <algorithm>
#include <utility>
#include <variant>

#include "abi/kiln_abi.h"
#include "absl/strings/str_cat.h"
#include "codegen/pipeline.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

double MillisecondsSince(absl::Time start) {
  return absl::ToDoubleMilliseconds(absl::Now() - start);
}

// What a look at the top tier answers when this kilnd should compile (no
// tier had the entry): the compile queue's turn.
constexpr char kCompileHerePayload[] = "kiln/compile-here";
absl::Status CompileHere() {
  absl::Status status = absl::AbortedError("no tier has the artifact: compile it here");
  status.SetPayload(kCompileHerePayload, absl::Cord());
  return status;
}
bool IsCompileHere(const CompileQueue::Result& result) {
  return !result.ok() && result.status().GetPayload(kCompileHerePayload).has_value();
}

}  // namespace

CompilePath::CompilePath(LocalTier* local, Tier* tier, Compiler* compiler,
                         const TargetToolchains* toolchains, Options options,
                         std::function<void()> committed)
    : local_(local),
      tier_(tier),
      compiler_(compiler),
      toolchains_(toolchains),
      toolchain_digests_(DigestToolchains(*toolchains)),
      request_salts_(RequestSaltsFor(toolchain_digests_)),
      options_(std::move(options)),
      committed_(std::move(committed)),
      failures_(options_.failures),
      look_queue_(tier == local ? nullptr : std::make_unique<CompileQueue>(kLookThreads)),
      compile_queue_(options_.compile_threads) {}

void CompilePath::Shutdown() {
  if (look_queue_ != nullptr) look_queue_->Shutdown();
  compile_queue_.Shutdown();
}

void CompilePath::Compile(const kiln::v1::CompileRequest& request, bool allow_compile, Done done) {
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

  // The key, computed here and nowhere else.
  absl::StatusOr<KeyedRequest> keyed = KeyRequest(request, toolchain_digests_);
  if (!keyed.ok()) return done(keyed.status());
  auto inputs = std::make_shared<CodegenInputs>(std::move(keyed->inputs));
  const CacheKey key = std::move(keyed->key);
  // Once answered, the next process that sends this request finds its key
  // by the request's digest, without asking (cache/local_index.h). Written
  // before the reply, so that it never outlives the cache.
  absl::StatusOr<std::string> request_digest = RequestDigest(request, request_salts_);
  if (request_digest.ok()) {
    done = [this, request_digest = *std::move(request_digest), key = key.key,
            done = std::move(done)](absl::StatusOr<kiln::v1::CompileResponse> response) {
      if (response.ok()) local_->CommitAlias(request_digest, key);
      done(std::move(response));
    };
  }
  const bool want_bytes = request.want_bytes();

  // The local tier: a point lookup on the caller's thread.
  Tier::Query query{key.key, want_bytes, request.repair()};
  absl::StatusOr<Tier::Found> found = local_->Find(query);
  if (!found.ok()) return done(found.status());
  if (found->response.has_value()) {
    ++hits_;
    return done(*std::move(found->response));
  }
  ++misses_;
  {
    absl::MutexLock lock(&misses_mutex_);
    recent_misses_.push_front(SummarizeRequest(
        *inputs, key, toolchains_->at(request.options().target()), options_.now()));
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

  // The compile, single-flight: one job per key (a request that wants the
  // bytes inline joins only jobs that fetch them). The node count stands
  // for the compile's cost: small graphs keep a thread of their own
  // (daemon/compile_queue.h).
  CompileQueue::JobOptions job;
  job.cost = static_cast<int64_t>(inputs->graph.nodes.size());
  job.priority = request.priority() == kiln::v1::CompileRequest::PRIORITY_WARMUP
                     ? CompileQueue::kBackground
                     : CompileQueue::kInteractive;
  const std::string job_key = want_bytes ? key.key + "+bytes" : key.key;
  auto compile = [this, inputs, key, want_bytes, received, job, job_key,
                  source_graph = request.source_graph()](Done done) {
    const bool joined = compile_queue_.Submit(
        job_key,
        [this, inputs, key, want_bytes, received, source_graph]() -> CompileQueue::Result {
          // Looked up again: the job that just finished may have stored it.
          CompileQueue::Result result = [&]() -> CompileQueue::Result {
            Tier::Query again{key.key, want_bytes};
            ASSIGN_OR_RETURN(Tier::Found stored, local_->Find(again));
            if (stored.response.has_value()) return *std::move(stored.response);
            return Build(*inputs, key.components, key.key, source_graph, want_bytes, received);
          }();
          tier_->Abandon(key.key);  // no-op after a commit
          return result;
        },
        std::move(done), job);
    if (joined) ++coalesced_;
  };
  if (look_queue_ == nullptr) return compile(std::move(done));

  // Before it, the tiers over the local one, on threads of their own, one
  // look at a time: a miss that waits for another machine's compile holds no
  // thread between looks, neither a compile thread nor a look one.
  const bool joined = look_queue_->SubmitSteps(
      job_key,
      [this, query = std::make_shared<Tier::Query>(
                 query)]() -> std::variant<CompileQueue::Result, absl::Duration> {
        absl::StatusOr<Tier::Found> found = tier_->Find(*query);
        if (!found.ok()) return found.status();
        if (found->look_again_after > absl::ZeroDuration()) return found->look_again_after;
        if (!found->response.has_value()) return CompileHere();
        committed_();  // it may have been fetched
        return *std::move(found->response);
      },
      [compile = std::move(compile), done = std::move(done)](CompileQueue::Result result) mutable {
        if (IsCompileHere(result)) return compile(std::move(done));
        done(std::move(result));
      },
      CompileQueue::JobOptions{/*cost=*/0, job.priority});
  if (joined) ++coalesced_;
}

absl::StatusOr<kiln::v1::CompileResponse> CompilePath::Build(
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
  *metadata.mutable_toolchain() = toolchains_->at(inputs.options.target());
  metadata.set_target(inputs.options.target());
  if (!inputs.graph.symbols.empty()) {
    *metadata.mutable_run_time_sizes() = limits::RunTimeSizesOf(inputs.graph);
    metadata.set_safe_symbol_value(limits::LargestSafeSymbolValue(metadata.run_time_sizes()));
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
  RETURN_IF_ERROR(tier_->Commit(metadata, std::move(object->shared_object), /*synced=*/true));
  committed_();
  KILN_LOG(INFO) << "compiled " << key.substr(0, 12) << " (" << inputs.graph.name << ") in "
                 << metadata.timings().total_ms() << " ms";
  response.set_object_path(local_->objects().PathFor(metadata.digest()));
  *response.mutable_artifact() = std::move(metadata);
  return response;
}

void CompilePath::AddStats(kiln::v1::StatsResponse& stats) {
  stats.set_hits(hits_);
  stats.set_misses(misses_);
  stats.set_compiles(compiles_);
  stats.set_compile_failures(compile_failures_);
  stats.set_coalesced(coalesced_);
  stats.set_compile_ms_total(compile_us_total_ / 1000.0);
  stats.set_failures_replayed(failures_replayed_);
  failures_by_kind_.AddTo(stats);
  stats.set_queue_length(compile_queue_.queued());
  for (double bound : kCompileMsBounds) stats.add_compile_ms_bounds(bound);
  for (const std::atomic<int64_t>& count : compile_ms_counts_) stats.add_compile_ms_counts(count);
  stats.set_remembered_failures(failures_.Count());
}

std::vector<KeyedRequestSummary> CompilePath::RecentMisses(int count) {
  absl::MutexLock lock(&misses_mutex_);
  const size_t n = std::min(recent_misses_.size(), static_cast<size_t>(std::max(count, 0)));
  return {recent_misses_.begin(), recent_misses_.begin() + n};
}

}  // namespace kiln
