#include "client/compiled_graph.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "client/warmup_plan.h"
#include "codegen/limits.h"
#include "codegen/prepare.h"
#include "codegen/retype.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

constexpr int kMaxStackTensors = 16;

// This thread's scratch arena, grown as needed and reused across calls so a
// steady-state Run allocates nothing; nullptr when the memory is not there.
void* ThreadScratch(int64_t bytes) {
  thread_local GrowingBuffer arena;
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

// The same for a static artifact's inputs.
uint64_t HashOfSizes(const kiln::v1::Signature& signature) {
  SizesHash hash;
  for (const kiln::v1::TensorType& input : signature.inputs()) {
    hash.Add(input.sizes_size());
    for (const kiln::v1::Dim& dim : input.sizes()) hash.Add(dim.constant());
  }
  return hash.value();
}

bool Overlaps(const TensorView& a, const TensorView& b) {
  const auto [a_begin, a_end] = a.ByteRange();
  const auto [b_begin, b_end] = b.ByteRange();
  return a_begin < b_end && b_begin < a_end;
}

}  // namespace

CompiledGraph::CompiledGraph(Client* client, kiln::v1::Graph graph,
                             kiln::v1::CompileOptions options, Runtime* runtime)
    : client_(client), graph_(std::move(graph)), options_(std::move(options)), runtime_(runtime) {}

absl::StatusOr<CompiledGraph::PrepareResult> CompiledGraph::Prepare() {
  {
    absl::ReaderMutexLock lock(&mutex_);
    if (given_ != nullptr) {
      PrepareResult result;
      result.already_loaded = true;
      return result;
    }
  }
  return Load(graph_);
}

void CompiledGraph::set_specialization_limit(size_t limit) {
  absl::MutexLock lock(&mutex_);
  specialization_limit_ = limit;
}

absl::StatusOr<CompiledGraph::WarmupResult> CompiledGraph::Warmup(
    const kiln::v1::WarmupGraph& buckets) {
  ASSIGN_OR_RETURN(const std::vector<WarmupCompile> compiles,
                   ExpandWarmupGraph(graph_, buckets, graph_.name()));
  WarmupResult result;
  for (const WarmupCompile& compile : compiles) {
    // The symbolic compile is this graph itself: Prepare loads it once.
    absl::StatusOr<PrepareResult> loaded =
        compile.symbolic ? Prepare() : Load(compile.request.graph());
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(),
                          absl::StrCat(compile.name, ": ", loaded.status().message()));
    }
    if (loaded->loaded) {
      ++result.entries;
      result.local += loaded->local;
      absl::MutexLock lock(&mutex_);
      ++warmed_entries_;
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
      const absl::StatusOr<std::vector<Tensor>> ran = Run(views);
      if (!ran.ok()) {
        return absl::Status(
            ran.status().code(),
            absl::StrCat(compile.name, ": running bucket: ", ran.status().message()));
      }
      ++result.buckets;
    }
  }
  return result;
}

absl::StatusOr<CompiledGraph::PrepareResult> CompiledGraph::Load(const kiln::v1::Graph& graph) {
  PrepareResult result;
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = graph;
  *request.mutable_options() = options_;
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
  auto entry = std::make_unique<Entry>(Entry{std::move(artifact), std::move(guards)});
  if (entry->guards.num_symbols() > 0) {
    ASSIGN_OR_RETURN(ir::Graph canonical, PrepareGraph(graph));
    entry->safe_symbol_value = limits::LargestSafeSymbolValue(canonical);
    entry->canonical = std::make_shared<const ir::Graph>(std::move(canonical));
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
    }
    present = entries_.insert(position, std::move(entry))->get();
    if (present->guards.num_symbols() == 0) {
      static_by_sizes_[HashOfSizes(present->artifact->metadata.signature())].push_back(present);
    }
    result.loaded = true;
  }
  if (&graph == &graph_) given_ = present;
  return result;
}

absl::StatusOr<const CompiledGraph::Entry*> CompiledGraph::FindEntry(
    absl::Span<const TensorView> inputs, Symbols& symbols) {
  ASSIGN_OR_RETURN(const Entry* entry, FindGuardedEntry(inputs, symbols));
  // Sizes from symbols are products the artifact computes in int64: hold
  // them to the limits before it does (and before outputs are allocated).
  const int num_symbols = entry->guards.num_symbols();
  const auto bound = symbols.begin() + num_symbols;
  if (num_symbols > 0 && *std::max_element(symbols.begin(), bound) > entry->safe_symbol_value) {
    RETURN_IF_ERROR(
        limits::CheckRunTimeSizes(*entry->canonical, std::vector<int64_t>(symbols.begin(), bound)));
  }
  return entry;
}

absl::StatusOr<const CompiledGraph::Entry*> CompiledGraph::FindGuardedEntry(
    absl::Span<const TensorView> inputs, Symbols& symbols) {
  absl::Status miss;
  {
    absl::ReaderMutexLock lock(&mutex_);
    // Static entries by their sizes, before any symbolic one: a bucket's
    // own artifact runs even where a symbolic one would pass.
    if (const auto it = static_by_sizes_.find(HashOfSizes(inputs)); it != static_by_sizes_.end()) {
      for (const Entry* entry : it->second) {
        if (entry->guards.Check(inputs, symbols)) return entry;
      }
    }
    for (const auto& entry : entries_) {
      if (entry->guards.num_symbols() > 0 && entry->guards.Check(inputs, symbols)) {
        return entry.get();
      }
    }
    // The complaint of the graph as given (the first entry), as the
    // caller's error if nothing fits.
    if (given_ == nullptr) {
      miss = absl::NotFoundError("not loaded");
    } else {
      given_->guards.Check(inputs, symbols, &miss);
    }
  }
  if (miss.code() == absl::StatusCode::kNotFound) {
    RETURN_IF_ERROR(Prepare().status());
    return FindGuardedEntry(inputs, symbols);
  }
  // A symbolic graph at size 0 or 1 gets its static specialization; other
  // sizes than any entry covers a new one, within the specialization limit.
  if (std::optional<kiln::v1::Graph> small = SmallSizeSpecialization(graph_, inputs)) {
    RETURN_IF_ERROR(Load(*small).status());
  } else {
    {
      absl::ReaderMutexLock lock(&mutex_);
      RETURN_IF_ERROR(
          CheckSpecializationLimit(entries_.size() - warmed_entries_, specialization_limit_, miss));
    }
    const absl::Status respecialized = Respecialize(inputs);
    if (!respecialized.ok()) return miss;
  }
  absl::ReaderMutexLock lock(&mutex_);
  for (const auto& entry : entries_) {
    if (entry->guards.Check(inputs, symbols)) return entry.get();
  }
  return miss;
}

absl::Status CompiledGraph::Respecialize(absl::Span<const TensorView> inputs) {
  ASSIGN_OR_RETURN(const Respecialization plan, PlanRespecialization(graph_, inputs));
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
  for (const InputDims& sizes : plan.candidates) {
    auto retyped = Retype(graph_, sizes);
    if (retyped.ok() && Load(*retyped).ok() && fits()) return absl::OkStatus();
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
      if (Overlaps(output, outputs[j])) {
        return absl::InvalidArgumentError(absl::StrCat("output ", k, " overlaps output ", j));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CompiledGraph::Invoke(const Entry& entry, const Symbols& symbols,
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
  if (code != 0) {
    return absl::InternalError(
        absl::StrCat("kernel ", entry.artifact->metadata.key().substr(0, 12), " returned ", code));
  }
  return absl::OkStatus();
}

absl::Status CompiledGraph::Run(absl::Span<const TensorView> inputs,
                                absl::Span<const TensorView> outputs) {
  Symbols symbols;
  ASSIGN_OR_RETURN(const Entry* entry, FindEntry(inputs, symbols));
  RETURN_IF_ERROR(CheckOutputs(*entry, symbols, inputs, outputs));
  return Invoke(*entry, symbols, inputs, outputs);
}

absl::StatusOr<std::vector<Tensor>> CompiledGraph::Run(absl::Span<const TensorView> inputs) {
  Symbols symbols;
  ASSIGN_OR_RETURN(const Entry* entry, FindEntry(inputs, symbols));
  const kiln::v1::Signature& signature = entry->artifact->metadata.signature();
  std::vector<Tensor> outputs;
  std::vector<TensorView> views;
  for (int k = 0; k < signature.outputs_size(); ++k) {
    std::vector<int64_t> sizes;
    for (const Size& size : entry->guards.output_sizes(k)) {
      sizes.push_back(size.Evaluate(symbols));
      if (sizes.back() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("output ", k, " would have more than 2^63 elements for these inputs"));
      }
    }
    ASSIGN_OR_RETURN(Tensor output, Tensor::Empty(signature.outputs(k).dtype(), std::move(sizes)));
    outputs.push_back(std::move(output));
  }
  for (const Tensor& output : outputs) views.push_back(output.view());
  RETURN_IF_ERROR(Invoke(*entry, symbols, inputs, views));
  return outputs;
}

absl::StatusOr<CompiledGraph::DirectCall> CompiledGraph::DirectCallForBenchmark(
    absl::Span<const TensorView> inputs) {
  Symbols symbols;
  ASSIGN_OR_RETURN(const Entry* entry, FindEntry(inputs, symbols));
  if (entry->guards.num_symbols() > 0) {
    return absl::UnimplementedError("direct calls are for static graphs");
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
  ASSIGN_OR_RETURN(const Entry* entry, FindEntry(inputs, symbols));
  return entry->artifact->metadata;
}

absl::StatusOr<kiln::v1::ArtifactMetadata> CompiledGraph::artifact() const {
  absl::ReaderMutexLock lock(&mutex_);
  if (given_ == nullptr) return absl::FailedPreconditionError("not compiled yet: call Prepare");
  return given_->artifact->metadata;
}

}  // namespace kiln
