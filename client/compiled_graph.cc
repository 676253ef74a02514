#include "client/compiled_graph.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "codegen/limits.h"
#include "codegen/pipeline.h"
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

namespace {

CompiledGraph::Size ToSize(const kiln::v1::Dim& dim, const kiln::v1::Signature& signature) {
  CompiledGraph::Size size;
  if (!dim.has_symbol()) {
    size.constant = dim.constant();
    return size;
  }
  auto index = [&](const std::string& name) {
    for (int s = 0; s < signature.symbols_size(); ++s) {
      if (signature.symbols(s) == name) return s;
    }
    return -1;
  };
  size.symbol = index(dim.symbol());
  size.multiplier = dim.multiplier() == 0 ? 1 : dim.multiplier();
  for (const std::string& name : dim.times()) size.times.push_back(index(name));
  return size;
}

// -1 when the product overflows int64 (sizes from huge symbols).
int64_t Evaluate(const CompiledGraph::Size& size, const CompiledGraph::Symbols& symbols) {
  if (size.symbol < 0) return size.constant;
  int64_t value;
  if (__builtin_mul_overflow(size.multiplier, symbols[size.symbol], &value)) return -1;
  for (int symbol : size.times) {
    if (symbol < 0 || __builtin_mul_overflow(value, symbols[symbol], &value)) return -1;
  }
  return value;
}

}  // namespace

absl::StatusOr<CompiledGraph::PrepareResult> CompiledGraph::Prepare() {
  {
    absl::ReaderMutexLock lock(&mutex_);
    if (!entries_.empty()) {
      PrepareResult result;
      result.already_loaded = true;
      return result;
    }
  }
  return Load(graph_);
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

  auto entry = std::make_unique<Entry>();
  entry->artifact = std::move(artifact);
  const kiln::v1::Signature& signature = response.artifact().signature();
  entry->num_symbols = signature.symbols_size();
  if (entry->num_symbols > kMaxSymbols) {
    return absl::UnimplementedError(
        absl::StrCat("the graph has ", entry->num_symbols, " size symbols; at most ", kMaxSymbols));
  }
  if (entry->num_symbols > 0) {
    ASSIGN_OR_RETURN(ir::Graph canonical, PrepareGraph(graph));
    entry->safe_symbol_value = limits::LargestSafeSymbolValue(canonical);
    entry->canonical = std::make_shared<const ir::Graph>(std::move(canonical));
  }
  for (const kiln::v1::TensorType& type : signature.inputs()) {
    entry->dtypes.push_back(type.dtype());
    std::vector<Size> sizes, strides;
    for (const auto& dim : type.sizes()) sizes.push_back(ToSize(dim, signature));
    for (const auto& dim : type.strides()) strides.push_back(ToSize(dim, signature));
    entry->sizes.push_back(std::move(sizes));
    entry->strides.push_back(std::move(strides));
  }
  for (const kiln::v1::TensorType& type : signature.outputs()) {
    std::vector<Size> sizes;
    for (const auto& dim : type.sizes()) sizes.push_back(ToSize(dim, signature));
    entry->output_sizes.push_back(std::move(sizes));
  }
  entry->bounds.resize(entry->num_symbols);
  for (const kiln::v1::SymbolRelation& relation : entry->artifact->metadata.guards().relations()) {
    // Canonical guards: ranges and divisors of signature symbols only.
    const auto bad = [&](const char* why) {
      return absl::InternalError(absl::StrCat("artifact guard relation ",
                                              relation.ShortDebugString(), ": ", why));
    };
    if (!relation.has_range() && !relation.has_divisible()) return bad("not a range or divisor");
    kiln::v1::Dim dim;
    dim.set_symbol(relation.has_range() ? relation.range().symbol()
                                        : relation.divisible().symbol());
    const int symbol = ToSize(dim, signature).symbol;
    if (symbol < 0) return bad("names no symbol of the signature");
    Bounds& bounds = entry->bounds[symbol];
    if (relation.has_range()) {
      bounds.min = std::max<int64_t>(2, relation.range().min());
      bounds.max = relation.range().max();
      if (bounds.max < 0 || (bounds.max != 0 && bounds.max < bounds.min)) return bad("empty range");
    } else {
      bounds.divisor = relation.divisible().divisor();
      if (bounds.divisor <= 0) return bad("divisor is not positive");
    }
  }
  absl::MutexLock lock(&mutex_);
  // Another thread may have loaded the same artifact meanwhile.
  for (const auto& existing : entries_) {
    if (existing->artifact->metadata.key() == entry->artifact->metadata.key()) return result;
  }
  entries_.push_back(std::move(entry));
  return result;
}

bool CompiledGraph::CheckGuards(const Entry& entry, absl::Span<const TensorView> inputs,
                                Symbols& symbols, absl::Status* why) const {
  const auto fail = [why](const auto& message) {
    if (why != nullptr) *why = absl::FailedPreconditionError(message());
    return false;
  };
  if (inputs.size() != entry.dtypes.size()) {
    if (why != nullptr) {
      *why = absl::InvalidArgumentError(
          absl::StrCat("got ", inputs.size(), " inputs; the graph takes ", entry.dtypes.size()));
    }
    return false;
  }
  std::fill(symbols.begin(), symbols.end(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorView& input = inputs[i];
    if (input.dtype != entry.dtypes[i]) {
      return fail([&] {
        return absl::StrCat(InputName(graph_, i), " has dtype ", kiln::v1::DType_Name(input.dtype),
                            "; the graph was compiled for ", kiln::v1::DType_Name(entry.dtypes[i]));
      });
    }
    const std::vector<Size>& sizes = entry.sizes[i];
    if (input.sizes.size() != sizes.size() || input.strides.size() != sizes.size()) {
      return fail([&] {
        return absl::StrCat(InputName(graph_, i), " has rank ", input.sizes.size(),
                            "; the graph expects ", sizes.size());
      });
    }
    for (size_t d = 0; d < sizes.size(); ++d) {
      const Size& size = sizes[d];
      if (size.symbol < 0) {
        if (input.sizes[d] != size.constant) {
          return fail([&] {
            return absl::StrCat(InputName(graph_, i), ": dim ", d, " has size ", input.sizes[d],
                                "; the graph was compiled for ", size.constant, " (static shapes)");
          });
        }
        continue;
      }
      // A symbolic dim: bind its symbol (>= 2, as in PyTorch) or check it.
      const int64_t value = input.sizes[d] / size.multiplier;
      const std::string& name = entry.artifact->metadata.signature().symbols(size.symbol);
      if (input.sizes[d] % size.multiplier != 0 || value < 2) {
        return fail([&] {
          return absl::StrCat(InputName(graph_, i), ": dim ", d, " has size ", input.sizes[d], "; ",
                              size.multiplier == 1 ? "" : absl::StrCat(size.multiplier, " * "),
                              name, " needs ", name, " >= 2");
        });
      }
      if (symbols[size.symbol] >= 0 && symbols[size.symbol] != value) {
        return fail([&] {
          return absl::StrCat(InputName(graph_, i), ": dim ", d, " makes ", name, " = ", value,
                              ", but another input made it ", symbols[size.symbol]);
        });
      }
      symbols[size.symbol] = value;
    }
  }
  // Strides once every symbol is bound. A dim of size 1 is only ever read
  // at index 0 (and an empty tensor not at all): its stride is moot.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorView& input = inputs[i];
    if (std::find(input.sizes.begin(), input.sizes.end(), 0) != input.sizes.end()) continue;
    int64_t contiguous = 1;
    for (size_t d = input.sizes.size(); d-- > 0;) {
      const std::vector<Size>& strides = entry.strides[i];
      const int64_t expected = strides.empty() ? contiguous : Evaluate(strides[d], symbols);
      contiguous *= input.sizes[d];
      if (input.sizes[d] == 1 || input.strides[d] == expected) continue;
      return fail([&] {
        return absl::StrCat(InputName(graph_, i), ": dim ", d, " has stride ", input.strides[d],
                            "; the graph was compiled for stride ", expected);
      });
    }
  }
  for (int s = 0; s < entry.num_symbols; ++s) {
    const Bounds& bounds = entry.bounds[s];
    const int64_t value = symbols[s];
    if (value >= bounds.min && (bounds.max == 0 || value <= bounds.max) &&
        value % bounds.divisor == 0) {
      continue;
    }
    return fail([&] {
      const std::string& name = entry.artifact->metadata.signature().symbols(s);
      std::string where = name;  // the first dim that binds the symbol
      for (size_t i = 0; i < entry.sizes.size() && where == name; ++i) {
        for (size_t d = 0; d < entry.sizes[i].size(); ++d) {
          if (entry.sizes[i][d].symbol != s) continue;
          where = absl::StrCat(InputName(graph_, i), ": dim ", d, " has size ", inputs[i].sizes[d],
                               ", so ", name);
          break;
        }
      }
      std::string promise = absl::StrCat(bounds.min, " <= ", name);
      if (bounds.max != 0) absl::StrAppend(&promise, " <= ", bounds.max);
      if (bounds.divisor > 1) absl::StrAppend(&promise, " and ", name, " % ", bounds.divisor, " == 0");
      return absl::StrCat(where, " = ", value, "; the graph's relations require ", promise);
    });
  }
  return true;
}

absl::StatusOr<const CompiledGraph::Entry*> CompiledGraph::FindEntry(
    absl::Span<const TensorView> inputs, Symbols& symbols) {
  ASSIGN_OR_RETURN(const Entry* entry, FindGuardedEntry(inputs, symbols));
  // Sizes from symbols are products the artifact computes in int64: hold
  // them to the limits before it does (and before outputs are allocated).
  const auto bound = symbols.begin() + entry->num_symbols;
  if (entry->num_symbols > 0 &&
      *std::max_element(symbols.begin(), bound) > entry->safe_symbol_value) {
    RETURN_IF_ERROR(limits::CheckRunTimeSizes(*entry->canonical,
                                              std::vector<int64_t>(symbols.begin(), bound)));
  }
  return entry;
}

absl::StatusOr<const CompiledGraph::Entry*> CompiledGraph::FindGuardedEntry(
    absl::Span<const TensorView> inputs, Symbols& symbols) {
  absl::Status miss;
  {
    absl::ReaderMutexLock lock(&mutex_);
    for (const auto& entry : entries_) {
      if (CheckGuards(*entry, inputs, symbols)) return entry.get();
    }
    // The complaint of the graph as given (the first entry), as the
    // caller's error if nothing fits.
    if (entries_.empty()) {
      miss = absl::NotFoundError("not loaded");
    } else {
      CheckGuards(*entries_.front(), inputs, symbols, &miss);
    }
  }
  if (miss.code() == absl::StatusCode::kNotFound) {
    RETURN_IF_ERROR(Prepare().status());
    return FindGuardedEntry(inputs, symbols);
  }
  // A symbolic graph at size 0 or 1: compile the static specialization.
  std::vector<std::vector<int64_t>> sizes;
  for (const TensorView& input : inputs) sizes.emplace_back(input.sizes.begin(), input.sizes.end());
  std::map<std::string, int64_t> values = SymbolValues(graph_, sizes);
  for (auto it = values.begin(); it != values.end();) {
    it = it->second < 2 ? std::next(it) : values.erase(it);
  }
  if (!values.empty()) {
    RETURN_IF_ERROR(Load(Specialize(graph_, values)).status());
  } else {
    // Other sizes than any entry covers: a new specialization (see
    // Respecialize), within the recompile limit.
    {
      absl::ReaderMutexLock lock(&mutex_);
      if (entries_.size() >= kMaxSpecializations) {
        return absl::FailedPreconditionError(absl::StrCat(
            miss.message(), "; and the recompile limit (", kMaxSpecializations,
            " specializations) is reached"));
      }
    }
    const absl::Status respecialized = Respecialize(inputs);
    if (!respecialized.ok()) return miss;
  }
  absl::ReaderMutexLock lock(&mutex_);
  for (const auto& entry : entries_) {
    if (CheckGuards(*entry, inputs, symbols)) return entry.get();
  }
  return miss;
}

absl::Status CompiledGraph::Respecialize(absl::Span<const TensorView> inputs) {
  if (static_cast<int>(inputs.size()) != graph_.inputs_size()) {
    return absl::InvalidArgumentError("input count differs");
  }
  // First, a version that serves every size: the dims that changed become
  // symbols, one per pair of old and new size (dims that agreed before and
  // still agree, like a batch across inputs, stay one symbol; a square
  // input grown in one dim does not tie its dims). If the graph cannot be
  // lowered that way (a view whose -1 would be no size: 4ab/12), one new
  // symbol at a time with the other dims exact; else the exact sizes.
  std::vector<std::vector<kiln::v1::Dim>> symbolic(inputs.size()), exact(inputs.size());
  std::vector<std::string> new_symbols;  // in order of first use
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& declared = graph_.inputs(i).type();
    if (static_cast<int>(inputs[i].sizes.size()) != declared.sizes_size() ||
        inputs[i].dtype != declared.dtype()) {
      return absl::FailedPreconditionError("rank or dtype differs: no specialization helps");
    }
    for (size_t d = 0; d < inputs[i].sizes.size(); ++d) {
      kiln::v1::Dim dim;
      dim.set_constant(inputs[i].sizes[d]);
      exact[i].push_back(dim);
      const kiln::v1::Dim& old = declared.sizes(d);
      if (!old.has_symbol() && old.constant() != inputs[i].sizes[d] &&
          inputs[i].sizes[d] >= 2 && old.constant() >= 2) {
        kiln::v1::Dim symbol;
        symbol.set_symbol(absl::StrCat("d", old.constant(), "_", inputs[i].sizes[d]));
        symbolic[i].push_back(symbol);
        if (std::find(new_symbols.begin(), new_symbols.end(), symbol.symbol()) ==
            new_symbols.end()) {
          new_symbols.push_back(symbol.symbol());
        }
      } else {
        symbolic[i].push_back(old.has_symbol() ? old : dim);
      }
    }
  }
  // Sizes seen to be unfixable are not tried again (each try is a key
  // computation and maybe an RPC).
  std::string signature;
  for (const auto& sizes : exact) {
    for (const auto& dim : sizes) absl::StrAppend(&signature, dim.constant(), ",");
    signature += ";";
  }
  {
    absl::MutexLock lock(&mutex_);
    if (unfixable_.count(signature)) return absl::FailedPreconditionError("tried before");
  }
  // The new entry must accept these inputs (independent inputs that had
  // one size may now differ: the symbolic version then does not fit).
  auto fits = [&]() {
    Symbols symbols;
    absl::ReaderMutexLock lock(&mutex_);
    for (const auto& entry : entries_) {
      if (CheckGuards(*entry, inputs, symbols)) return true;
    }
    return false;
  };
  auto serves = [&](const std::vector<std::vector<kiln::v1::Dim>>& sizes) {
    auto retyped = Retype(graph_, sizes);
    return retyped.ok() && Load(*retyped).ok() && fits();
  };
  if (!new_symbols.empty() && serves(symbolic)) return absl::OkStatus();
  for (size_t s = 0; new_symbols.size() > 1 && s < new_symbols.size(); ++s) {
    std::vector<std::vector<kiln::v1::Dim>> one = symbolic;
    for (size_t i = 0; i < one.size(); ++i) {
      for (size_t d = 0; d < one[i].size(); ++d) {
        const bool other_new = one[i][d].has_symbol() && one[i][d].symbol() != new_symbols[s] &&
                               !graph_.inputs(i).type().sizes(d).has_symbol();
        if (other_new) one[i][d] = exact[i][d];
      }
    }
    if (serves(one)) return absl::OkStatus();
  }
  auto retyped = Retype(graph_, exact);
  if (retyped.ok() && Load(*retyped).ok() && fits()) return absl::OkStatus();
  absl::MutexLock lock(&mutex_);
  unfixable_.insert(signature);
  return absl::FailedPreconditionError("no specialization fits these inputs");
}

absl::Status CompiledGraph::CheckOutputs(const Entry& entry, const Symbols& symbols,
                                         absl::Span<const TensorView> inputs,
                                         absl::Span<const TensorView> outputs) const {
  const kiln::v1::Signature& signature = entry.artifact->metadata.signature();
  if (static_cast<int>(outputs.size()) != signature.outputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("got ", outputs.size(),
                                                   " output buffers; the graph returns ",
                                                   signature.outputs_size()));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    const TensorView& output = outputs[k];
    const std::vector<Size>& sizes = entry.output_sizes[k];
    bool shape_ok = output.dtype == signature.outputs(k).dtype() &&
                    output.sizes.size() == sizes.size() &&
                    output.strides.size() == output.sizes.size();
    int64_t expected_stride = 1;
    for (int d = static_cast<int>(sizes.size()) - 1; shape_ok && d >= 0; --d) {
      const int64_t size = Evaluate(sizes[d], symbols);
      shape_ok = output.sizes[d] == size && (size == 1 || output.strides[d] == expected_stride);
      expected_stride *= size;
    }
    if (!shape_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output ", k, " must be a contiguous ", kiln::v1::DType_Name(signature.outputs(k).dtype()),
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
  const int64_t scratch =
      info->scratch_bytes >= 0 ? info->scratch_bytes : entry.artifact->scratch_bytes(symbols.data());
  void* const arena = ThreadScratch(scratch);
  if (arena == nullptr && scratch > 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no memory for ", scratch, " bytes of scratch at these sizes"));
  }
  const int code = entry.artifact->run(runtime_->table(), symbols.data(), in, out, arena);
  if (code != 0) {
    return absl::InternalError(absl::StrCat("kernel ", entry.artifact->metadata.key().substr(0, 12),
                                            " returned ", code));
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
    for (const Size& size : entry->output_sizes[k]) {
      sizes.push_back(Evaluate(size, symbols));
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
  if (entry->num_symbols > 0) {
    return absl::UnimplementedError("direct calls are for static graphs");
  }
  void* const arena = ThreadScratch(entry->artifact->info->scratch_bytes);
  if (arena == nullptr && entry->artifact->info->scratch_bytes > 0) {
    return absl::ResourceExhaustedError("no memory for the scratch arena");
  }
  return DirectCall{entry->artifact->run, runtime_->table(), arena};
}

absl::StatusOr<kiln::v1::ArtifactMetadata> CompiledGraph::artifact() const {
  absl::ReaderMutexLock lock(&mutex_);
  if (entries_.empty()) return absl::FailedPreconditionError("not compiled yet: call Prepare");
  return entries_.front()->artifact->metadata;
}

}  // namespace kiln
