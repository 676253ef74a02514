#include "client/compiled_graph.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "client/scratch.h"
#include "client/sizes_hash.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// Inputs and outputs whose pointers a call passes from the stack.
constexpr int kMaxStackTensors = 16;

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

absl::StatusOr<CompiledGraph::PrepareResult> CompiledGraph::Prepare() {
  const ForkGuard call;
  {
    absl::ReaderMutexLock lock(&mutex_);
    if (given_ != nullptr) {
      PrepareResult result;
      result.already_open = true;
      return result;
    }
  }
  return Fetch(graph_, {});
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
  if (code == KILN_RUN_INDEX_ERROR || code == KILN_RUN_LINALG_ERROR ||
      code == KILN_RUN_CHECK_ERROR) {
    return Runtime::TakeRunError();
  }
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
