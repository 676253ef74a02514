#include "client/compiled_graph.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "client/runtime/fastest_of.h"
#include "client/warmup_plan.h"
#include "codegen/limits.h"
#include "codegen/prepare.h"
#include "codegen/retype.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"

namespace kiln {
namespace {

constexpr int kMaxStackTensors = 16;

// The most runs of one warmup bucket: its first, every trial of a shape
// with the most ways, and the run that finds them all decided.
constexpr int kMaxWarmupRuns = 2 + FastestOf<int>::kMaxWays * FastestOf<int>::kTrials;

// Bumped by UnloadIdle: each thread trims its scratch on its next call.
std::atomic<uint64_t> scratch_trim_epoch{0};

// This thread's scratch arena, grown as needed and reused across calls so a
// steady-state Run allocates nothing; nullptr when the memory is not there.
// After an UnloadIdle, an arena more than twice what the call needs is
// given back first.
void* ThreadScratch(int64_t bytes) {
  thread_local GrowingBuffer arena;
  thread_local uint64_t trimmed_at = 0;
  const uint64_t epoch = scratch_trim_epoch.load(std::memory_order_relaxed);
  if (trimmed_at != epoch) {
    trimmed_at = epoch;
    if (arena.size() > 2 * bytes) arena.Release();
  }
  return arena.Get(bytes);
}

// FNV-1a over each input's rank and sizes: where static entries are filed
// (no allocation, as Run must not allocate).
class SizesHash {
 public:
  void Add(int64_t value) { hash_ = (hash_ ^ static_cast<uint64_t>(value)) * 1099511628211ull; }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 14695981039346656037ull;
};

uint64_t HashOfSizes(absl::Span<const TensorView> inputs) {
  SizesHash hash;
  for (const TensorView& input : inputs) {
    hash.Add(input.rank());
    for (int64_t size : input.sizes) hash.Add(size);
  }
  return hash.value();
}

// The same for per-input size lists (a padded call's).
uint64_t HashOfSizes(const std::vector<std::vector<int64_t>>& inputs) {
  SizesHash hash;
  for (const std::vector<int64_t>& sizes : inputs) {
    hash.Add(static_cast<int64_t>(sizes.size()));
    for (int64_t size : sizes) hash.Add(size);
  }
  return hash.value();
}

// The same for a static artifact's inputs.
uint64_t HashOfSizes(const kiln::v1::Signature& signature) {
  SizesHash hash;
  for (const kiln::v1::TensorType& input : signature.inputs()) {
    hash.Add(input.sizes_size());
    for (const kiln::v1::Dim& dim : input.sizes()) hash.Add(dim.constant());
  }
  return hash.value();
}

// The input whose storage output k is (Signature.output_aliases), or -1.
int AliasedInput(const kiln::v1::Signature& signature, int output) {
  for (const kiln::v1::OutputAlias& alias : signature.output_aliases()) {
    if (alias.output() == output) return alias.input();
  }
  return -1;
}

bool Overlaps(const TensorView& a, const TensorView& b) {
  const auto [a_begin, a_end] = a.ByteRange();
  const auto [b_begin, b_end] = b.ByteRange();
  return a_begin < b_end && b_begin < a_end;
}

// Inputs the guards refused and no specialization serves (not a daemon or
// cache error): callers can tell (the Python package's GuardError).
absl::Status MarkedAsGuardMiss(absl::Status status) {
  if (!status.ok()) status.SetPayload(kGuardMissPayload, absl::Cord());
  return status;
}

}  // namespace

bool IsGuardMiss(const absl::Status& status) {
  return status.GetPayload(kGuardMissPayload).has_value();
}

CompiledGraph::CompiledGraph(Client* client, kiln::v1::Graph graph,
                             kiln::v1::CompileOptions options, Runtime* runtime)
    : client_(client), graph_(std::move(graph)), options_(std::move(options)), runtime_(runtime) {
  client_->AddTrafficSource(&traffic_);
  RegisterForFork();
}

CompiledGraph::~CompiledGraph() {
  UnregisterForFork();
  std::thread background;
  {
    absl::MutexLock lock(&background_mutex_);
    stopping_ = true;
    background = std::move(background_);
  }
  if (background.joinable()) background.join();
  client_->RemoveTrafficSource(&traffic_);
}

CompiledGraph::EntryUse CompiledGraph::Use(const Entry* entry, bool copy_inputs) {
  entry->in_flight.fetch_add(1, std::memory_order_relaxed);
  if (!entry->used.load(std::memory_order_relaxed)) {
    entry->used.store(true, std::memory_order_relaxed);
  }
  return EntryUse(entry, copy_inputs);
}

std::optional<CompiledGraph::EntryUse> CompiledGraph::FindLoaded(
    absl::Span<const TensorView> inputs, Symbols& symbols) const {
  for (const auto& entry : entries_) {
    if (entry->guards.Check(inputs, symbols)) return Use(entry.get());
  }
  if (stride_miss_ == StrideMiss::kCopyToTracedLayout) {
    for (const auto& entry : entries_) {
      if (entry->guards.CheckCopyable(inputs, symbols))
        return Use(entry.get(), /*copy_inputs=*/true);
    }
  }
  return std::nullopt;
}

absl::StatusOr<CompiledGraph::CopiedInputs> CompiledGraph::CopyIntoLayouts(
    const Entry& entry, const Symbols& symbols, absl::Span<const TensorView> inputs) {
  CopiedInputs copied;
  copied.copies.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (entry.guards.StridesPass(i, inputs[i], symbols)) {
      copied.views.push_back(inputs[i]);
      continue;
    }
    ASSIGN_OR_RETURN(
        Tensor copy,
        Tensor::EmptyStrided(inputs[i].dtype,
                             std::vector<int64_t>(inputs[i].sizes.begin(), inputs[i].sizes.end()),
                             entry.guards.InputStrides(i, inputs[i], symbols)));
    CopyElements(inputs[i], copy.view());
    copied.copies.push_back(std::move(copy));
    copied.views.push_back(copied.copies.back().view());
  }
  return copied;
}

absl::StatusOr<const ir::Graph*> CompiledGraph::Entry::Canonical() const {
  absl::call_once(canonical_once, [this] { canonical = PrepareGraph(*graph); });
  if (!canonical.ok()) return canonical.status();
  return &*canonical;
}

absl::StatusOr<CompiledGraph::PrepareResult> CompiledGraph::Prepare() {
  const ForkGuard call;
  {
    absl::ReaderMutexLock lock(&mutex_);
    if (given_ != nullptr) {
      PrepareResult result;
      result.already_loaded = true;
      return result;
    }
  }
  return Load(graph_, {});
}

void CompiledGraph::set_specialization_limit(size_t limit) {
  absl::MutexLock lock(&mutex_);
  specialization_limit_ = limit;
}

void CompiledGraph::set_stride_miss(StrideMiss policy) {
  absl::MutexLock lock(&mutex_);
  stride_miss_ = policy;
}

void CompiledGraph::set_given_sizes_only(bool on) {
  absl::MutexLock lock(&mutex_);
  given_sizes_only_ = on;
}

void CompiledGraph::set_background_specialization(bool on) {
  absl::MutexLock lock(&mutex_);
  background_specialization_ = on;
}

void CompiledGraph::set_unload_after(absl::Duration idle) {
  absl::MutexLock lock(&background_mutex_);
  unload_after_ = idle;
  if (idle > absl::ZeroDuration()) StartBackgroundThread();
}

size_t CompiledGraph::SpecializationCount() const {
  return std::count_if(entries_.begin(), entries_.end(),
                       [](const auto& entry) { return !entry->warmed; });
}

int CompiledGraph::loaded_entries() const {
  absl::ReaderMutexLock lock(&mutex_);
  return static_cast<int>(entries_.size());
}

int CompiledGraph::UnloadIdle() {
  std::vector<std::unique_ptr<Entry>> freed;  // dlclosed outside the lock
  int unloaded = 0;
  {
    absl::MutexLock lock(&mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      Entry& entry = **it;
      if (entry.used.exchange(false, std::memory_order_relaxed)) {
        ++it;
        continue;
      }
      if (entry.guards.num_symbols() == 0) {
        std::vector<const Entry*>& filed = static_by_sizes_[entry.sizes_hash];
        filed.erase(std::find(filed.begin(), filed.end(), &entry));
        if (filed.empty()) static_by_sizes_.erase(entry.sizes_hash);
        if (entry.source != nullptr) unloaded_[entry.sizes_hash] = {entry.source, entry.warmed};
      }
      if (given_ == &entry) given_ = nullptr;
      retired_.push_back(std::move(*it));
      it = entries_.erase(it);
      ++unloaded;
    }
    // A call finds an entry and marks it in flight under this mutex: once
    // out of the tables, an entry at zero has no call left.
    for (auto it = retired_.begin(); it != retired_.end();) {
      if ((*it)->in_flight.load(std::memory_order_acquire) == 0) {
        freed.push_back(std::move(*it));
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
  }
  scratch_trim_epoch.fetch_add(1, std::memory_order_relaxed);
  if (!freed.empty()) {
    freed.clear();
    malloc_trim(0);  // what the unloaded entries held, back to the system
  }
  return unloaded;
}

// Around fork(): the background thread stopped (it may finish a compile
// first: a thread waiting on background_mutex_ would stay queued on it in
// the child) and both locks held; it starts again on both sides when it
// has work.
void CompiledGraph::BeforeFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  std::thread background;
  {
    absl::MutexLock lock(&background_mutex_);
    stopping_ = true;
    background = std::move(background_);
  }
  if (background.joinable()) background.join();
  mutex_.Lock();
  background_mutex_.Lock();
  stopping_ = false;
}

void CompiledGraph::AfterForkInParent() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (!background_queue_.empty() || unload_after_ > absl::ZeroDuration()) StartBackgroundThread();
  background_mutex_.Unlock();
  mutex_.Unlock();
}

void CompiledGraph::AfterForkInChild() ABSL_NO_THREAD_SAFETY_ANALYSIS { AfterForkInParent(); }

void CompiledGraph::StartBackgroundThread() {
  if (!background_.joinable() && !stopping_)
    background_ = std::thread([this] { BackgroundLoop(); });
}

void CompiledGraph::BackgroundLoop() {
  absl::MutexLock lock(&background_mutex_);
  absl::Time next_sweep = absl::InfiniteFuture();
  while (!stopping_) {
    if (!background_queue_.empty()) {
      const std::vector<std::vector<int64_t>> sizes = std::move(background_queue_.front());
      background_queue_.pop_front();
      background_mutex_.Unlock();
      // On failure the symbolic entry goes on serving these sizes.
      SpecializeExactly(sizes).IgnoreError();
      background_mutex_.Lock();
      continue;
    }
    if (unload_after_ > absl::ZeroDuration()) {
      if (next_sweep == absl::InfiniteFuture()) next_sweep = absl::Now() + unload_after_;
      if (absl::Now() >= next_sweep) {
        background_mutex_.Unlock();
        UnloadIdle();
        background_mutex_.Lock();
        next_sweep = absl::Now() + unload_after_;
        continue;
      }
    } else {
      next_sweep = absl::InfiniteFuture();
    }
    auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(background_mutex_) {
      return stopping_ || !background_queue_.empty();
    };
    background_mutex_.AwaitWithDeadline(absl::Condition(&wake), next_sweep);
  }
}

void CompiledGraph::SpecializeInBackground(absl::Span<const TensorView> inputs,
                                           uint64_t sizes_hash) {
  {
    absl::MutexLock lock(&mutex_);
    if (!background_tried_.insert(sizes_hash).second) return;
    if (SpecializationCount() >= specialization_limit_) return;
  }
  std::vector<std::vector<int64_t>> sizes;
  for (const TensorView& input : inputs) sizes.emplace_back(input.sizes.begin(), input.sizes.end());
  absl::MutexLock lock(&background_mutex_);
  background_queue_.push_back(std::move(sizes));
  StartBackgroundThread();
}

absl::Status CompiledGraph::SpecializeExactly(const std::vector<std::vector<int64_t>>& sizes) {
  kiln::v1::Graph exact;
  if (!SymbolValues(graph_, sizes).empty()) {
    // The graph as traced is symbolic: the same specialization a warmup
    // bucket of these sizes makes, so it may already be a hit.
    exact = Specialize(graph_, SymbolValues(graph_, sizes));
  } else {
    std::vector<std::vector<kiln::v1::Dim>> dims(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      for (int64_t size : sizes[i]) dims[i].emplace_back().set_constant(size);
    }
    ASSIGN_OR_RETURN(exact, Retype(graph_, dims));
  }
  return Load(exact, {.priority = kiln::v1::CompileRequest::PRIORITY_WARMUP}).status();
}

absl::StatusOr<CompiledGraph::WarmupResult> CompiledGraph::Warmup(const kiln::v1::WarmupPlan& plan,
                                                                  const std::string& plan_dir,
                                                                  const WarmupProgress& progress) {
  WarmupResult result;
  bool found = false;
  for (int i = 0; i < plan.graphs_size(); ++i) {
    const kiln::v1::WarmupGraph& entry = plan.graphs(i);
    const absl::StatusOr<kiln::v1::Graph> graph = ReadGraphFile(WarmupGraphPath(entry, plan_dir));
    if (!graph.ok()) {
      return absl::Status(graph.status().code(), absl::StrCat("graphs[", i, "] ", entry.graph(),
                                                              ": ", graph.status().message()));
    }
    if (GraphDigest(*graph) != traffic_.graph_digest()) continue;
    found = true;
    ASSIGN_OR_RETURN(const WarmupResult warmed, Warmup(entry, progress));
    result.buckets += warmed.buckets;
    result.runs += warmed.runs;
    result.entries += warmed.entries;
    result.local += warmed.local;
    for (const std::string& symbol : warmed.padded_symbols) {
      if (std::find(result.padded_symbols.begin(), result.padded_symbols.end(), symbol) ==
          result.padded_symbols.end()) {
        result.padded_symbols.push_back(symbol);
      }
    }
  }
  if (!found) {
    return absl::NotFoundError(absl::StrCat("no entry of the plan is for this graph (",
                                            graph_.name(), "): none of its graph files holds it"));
  }
  return result;
}

absl::StatusOr<CompiledGraph::WarmupResult> CompiledGraph::Warmup(
    const kiln::v1::WarmupGraph& buckets, const WarmupProgress& progress) {
  const ForkGuard call;
  ASSIGN_OR_RETURN(const std::vector<WarmupCompile> compiles,
                   ExpandWarmupGraph(graph_, buckets, graph_.name()));
  WarmupResult result;
  int done = 0;
  ASSIGN_OR_RETURN(std::vector<PaddableSymbol> paddable, PaddableSymbols(graph_, buckets));
  for (const PaddableSymbol& symbol : paddable) result.padded_symbols.push_back(symbol.name);
  for (const WarmupCompile& compile : compiles) {
    // The symbolic compile is this graph itself: Prepare loads it once.
    absl::StatusOr<PrepareResult> loaded =
        compile.symbolic ? Prepare()
                         : Load(compile.request.graph(),
                                {.warmed = true, .priority = compile.request.priority()});
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(),
                          absl::StrCat(compile.name, ": ", loaded.status().message()));
    }
    if (loaded->loaded) {
      ++result.entries;
      result.local += loaded->local;
    }
    for (const std::map<std::string, int64_t>& bucket : compile.buckets) {
      std::vector<Tensor> inputs;
      std::vector<TensorView> views;
      std::vector<std::vector<int64_t>> sizes = BucketInputSizes(graph_, bucket);
      for (int i = 0; i < graph_.inputs_size(); ++i) {
        ASSIGN_OR_RETURN(Tensor tensor,
                         Tensor::Empty(graph_.inputs(i).type().dtype(), std::move(sizes[i])));
        std::memset(tensor.view().data, 0, tensor.NumBytes());
        inputs.push_back(std::move(tensor));
        views.push_back(inputs.back().view());
      }
      // Until a run meets no shape whose GEMM or convolution way is still
      // being timed (client/runtime/fastest_of.h): the trials, and the
      // oneDNN primitives they make, happen here rather than on traffic.
      for (int run = 0; run < kMaxWarmupRuns; ++run) {
        const int64_t undecided = CallsBeforeAChoice();
        const absl::StatusOr<std::vector<Tensor>> ran = RunIntoTensors(views, /*record=*/false);
        if (!ran.ok()) {
          return absl::Status(
              ran.status().code(),
              absl::StrCat(compile.name, ": running bucket: ", ran.status().message()));
        }
        ++result.runs;
        if (CallsBeforeAChoice() == undecided) break;
      }
      ++result.buckets;
    }
    if (progress) {
      const ForkGuard::Released reporting;  // the callback may take the GIL
      progress(++done, static_cast<int>(compiles.size()), compile.name);
    }
  }
  absl::MutexLock lock(&mutex_);
  for (PaddableSymbol& symbol : paddable) {
    auto present = std::find_if(paddable_.begin(), paddable_.end(),
                                [&](const PaddableSymbol& p) { return p.name == symbol.name; });
    if (present == paddable_.end()) {
      paddable_.push_back(std::move(symbol));
    } else {
      std::vector<int64_t> merged;
      std::set_union(present->buckets.begin(), present->buckets.end(), symbol.buckets.begin(),
                     symbol.buckets.end(), std::back_inserter(merged));
      present->buckets = std::move(merged);
    }
  }
  has_paddable_.store(!paddable_.empty(), std::memory_order_release);
  return result;
}

absl::StatusOr<CompiledGraph::PrepareResult> CompiledGraph::Load(const kiln::v1::Graph& graph,
                                                                 LoadOptions options) {
  PrepareResult result;
  kiln::v1::CompileRequest request;
  // The request borrows the graph: a copy is hundreds of small blocks, which
  // in a fresh process are page faults.
  request.unsafe_arena_set_allocated_graph(const_cast<kiln::v1::Graph*>(&graph));
  const absl::Cleanup give_back = [&request] { request.unsafe_arena_release_graph(); };
  *request.mutable_options() = options_;
  request.set_priority(options.priority);
  request.set_source_graph(traffic_.graph_digest());
  const absl::Time start = absl::Now();
  // A same-host hit first (no round trip); anything doubtful goes to kilnd.
  std::optional<kiln::v1::CompileResponse> local = client_->FindLocal(request);
  absl::StatusOr<std::shared_ptr<const LoadedArtifact>> loaded = absl::NotFoundError("");
  absl::Time fetched = absl::Now();
  if (local.has_value()) loaded = client_->Load(*local, Client::Source::kLocalIndex);
  result.local = loaded.ok();
  kiln::v1::CompileResponse response;
  if (result.local) {
    response = *std::move(local);
  } else {
    ASSIGN_OR_RETURN(response, client_->Compile(request));
    fetched = absl::Now();
    loaded = client_->Load(response, Client::Source::kDaemon);
    if (loaded.status().code() == absl::StatusCode::kDataLoss) {
      // The object file was damaged on disk: kilnd rewrites it from its
      // verified blob, once.
      request.set_repair(true);
      ASSIGN_OR_RETURN(response, client_->Compile(request));
      loaded = client_->Load(response, Client::Source::kDaemon);
    }
  }
  ASSIGN_OR_RETURN(auto artifact, std::move(loaded));
  result.cache_hit = response.cache_hit();
  result.fetch_ms = absl::ToDoubleMilliseconds(fetched - start);
  result.load_ms = absl::ToDoubleMilliseconds(absl::Now() - fetched);

  ASSIGN_OR_RETURN(GuardTable guards, GuardTable::Create(response.artifact().signature(),
                                                         artifact->metadata.guards(), graph_));
  auto entry = std::make_unique<Entry>(std::move(artifact), std::move(guards));
  entry->warmed = options.warmed;
  if (&graph == &graph_) {
    entry->graph = &graph_;
  } else {
    entry->source = std::make_shared<const kiln::v1::Graph>(graph);
    entry->graph = entry->source.get();
  }
  const kiln::v1::ArtifactMetadata& metadata = entry->artifact->metadata;
  if (entry->guards.num_symbols() == 0) {
    entry->sizes_hash = HashOfSizes(metadata.signature());
  } else if (metadata.has_safe_symbol_value()) {
    entry->safe_symbol_value = metadata.safe_symbol_value();
  } else {  // stored by a kilnd that did not record it
    ASSIGN_OR_RETURN(const ir::Graph* canonical, entry->Canonical());
    entry->safe_symbol_value = limits::LargestSafeSymbolValue(*canonical);
  }
  absl::MutexLock lock(&mutex_);
  // Another thread may have loaded the same artifact meanwhile.
  const Entry* present = nullptr;
  for (const auto& existing : entries_) {
    if (existing->artifact->metadata.key() == entry->artifact->metadata.key()) {
      present = existing.get();
    }
  }
  if (present == nullptr) {
    auto position = entries_.end();
    if (entry->guards.num_symbols() == 0) {
      position = std::find_if(entries_.begin(), entries_.end(),
                              [](const auto& other) { return other->guards.num_symbols() > 0; });
      static_by_sizes_[entry->sizes_hash].push_back(entry.get());
      unloaded_.erase(entry->sizes_hash);
    }
    present = entries_.insert(position, std::move(entry))->get();
    result.loaded = true;
  }
  if (&graph == &graph_) given_ = present;
  return result;
}

absl::StatusOr<CompiledGraph::EntryUse> CompiledGraph::FindEntry(
    absl::Span<const TensorView> inputs, uint64_t sizes_hash, Symbols& symbols) {
  ASSIGN_OR_RETURN(EntryUse entry, FindGuardedEntry(inputs, sizes_hash, symbols));
  // Sizes from symbols are products the artifact computes in int64: hold
  // them to the limits before it does (and before outputs are allocated).
  const int num_symbols = entry->guards.num_symbols();
  const auto bound = symbols.begin() + num_symbols;
  if (num_symbols > 0 && *std::max_element(symbols.begin(), bound) > entry->safe_symbol_value) {
    ASSIGN_OR_RETURN(const ir::Graph* canonical, entry->Canonical());
    RETURN_IF_ERROR(
        limits::CheckRunTimeSizes(*canonical, std::vector<int64_t>(symbols.begin(), bound)));
  }
  return entry;
}

absl::StatusOr<CompiledGraph::EntryUse> CompiledGraph::FindGuardedEntry(
    absl::Span<const TensorView> inputs, uint64_t sizes_hash, Symbols& symbols) {
  absl::Status miss;
  std::shared_ptr<const kiln::v1::Graph> unloaded;
  bool warmed = false;
  {
    std::optional<EntryUse> symbolic;
    {
      absl::ReaderMutexLock lock(&mutex_);
      // Static entries by their sizes, before any symbolic one: a bucket's
      // own artifact runs even where a symbolic one would pass.
      if (const auto it = static_by_sizes_.find(sizes_hash); it != static_by_sizes_.end()) {
        for (const Entry* entry : it->second) {
          if (entry->guards.Check(inputs, symbols)) return Use(entry);
        }
      }
      // A static entry UnloadIdle removed comes back before any symbolic
      // one serves its sizes.
      if (const auto it = unloaded_.find(sizes_hash); it != unloaded_.end()) {
        std::tie(unloaded, warmed) = it->second;
      }
      for (const auto& entry : entries_) {
        if (unloaded != nullptr) break;
        if (entry->guards.num_symbols() > 0 && entry->guards.Check(inputs, symbols)) {
          symbolic.emplace(Use(entry.get()));
          break;
        }
      }
      if (symbolic.has_value() &&
          (!background_specialization_ || background_tried_.contains(sizes_hash))) {
        return std::move(*symbolic);
      }
      if (!symbolic.has_value() && unloaded == nullptr) {
        // Copying to traced layouts: an entry the inputs pass but for
        // strides (FindLoaded checks every entry strictly first).
        if (stride_miss_ == StrideMiss::kCopyToTracedLayout) {
          if (std::optional<EntryUse> copied = FindLoaded(inputs, symbols))
            return std::move(*copied);
        }
      }
      if (!symbolic.has_value()) {
        // The complaint of the graph as given, as the caller's error if
        // nothing fits.
        if (given_ == nullptr) {
          miss = absl::NotFoundError("not loaded");
        } else {
          given_->guards.Check(inputs, symbols, &miss);
        }
      }
    }
    if (symbolic.has_value()) {
      // The symbolic entry serves this call; the exact one compiles meanwhile.
      SpecializeInBackground(inputs, sizes_hash);
      return std::move(*symbolic);
    }
  }
  if (unloaded != nullptr) {
    // A static entry UnloadIdle removed: the same graph again.
    RETURN_IF_ERROR(Load(*unloaded, {.warmed = warmed}).status());
    return FindGuardedEntry(inputs, sizes_hash, symbols);
  }
  if (miss.code() == absl::StatusCode::kNotFound) {
    RETURN_IF_ERROR(Prepare().status());
    return FindGuardedEntry(inputs, sizes_hash, symbols);
  }
  bool given_sizes_only;
  {
    absl::ReaderMutexLock lock(&mutex_);
    given_sizes_only = given_sizes_only_;
  }
  if (given_sizes_only) {
    std::vector<std::vector<int64_t>> sizes;
    for (const TensorView& input : inputs)
      sizes.emplace_back(input.sizes.begin(), input.sizes.end());
    // Symbols at 0 or 1 that the relations allow get step 1's static
    // specialization below (a torch.export Dim takes them unless its min
    // says otherwise).
    const absl::Status taken = CheckGraphTakesSizes(graph_, sizes, /*smallest_symbol=*/0);
    // (Another rank is FailedPrecondition below too, from the plan.)
    if (taken.code() == absl::StatusCode::kFailedPrecondition) return MarkedAsGuardMiss(taken);
  }
  // A symbolic graph at size 0 or 1 gets its static specialization; other
  // sizes than any entry covers a new one, within the specialization limit.
  Specializations planned = PlanSpecializations(graph_, inputs);
  if (planned.small_size.has_value()) {
    RETURN_IF_ERROR(Load(*planned.small_size, {}).status());
  } else {
    {
      absl::ReaderMutexLock lock(&mutex_);
      RETURN_IF_ERROR(MarkedAsGuardMiss(
          CheckSpecializationLimit(SpecializationCount(), specialization_limit_, miss)));
    }
    const absl::Status respecialized = Respecialize(planned.respecialization, inputs);
    if (!respecialized.ok()) return MarkedAsGuardMiss(miss);
  }
  absl::ReaderMutexLock lock(&mutex_);
  if (std::optional<EntryUse> found = FindLoaded(inputs, symbols)) return std::move(*found);
  return MarkedAsGuardMiss(miss);
}

absl::Status CompiledGraph::Respecialize(const absl::StatusOr<Respecialization>& planned,
                                         absl::Span<const TensorView> inputs) {
  RETURN_IF_ERROR(planned.status());
  const Respecialization& plan = *planned;
  // Sizes seen to be unfixable are not tried again (each try is a key
  // computation and maybe an RPC).
  {
    absl::MutexLock lock(&mutex_);
    if (unfixable_.count(plan.sizes_key)) return absl::FailedPreconditionError("tried before");
  }
  // The new entry must accept these inputs (independent inputs that had
  // one size may now differ: the symbolic version then does not fit).
  auto fits = [&]() {
    Symbols symbols;
    absl::ReaderMutexLock lock(&mutex_);
    for (const auto& entry : entries_) {
      if (entry->guards.Check(inputs, symbols)) return true;
    }
    return false;
  };
  // A candidate whose input types refuse the call is never compiled: its
  // artifact could not run it.
  for (const absl::StatusOr<kiln::v1::Graph>& retyped : RetypedCandidates(graph_, plan)) {
    if (retyped.ok() && InputTypesTake(*retyped, inputs) && Load(*retyped, {}).ok() && fits()) {
      return absl::OkStatus();
    }
  }
  absl::MutexLock lock(&mutex_);
  unfixable_.insert(plan.sizes_key);
  return absl::FailedPreconditionError("no specialization fits these inputs");
}

absl::Status CompiledGraph::CheckOutputs(const Entry& entry, const Symbols& symbols,
                                         absl::Span<const TensorView> inputs,
                                         absl::Span<const TensorView> outputs) const {
  const kiln::v1::Signature& signature = entry.artifact->metadata.signature();
  if (static_cast<int>(outputs.size()) != signature.outputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "got ", outputs.size(), " output buffers; the graph returns ", signature.outputs_size()));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (AliasedInput(signature, k) >= 0) continue;  // the input is written; outputs[k] is not
    const TensorView& output = outputs[k];
    const std::vector<Size>& sizes = entry.guards.output_sizes(k);
    bool shape_ok = output.dtype == signature.outputs(k).dtype() &&
                    output.sizes.size() == sizes.size() &&
                    output.strides.size() == output.sizes.size();
    int64_t expected_stride = 1;
    for (int d = static_cast<int>(sizes.size()) - 1; shape_ok && d >= 0; --d) {
      const int64_t size = sizes[d].Evaluate(symbols);
      shape_ok = output.sizes[d] == size && (size == 1 || output.strides[d] == expected_stride);
      expected_stride *= size;
    }
    if (!shape_ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("output ", k, " must be a contiguous ",
                       kiln::v1::DType_Name(signature.outputs(k).dtype()),
                       " tensor of the graph's output shape"));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (Overlaps(output, inputs[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "output ", k, " overlaps ", entry.guards.input_name(i), "; use separate memory"));
      }
    }
    for (size_t j = 0; j < k; ++j) {
      if (AliasedInput(signature, j) < 0 && Overlaps(output, outputs[j])) {
        return absl::InvalidArgumentError(absl::StrCat("output ", k, " overlaps output ", j));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CompiledGraph::Invoke(const EntryUse& use, const Symbols& symbols,
                                   absl::Span<const TensorView> inputs,
                                   absl::Span<const TensorView> outputs) {
  // The kernel writes an aliased input through its one pointer: no other
  // input may see that memory.
  for (const kiln::v1::OutputAlias& alias : use->artifact->metadata.signature().output_aliases()) {
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (static_cast<int>(j) != alias.input() && Overlaps(inputs[alias.input()], inputs[j])) {
        return absl::InvalidArgumentError(
            absl::StrCat("input ", alias.input(), " is written in place (output ", alias.output(),
                         ") and overlaps input ", j, "; use separate memory"));
      }
    }
  }
  if (use.copy_inputs()) {
    ASSIGN_OR_RETURN(const CopiedInputs copied, CopyIntoLayouts(*use, symbols, inputs));
    RETURN_IF_ERROR(Call(*use, symbols, copied.views, outputs));
    // An aliased output was written in the input's copy: it goes back.
    for (const kiln::v1::OutputAlias& alias :
         use->artifact->metadata.signature().output_aliases()) {
      const TensorView& written = copied.views[alias.input()];
      if (written.data != inputs[alias.input()].data) CopyElements(written, inputs[alias.input()]);
    }
    return absl::OkStatus();
  }
  return Call(*use, symbols, inputs, outputs);
}

absl::Status CompiledGraph::Call(const Entry& entry, const Symbols& symbols,
                                 absl::Span<const TensorView> inputs,
                                 absl::Span<const TensorView> outputs) {
  void* input_pointers[kMaxStackTensors];
  void* output_pointers[kMaxStackTensors];
  std::vector<void*> heap_inputs, heap_outputs;
  void** in = input_pointers;
  void** out = output_pointers;
  if (inputs.size() > kMaxStackTensors) {
    heap_inputs.resize(inputs.size());
    in = heap_inputs.data();
  }
  if (outputs.size() > kMaxStackTensors) {
    heap_outputs.resize(outputs.size());
    out = heap_outputs.data();
  }
  for (size_t i = 0; i < inputs.size(); ++i) in[i] = inputs[i].data;
  for (size_t k = 0; k < outputs.size(); ++k) out[k] = outputs[k].data;
  const kiln_artifact_info* info = entry.artifact->info;
  const int64_t scratch = info->scratch_bytes >= 0 ? info->scratch_bytes
                                                   : entry.artifact->scratch_bytes(symbols.data());
  void* const arena = ThreadScratch(scratch);
  if (arena == nullptr && scratch > 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no memory for ", scratch, " bytes of scratch at these sizes"));
  }
  const int code = entry.artifact->run(runtime_->table(), symbols.data(), in, out, arena);
  if (code == KILN_RUN_INDEX_ERROR || code == KILN_RUN_LINALG_ERROR) return Runtime::TakeRunError();
  if (code != 0) {
    return absl::InternalError(
        absl::StrCat("kernel ", entry.artifact->metadata.key().substr(0, 12), " returned ", code));
  }
  return absl::OkStatus();
}

absl::Status CompiledGraph::Run(absl::Span<const TensorView> inputs,
                                absl::Span<const TensorView> outputs) {
  const ForkGuard call;
  const uint64_t hash = HashOfSizes(inputs);
  traffic_.Record(hash, inputs);
  if (std::optional<PaddedShape> padded = PaddedShapeFor(inputs, hash)) {
    if (outputs.size() != padded->num_outputs) {
      return absl::InvalidArgumentError(absl::StrCat(
          "got ", outputs.size(), " output buffers; the graph returns ", padded->num_outputs));
    }
    return RunPadded(
        inputs, *padded,
        [&](int k, DType dtype, absl::Span<const int64_t> sizes) -> absl::StatusOr<TensorView> {
          const TensorView& output = outputs[k];
          bool overlaps = false;
          for (const TensorView& input : inputs) overlaps |= Overlaps(output, input);
          for (int j = 0; j < k; ++j) overlaps |= Overlaps(output, outputs[j]);
          if (output.dtype != dtype || !IsContiguous(output) || overlaps ||
              !std::equal(sizes.begin(), sizes.end(), output.sizes.begin(), output.sizes.end())) {
            return absl::InvalidArgumentError(absl::StrCat(
                "output ", k, " must be a contiguous ", kiln::v1::DType_Name(dtype),
                " tensor of the graph's output shape, apart from the inputs and the other "
                "outputs"));
          }
          return output;
        });
  }
  Symbols symbols;
  ASSIGN_OR_RETURN(const EntryUse entry, FindEntry(inputs, hash, symbols));
  RETURN_IF_ERROR(CheckOutputs(*entry, symbols, inputs, outputs));
  return Invoke(entry, symbols, inputs, outputs);
}

absl::StatusOr<std::vector<Tensor>> CompiledGraph::Run(absl::Span<const TensorView> inputs) {
  const ForkGuard call;
  return RunIntoTensors(inputs, /*record=*/true);
}

absl::Status CompiledGraph::Run(absl::Span<const TensorView> inputs, OutputAllocator allocate) {
  const ForkGuard call;
  return RunAllocating(inputs, allocate, /*record=*/true);
}

absl::StatusOr<std::vector<Tensor>> CompiledGraph::RunIntoTensors(
    absl::Span<const TensorView> inputs, bool record) {
  std::vector<Tensor> outputs(graph_.outputs_size());  // an aliased output stays empty
  RETURN_IF_ERROR(RunAllocating(
      inputs,
      [&](int k, DType dtype, absl::Span<const int64_t> sizes) -> absl::StatusOr<TensorView> {
        ASSIGN_OR_RETURN(outputs[k],
                         Tensor::Empty(dtype, std::vector<int64_t>(sizes.begin(), sizes.end())));
        return outputs[k].view();
      },
      record));
  return outputs;
}

absl::Status CompiledGraph::RunAllocating(absl::Span<const TensorView> inputs,
                                          OutputAllocator allocate, bool record) {
  const uint64_t hash = HashOfSizes(inputs);
  if (record) traffic_.Record(hash, inputs);
  if (std::optional<PaddedShape> padded = PaddedShapeFor(inputs, hash)) {
    return RunPadded(inputs, *padded, allocate);
  }
  Symbols symbols;
  ASSIGN_OR_RETURN(const EntryUse entry, FindEntry(inputs, hash, symbols));
  const kiln::v1::Signature& signature = entry->artifact->metadata.signature();
  TensorView stack_views[kMaxStackTensors];
  std::vector<TensorView> heap_views;
  absl::Span<TensorView> views(stack_views, signature.outputs_size());
  if (signature.outputs_size() > kMaxStackTensors) {
    heap_views.resize(signature.outputs_size());
    views = absl::MakeSpan(heap_views);
  }
  // Each output's sizes, until `allocate` has taken them.
  int64_t stack_sizes[8];
  std::vector<int64_t> heap_sizes;
  for (int k = 0; k < signature.outputs_size(); ++k) {
    if (const int input = AliasedInput(signature, k); input >= 0) {
      views[k] = inputs[input];  // the kernel writes the input: nothing to allocate
      continue;
    }
    const std::vector<Size>& dims = entry->guards.output_sizes(k);
    int64_t* sizes = stack_sizes;
    if (dims.size() > std::size(stack_sizes)) {
      heap_sizes.resize(dims.size());
      sizes = heap_sizes.data();
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      sizes[d] = dims[d].Evaluate(symbols);
      if (sizes[d] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("output ", k, " would have more than 2^63 elements for these inputs"));
      }
    }
    ASSIGN_OR_RETURN(views[k], allocate(k, signature.outputs(k).dtype(),
                                        absl::MakeConstSpan(sizes, dims.size())));
  }
  return Invoke(entry, symbols, inputs, views);
}

std::optional<PaddedShape> CompiledGraph::PaddedShapeFor(absl::Span<const TensorView> inputs,
                                                         uint64_t sizes_hash) {
  // Padding copies the inputs: an aliased output would be written in the copy.
  if (!has_paddable_.load(std::memory_order_acquire) || graph_.output_aliases_size() > 0) {
    return std::nullopt;
  }
  absl::ReaderMutexLock lock(&mutex_);
  if (static_by_sizes_.contains(sizes_hash)) return std::nullopt;
  std::optional<PaddedShape> shape = PadShape(paddable_, inputs);
  if (!shape.has_value()) return std::nullopt;
  // Only onto a bucket that is loaded (or was, and loads again).
  const uint64_t padded = HashOfSizes(shape->input_sizes);
  const auto bucket = static_by_sizes_.find(padded);
  if (bucket != static_by_sizes_.end()) {
    shape->num_outputs = bucket->second.front()->artifact->metadata.signature().outputs_size();
  } else if (const auto unloaded = unloaded_.find(padded); unloaded != unloaded_.end()) {
    shape->num_outputs = unloaded->second.first->outputs_size();
  } else {
    return std::nullopt;
  }
  return shape;
}

absl::Status CompiledGraph::RunPadded(absl::Span<const TensorView> inputs, const PaddedShape& shape,
                                      OutputAllocator allocate) {
  std::vector<Tensor> padded_inputs;
  std::vector<TensorView> padded_views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSIGN_OR_RETURN(Tensor padded, Tensor::Empty(inputs[i].dtype, shape.input_sizes[i]));
    if (padded.sizes() != std::vector<int64_t>(inputs[i].sizes.begin(), inputs[i].sizes.end())) {
      std::memset(padded.view().data, 0, padded.NumBytes());
    }
    CopyLeadingRegion(inputs[i], padded.view());
    padded_inputs.push_back(std::move(padded));
    padded_views.push_back(padded_inputs.back().view());
  }
  ASSIGN_OR_RETURN(const std::vector<Tensor> padded_outputs,
                   RunIntoTensors(padded_views, /*record=*/false));
  for (size_t k = 0; k < padded_outputs.size(); ++k) {
    const std::vector<int64_t> sizes =
        UnpaddedOutputSizes(shape, static_cast<int>(k), padded_outputs[k].sizes());
    ASSIGN_OR_RETURN(const TensorView output,
                     allocate(static_cast<int>(k), padded_outputs[k].dtype(), sizes));
    CopyLeadingRegion(padded_outputs[k].view(), output);
  }
  return absl::OkStatus();
}

absl::StatusOr<CompiledGraph::DirectCall> CompiledGraph::DirectCallForBenchmark(
    absl::Span<const TensorView> inputs) {
  Symbols symbols;
  ASSIGN_OR_RETURN(const EntryUse entry, FindEntry(inputs, HashOfSizes(inputs), symbols));
  if (entry->guards.num_symbols() > 0) {
    return absl::UnimplementedError("direct calls are for static graphs");
  }
  if (entry.copy_inputs()) {
    return absl::UnimplementedError("direct calls are for inputs in the artifact's layout");
  }
  void* const arena = ThreadScratch(entry->artifact->info->scratch_bytes);
  if (arena == nullptr && entry->artifact->info->scratch_bytes > 0) {
    return absl::ResourceExhaustedError("no memory for the scratch arena");
  }
  return DirectCall{entry->artifact->run, runtime_->table(), arena};
}

absl::StatusOr<kiln::v1::ArtifactMetadata> CompiledGraph::ArtifactFor(
    absl::Span<const TensorView> inputs) {
  Symbols symbols;
  ASSIGN_OR_RETURN(const EntryUse entry, FindEntry(inputs, HashOfSizes(inputs), symbols));
  return entry->artifact->metadata;
}

absl::StatusOr<kiln::v1::ArtifactMetadata> CompiledGraph::artifact() const {
  absl::ReaderMutexLock lock(&mutex_);
  if (given_ == nullptr) return absl::FailedPreconditionError("not compiled yet: call Prepare");
  return given_->artifact->metadata;
}

}  // namespace kiln
