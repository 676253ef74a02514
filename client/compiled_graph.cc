#include "client/compiled_graph.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

constexpr int kMaxStackTensors = 16;

// This thread's scratch arena, grown as needed and reused across calls so a
// steady-state Run allocates nothing.
void* ThreadScratch(int64_t bytes) {
  struct Arena {
    void* data = nullptr;
    int64_t capacity = 0;
    ~Arena() { free(data); }
  };
  thread_local Arena arena;
  if (bytes > arena.capacity) {
    free(arena.data);
    arena.capacity = (bytes + 63) / 64 * 64;
    arena.data = aligned_alloc(64, arena.capacity);
  }
  return arena.data;
}

std::string InputName(const kiln::v1::Graph& graph, size_t i) {
  if (i < static_cast<size_t>(graph.inputs_size()) && !graph.inputs(i).name().empty()) {
    return absl::StrCat("input ", i, " '", graph.inputs(i).name(), "'");
  }
  return absl::StrCat("input ", i);
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
  PrepareResult result;
  {
    absl::ReaderMutexLock lock(&mutex_);
    if (!entries_.empty()) {
      result.already_loaded = true;
      return result;
    }
  }
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = graph_;
  *request.mutable_options() = options_;
  const absl::Time start = absl::Now();
  // A same-host hit first (no round trip); anything doubtful goes to kilnd.
  std::optional<kiln::v1::CompileResponse> local = client_->FindLocal(request);
  absl::StatusOr<std::shared_ptr<const LoadedArtifact>> loaded = absl::NotFoundError("");
  absl::Time fetched = absl::Now();
  if (local.has_value()) loaded = LoadArtifact(local->object_path(), local->artifact());
  result.local = loaded.ok();
  kiln::v1::CompileResponse response;
  if (result.local) {
    response = *std::move(local);
  } else {
    ASSIGN_OR_RETURN(response, client_->Compile(request));
    fetched = absl::Now();
    loaded = LoadArtifact(response.object_path(), response.artifact());
    if (loaded.status().code() == absl::StatusCode::kDataLoss) {
      // The object file was damaged on disk: kilnd rewrites it from its
      // verified blob, once.
      request.set_repair(true);
      ASSIGN_OR_RETURN(response, client_->Compile(request));
      loaded = LoadArtifact(response.object_path(), response.artifact());
    }
  }
  ASSIGN_OR_RETURN(auto artifact, std::move(loaded));
  result.cache_hit = response.cache_hit();
  result.fetch_ms = absl::ToDoubleMilliseconds(fetched - start);
  result.load_ms = absl::ToDoubleMilliseconds(absl::Now() - fetched);
  auto entry = std::make_unique<Entry>();
  entry->artifact = std::move(artifact);
  for (const kiln::v1::TensorType& type : response.artifact().signature().inputs()) {
    entry->dtypes.push_back(type.dtype());
    std::vector<int64_t> sizes, strides;
    for (const auto& dim : type.sizes()) sizes.push_back(dim.constant());
    for (const auto& dim : type.strides()) strides.push_back(dim.constant());
    entry->sizes.push_back(std::move(sizes));
    entry->strides.push_back(std::move(strides));
  }
  absl::MutexLock lock(&mutex_);
  if (entries_.empty()) entries_.push_back(std::move(entry));  // another thread may have won
  return result;
}

absl::Status CompiledGraph::CheckGuards(const Entry& entry,
                                        absl::Span<const TensorView> inputs) const {
  if (inputs.size() != entry.dtypes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", inputs.size(), " inputs; the graph takes ", entry.dtypes.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorView& input = inputs[i];
    if (input.dtype != entry.dtypes[i]) {
      return absl::FailedPreconditionError(
          absl::StrCat(InputName(graph_, i), " has dtype ", kiln::v1::DType_Name(input.dtype),
                       "; the graph was compiled for ", kiln::v1::DType_Name(entry.dtypes[i])));
    }
    const std::vector<int64_t>& sizes = entry.sizes[i];
    if (input.sizes.size() != sizes.size() || input.strides.size() != sizes.size()) {
      return absl::FailedPreconditionError(absl::StrCat(InputName(graph_, i), " has rank ",
                                                        input.sizes.size(), "; the graph expects ",
                                                        sizes.size()));
    }
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (input.sizes[d] != sizes[d]) {
        return absl::FailedPreconditionError(absl::StrCat(
            InputName(graph_, i), ": dim ", d, " has size ", input.sizes[d],
            "; the graph was compiled for ", sizes[d], " (static shapes)"));
      }
    }
    for (size_t d = 0; d < sizes.size(); ++d) {
      // A dim of size 1 is only ever read at index 0: its stride is moot.
      if (sizes[d] != 1 && input.strides[d] != entry.strides[i][d]) {
        return absl::FailedPreconditionError(absl::StrCat(
            InputName(graph_, i), ": dim ", d, " has stride ", input.strides[d],
            "; the graph was compiled for stride ", entry.strides[i][d]));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const CompiledGraph::Entry*> CompiledGraph::FindEntry(
    absl::Span<const TensorView> inputs) {
  {
    absl::ReaderMutexLock lock(&mutex_);
    if (!entries_.empty()) {
      absl::Status status;
      for (const auto& entry : entries_) {
        status = CheckGuards(*entry, inputs);
        if (status.ok()) return entry.get();
      }
      return status;  // static shapes: no new specialization is requested
    }
  }
  RETURN_IF_ERROR(Prepare().status());
  return FindEntry(inputs);
}

absl::Status CompiledGraph::CheckOutputs(const Entry& entry, absl::Span<const TensorView> inputs,
                                         absl::Span<const TensorView> outputs) const {
  const kiln::v1::Signature& signature = entry.artifact->metadata.signature();
  if (static_cast<int>(outputs.size()) != signature.outputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("got ", outputs.size(),
                                                   " output buffers; the graph returns ",
                                                   signature.outputs_size()));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    const TensorView& output = outputs[k];
    const kiln::v1::TensorType& type = signature.outputs(k);
    bool shape_ok = output.dtype == type.dtype() &&
                    static_cast<int>(output.sizes.size()) == type.sizes_size() &&
                    output.strides.size() == output.sizes.size();
    int64_t expected_stride = 1;
    for (int d = type.sizes_size() - 1; shape_ok && d >= 0; --d) {
      shape_ok = output.sizes[d] == type.sizes(d).constant() &&
                 (output.sizes[d] == 1 || output.strides[d] == expected_stride);
      expected_stride *= type.sizes(d).constant();
    }
    if (!shape_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output ", k, " must be a contiguous ", kiln::v1::DType_Name(type.dtype()),
          " tensor of the graph's output shape"));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (Overlaps(output, inputs[i])) {
        return absl::InvalidArgumentError(
            absl::StrCat("output ", k, " overlaps ", InputName(graph_, i), "; use separate memory"));
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

absl::Status CompiledGraph::Invoke(const Entry& entry, absl::Span<const TensorView> inputs,
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
  const int code = entry.artifact->run(runtime_->table(), nullptr, in, out,
                                       ThreadScratch(entry.artifact->info->scratch_bytes));
  if (code != 0) {
    return absl::InternalError(absl::StrCat("kernel ", entry.artifact->metadata.key().substr(0, 12),
                                            " returned ", code));
  }
  return absl::OkStatus();
}

absl::Status CompiledGraph::Run(absl::Span<const TensorView> inputs,
                                absl::Span<const TensorView> outputs) {
  ASSIGN_OR_RETURN(const Entry* entry, FindEntry(inputs));
  RETURN_IF_ERROR(CheckOutputs(*entry, inputs, outputs));
  return Invoke(*entry, inputs, outputs);
}

absl::StatusOr<std::vector<Tensor>> CompiledGraph::Run(absl::Span<const TensorView> inputs) {
  ASSIGN_OR_RETURN(const Entry* entry, FindEntry(inputs));
  const kiln::v1::Signature& signature = entry->artifact->metadata.signature();
  std::vector<Tensor> outputs;
  std::vector<TensorView> views;
  for (const kiln::v1::TensorType& type : signature.outputs()) {
    std::vector<int64_t> sizes;
    for (const auto& dim : type.sizes()) sizes.push_back(dim.constant());
    outputs.emplace_back(type.dtype(), std::move(sizes));
  }
  for (const Tensor& output : outputs) views.push_back(output.view());
  RETURN_IF_ERROR(Invoke(*entry, inputs, views));
  return outputs;
}

absl::StatusOr<CompiledGraph::DirectCall> CompiledGraph::DirectCallForBenchmark(
    absl::Span<const TensorView> inputs) {
  ASSIGN_OR_RETURN(const Entry* entry, FindEntry(inputs));
  return DirectCall{entry->artifact->run, runtime_->table(),
                    ThreadScratch(entry->artifact->info->scratch_bytes)};
}

absl::StatusOr<kiln::v1::ArtifactMetadata> CompiledGraph::artifact() const {
  absl::ReaderMutexLock lock(&mutex_);
  if (entries_.empty()) return absl::FailedPreconditionError("not compiled yet: call Prepare");
  return entries_.front()->artifact->metadata;
}

}  // namespace kiln
