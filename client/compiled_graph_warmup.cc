// CompiledGraph's warmup: buckets fetched, opened and run before traffic,
// and the calls between buckets run padded onto the next larger one.
#include <algorithm>
#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "client/compiled_graph.h"
#include "client/runtime/fastest_of.h"
#include "client/sizes_hash.h"
#include "client/warmup_plan.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"

namespace kiln {
namespace {

// The most runs of one warmup bucket: its first, every trial of a shape
// with the most ways, and the run that finds them all decided.
constexpr int kMaxWarmupRuns = 2 + FastestOf<int>::kMaxWays * FastestOf<int>::kTrials;

}  // namespace

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
  std::vector<PaddableSymbol> paddable;
  if (std::any_of(buckets.symbols().begin(), buckets.symbols().end(),
                  [](const kiln::v1::SymbolSizes& sizes) { return sizes.paddable(); })) {
    // kilnd proves which symbols can be padded (before anything is opened).
    kiln::v1::PaddingRequest request;
    *request.mutable_graph() = graph_;
    *request.mutable_entry() = buckets;
    ASSIGN_OR_RETURN(const kiln::v1::PaddingResponse proof, client_->ProvePadding(request));
    ASSIGN_OR_RETURN(paddable, PaddableSymbols(proof, buckets));
  }
  for (const PaddableSymbol& symbol : paddable) result.padded_symbols.push_back(symbol.name);
  for (const WarmupCompile& compile : compiles) {
    // The symbolic compile is this graph itself: Prepare opens it once.
    absl::StatusOr<PrepareResult> fetched =
        compile.symbolic ? Prepare()
                         : Fetch(compile.request.graph(),
                                 {.warmed = true, .priority = compile.request.priority()});
    if (!fetched.ok()) {
      return absl::Status(fetched.status().code(),
                          absl::StrCat(compile.name, ": ", fetched.status().message()));
    }
    if (fetched->opened) {
      ++result.entries;
      result.local += fetched->local;
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
  // Only onto a bucket that is opened (or was, and opens again).
  const uint64_t padded = HashOfSizes(shape->input_sizes);
  const auto bucket = static_by_sizes_.find(padded);
  if (bucket != static_by_sizes_.end()) {
    shape->num_outputs = bucket->second.front()->artifact->metadata.signature().outputs_size();
  } else if (const auto closed = closed_.find(padded); closed != closed_.end()) {
    shape->num_outputs = closed->second.first->graph.outputs_size();
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

}  // namespace kiln
