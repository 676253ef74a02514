// CompiledGraph's specializations: the entry for sizes no entry takes,
// planned by client/specialization.h, compiled now or in the background.
#include "absl/strings/str_cat.h"
#include "client/compiled_graph.h"
#include "common/status_macros.h"

namespace kiln {

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
  constexpr auto kWarmup = kiln::v1::CompileRequest::PRIORITY_WARMUP;
  if (!SymbolValues(graph_, sizes).empty()) {
    // The graph as traced is symbolic: the same specialization a warmup
    // bucket of these sizes makes, so it may already be a hit.
    return Fetch(Specialize(graph_, SymbolValues(graph_, sizes)), {.priority = kWarmup}).status();
  }
  // Static: re-typed by kilnd for the exact sizes (contiguous where they
  // change; as declared where they stay).
  InputLayouts layouts(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    const kiln::v1::TensorType& declared = graph_.inputs(static_cast<int>(i)).type();
    for (int64_t size : sizes[i]) layouts[i].add_sizes()->set_constant(size);
    if (SameDims(declared.sizes(), {layouts[i].sizes().begin(), layouts[i].sizes().end()})) {
      *layouts[i].mutable_strides() = declared.strides();
    }
  }
  return Fetch(graph_, {.priority = kWarmup, .layouts = &layouts}).status();
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
  // artifact could not run it. kilnd re-types the graph for each, and
  // refuses those it cannot.
  for (const InputLayouts& layouts : plan.candidates) {
    if (InputTypesTake(graph_, layouts, inputs) && Fetch(graph_, {.layouts = &layouts}).ok() &&
        fits()) {
      return absl::OkStatus();
    }
  }
  absl::MutexLock lock(&mutex_);
  unfixable_.insert(plan.sizes_key);
  return absl::FailedPreconditionError("no specialization fits these inputs");
}

}  // namespace kiln
