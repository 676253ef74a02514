// CompiledGraph's entry table: the entry whose guards a call's inputs pass,
// fetched and opened on first need, or specialized when none takes them.
#include <algorithm>
#include <optional>

#include "abi/run_time_sizes.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "client/compiled_graph.h"
#include "client/sizes_hash.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// Inputs the guards refused and no specialization serves (not a daemon or
// cache error): callers can tell (the Python package's GuardError).
absl::Status MarkedAsGuardMiss(absl::Status status) {
  if (!status.ok()) status.SetPayload(kGuardMissPayload, absl::Cord());
  return status;
}

}  // namespace

CompiledGraph::EntryUse CompiledGraph::Use(const Entry* entry, bool copy_inputs) {
  entry->in_flight.fetch_add(1, std::memory_order_relaxed);
  if (!entry->used.load(std::memory_order_relaxed)) {
    entry->used.store(true, std::memory_order_relaxed);
  }
  return EntryUse(entry, copy_inputs);
}

std::optional<CompiledGraph::EntryUse> CompiledGraph::FindOpen(absl::Span<const TensorView> inputs,
                                                               Symbols& symbols) const {
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

size_t CompiledGraph::SpecializationCount() const {
  return std::count_if(entries_.begin(), entries_.end(),
                       [](const auto& entry) { return !entry->warmed; });
}

int CompiledGraph::open_entries() const {
  absl::ReaderMutexLock lock(&mutex_);
  return static_cast<int>(entries_.size());
}

absl::StatusOr<CompiledGraph::PrepareResult> CompiledGraph::Fetch(const kiln::v1::Graph& graph,
                                                                  FetchOptions options) {
  PrepareResult result;
  kiln::v1::CompileRequest request;
  // The request borrows the graph: a copy is hundreds of small blocks, which
  // in a fresh process are page faults.
  request.unsafe_arena_set_allocated_graph(const_cast<kiln::v1::Graph*>(&graph));
  const absl::Cleanup give_back = [&request] { request.unsafe_arena_release_graph(); };
  *request.mutable_options() = options_;
  request.set_priority(options.priority);
  request.set_source_graph(traffic_.graph_digest());
  if (options.layouts != nullptr) {
    request.mutable_input_layouts()->Add(options.layouts->begin(), options.layouts->end());
  }
  const absl::Time start = absl::Now();
  // A same-host hit first (no round trip); anything doubtful goes to kilnd.
  std::optional<kiln::v1::CompileResponse> local = client_->FindLocal(request);
  absl::StatusOr<std::shared_ptr<const ArtifactObject>> opened = absl::NotFoundError("");
  absl::Time fetched = absl::Now();
  if (local.has_value()) opened = client_->OpenArtifact(*local, Client::Source::kLocalIndex);
  result.local = opened.ok();
  kiln::v1::CompileResponse response;
  if (result.local) {
    response = *std::move(local);
  } else {
    ASSIGN_OR_RETURN(response, client_->Compile(request));
    fetched = absl::Now();
    opened = client_->OpenArtifact(response, Client::Source::kDaemon);
    if (opened.status().code() == absl::StatusCode::kDataLoss) {
      // The object file was damaged on disk: kilnd rewrites it from its
      // verified blob, once.
      request.set_repair(true);
      ASSIGN_OR_RETURN(response, client_->Compile(request));
      opened = client_->OpenArtifact(response, Client::Source::kDaemon);
    }
  }
  ASSIGN_OR_RETURN(auto artifact, std::move(opened));
  result.cache_hit = response.cache_hit();
  result.fetch_ms = absl::ToDoubleMilliseconds(fetched - start);
  result.open_ms = absl::ToDoubleMilliseconds(absl::Now() - fetched);

  ASSIGN_OR_RETURN(GuardTable guards, GuardTable::Create(response.artifact().signature(),
                                                         artifact->metadata.guards(), graph_));
  auto entry = std::make_unique<Entry>(std::move(artifact), std::move(guards));
  entry->warmed = options.warmed;
  const bool given = &graph == &graph_ && options.layouts == nullptr;
  if (!given) {
    entry->source = std::make_shared<const SpecializedGraph>(
        SpecializedGraph{graph, options.layouts != nullptr ? *options.layouts : InputLayouts{}});
  }
  const kiln::v1::ArtifactMetadata& metadata = entry->artifact->metadata;
  if (entry->guards.num_symbols() == 0) {
    entry->sizes_hash = HashOfSizes(metadata.signature());
  } else {
    entry->safe_symbol_value = metadata.safe_symbol_value();
  }
  absl::MutexLock lock(&mutex_);
  // Another thread may have opened the same artifact meanwhile.
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
      closed_.erase(entry->sizes_hash);
    }
    present = entries_.insert(position, std::move(entry))->get();
    result.opened = true;
  }
  if (given) given_ = present;
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
    RETURN_IF_ERROR(CheckSymbolValues(entry->artifact->metadata.run_time_sizes(),
                                      std::vector<int64_t>(symbols.begin(), bound)));
  }
  return entry;
}

absl::StatusOr<CompiledGraph::EntryUse> CompiledGraph::FindGuardedEntry(
    absl::Span<const TensorView> inputs, uint64_t sizes_hash, Symbols& symbols) {
  absl::Status miss;
  std::shared_ptr<const SpecializedGraph> closed;
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
      // A static entry CloseIdle removed comes back before any symbolic
      // one serves its sizes.
      if (const auto it = closed_.find(sizes_hash); it != closed_.end()) {
        std::tie(closed, warmed) = it->second;
      }
      for (const auto& entry : entries_) {
        if (closed != nullptr) break;
        if (entry->guards.num_symbols() > 0 && entry->guards.Check(inputs, symbols)) {
          symbolic.emplace(Use(entry.get()));
          break;
        }
      }
      if (symbolic.has_value() &&
          (!background_specialization_ || background_tried_.contains(sizes_hash))) {
        return std::move(*symbolic);
      }
      if (!symbolic.has_value() && closed == nullptr) {
        // Copying to traced layouts: an entry the inputs pass but for
        // strides (FindOpen checks every entry strictly first).
        if (stride_miss_ == StrideMiss::kCopyToTracedLayout) {
          if (std::optional<EntryUse> copied = FindOpen(inputs, symbols)) return std::move(*copied);
        }
      }
      if (!symbolic.has_value()) {
        // The complaint of the graph as given, as the caller's error if
        // nothing fits.
        if (given_ == nullptr) {
          miss = absl::NotFoundError("not opened");
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
  if (closed != nullptr) {
    // A static entry CloseIdle removed: the same graph again.
    RETURN_IF_ERROR(
        Fetch(closed->graph,
              {.warmed = warmed, .layouts = closed->layouts.empty() ? nullptr : &closed->layouts})
            .status());
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
    const SpecializedGraph& small = *planned.small_size;
    // Laid out as the inputs are if kilnd can re-type it so, else as declared.
    if (small.layouts.empty() || !Fetch(small.graph, {.layouts = &small.layouts}).ok()) {
      RETURN_IF_ERROR(Fetch(small.graph, {}).status());
    }
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
  if (std::optional<EntryUse> found = FindOpen(inputs, symbols)) return std::move(*found);
  return MarkedAsGuardMiss(miss);
}

}  // namespace kiln
