// kiln run GRAPH.json: compile, load and run on random, file or reference
// inputs; print the outputs and timings, and optionally check them.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <random>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/compiled_graph.h"
#include "client/specialization.h"
#include "codegen/prepare.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "tools/kiln/commands/command.h"
#include "tools/reference/reference.h"
#include "tools/reference/tensor_data.h"

ABSL_FLAG(int, seed, 0, "The seed of the random inputs.");
ABSL_FLAG(int, repeat, 100, "Warm calls to time after the first.");
ABSL_FLAG(bool, check, false, "Compare the outputs with the naive reference evaluator.");
ABSL_FLAG(std::string, reference, "",
          "A NAME.ref.json from tools/trace: run on its inputs (laid out with the strides the "
          "graph declares) and compare the outputs with eager PyTorch's (assert_close "
          "tolerances unless --rtol/--atol).");
ABSL_FLAG(double, rtol, -1, "--reference: relative tolerance (default: by dtype).");
ABSL_FLAG(double, atol, -1, "--reference: absolute tolerance (default: by dtype).");

namespace kiln {
namespace {

// The strides graph input i declares at `sizes` (the inputs' sizes bind
// its symbols); nullopt when it declares none or contiguous ones.
absl::StatusOr<std::optional<std::vector<int64_t>>> DeclaredStrides(
    const kiln::v1::Graph& graph, int i, const std::vector<std::vector<int64_t>>& sizes) {
  const kiln::v1::TensorType& type = graph.inputs(i).type();
  if (type.strides_size() == 0) return std::nullopt;
  if (type.strides_size() != static_cast<int>(sizes[i].size())) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " '", graph.inputs(i).name(),
                                                   "' declares ", type.strides_size(),
                                                   " strides for ", sizes[i].size(), " dims"));
  }
  const std::map<std::string, int64_t> values = SymbolValues(graph, sizes);
  std::vector<int64_t> strides;
  for (const kiln::v1::Dim& dim : type.strides()) {
    if (!dim.has_symbol()) {
      strides.push_back(dim.constant());
      continue;
    }
    int64_t stride = dim.multiplier() == 0 ? 1 : dim.multiplier();
    std::vector<std::string> symbols = {dim.symbol()};
    symbols.insert(symbols.end(), dim.times().begin(), dim.times().end());
    for (const std::string& symbol : symbols) {
      const auto value = values.find(symbol);
      if (value == values.end() || __builtin_mul_overflow(stride, value->second, &stride)) {
        return absl::InvalidArgumentError(
            absl::StrCat("input ", i, " '", graph.inputs(i).name(), "': a stride names symbol '",
                         symbol, "', which the input sizes do not give a value"));
      }
    }
    strides.push_back(stride);
  }
  const std::vector<int64_t> contiguous = ContiguousStrides(sizes[i]);
  bool is_contiguous = true;
  for (size_t d = 0; d < strides.size(); ++d) {
    is_contiguous &= sizes[i][d] == 1 || strides[d] == contiguous[d];
  }
  if (is_contiguous) return std::nullopt;
  return strides;
}

// `values` (row-major) laid out with the strides each graph input declares:
// a graph traced with a transposed or sliced input gets such an input, so
// its guards pass as they did for the tracer. Where a declared stride is 0
// (an expanded input), that dim keeps one of the values.
absl::StatusOr<std::vector<Tensor>> LayOutAsDeclared(const kiln::v1::Graph& graph,
                                                     std::vector<Tensor> values) {
  std::vector<std::vector<int64_t>> sizes;
  for (const Tensor& value : values) sizes.push_back(value.sizes());
  for (int i = 0; i < graph.inputs_size(); ++i) {
    ASSIGN_OR_RETURN(const std::optional<std::vector<int64_t>> strides,
                     DeclaredStrides(graph, i, sizes));
    if (!strides.has_value()) continue;
    ASSIGN_OR_RETURN(Tensor strided, Tensor::EmptyStrided(values[i].dtype(), sizes[i], *strides));
    CopyElements(values[i].view(), strided.view());
    values[i] = std::move(strided);
  }
  return values;
}

// Random or file inputs for `graph`, as Tensors of its input types, laid out
// as it declares (LayOutAsDeclared).
absl::StatusOr<std::vector<Tensor>> MakeInputs(const kiln::v1::Graph& graph,
                                               const kiln::v1::Reference* reference) {
  if (reference != nullptr) {
    if (reference->inputs_size() != graph.inputs_size()) {
      return absl::InvalidArgumentError(absl::StrCat("the reference has ", reference->inputs_size(),
                                                     " inputs; the graph has ",
                                                     graph.inputs_size()));
    }
    std::vector<Tensor> inputs;
    for (const auto& data : reference->inputs()) {
      ASSIGN_OR_RETURN(Tensor tensor, ToTensor(data));
      inputs.push_back(std::move(tensor));
    }
    return LayOutAsDeclared(graph, std::move(inputs));
  }
  const std::vector<std::string> files = absl::GetFlag(FLAGS_inputs).empty()
                                             ? std::vector<std::string>()
                                             : absl::StrSplit(absl::GetFlag(FLAGS_inputs), ',');
  if (!files.empty() && static_cast<int>(files.size()) != graph.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--inputs names ", files.size(), " files; the graph has ", graph.inputs_size(), " inputs"));
  }
  std::mt19937 random(absl::GetFlag(FLAGS_seed));
  std::normal_distribution<double> normal;
  std::vector<Tensor> inputs;
  for (int i = 0; i < graph.inputs_size(); ++i) {
    const kiln::v1::TensorType& type = graph.inputs(i).type();
    std::vector<int64_t> sizes;
    for (const auto& dim : type.sizes()) {
      if (dim.has_symbol()) return absl::UnimplementedError("symbolic input sizes need --inputs");
      sizes.push_back(dim.constant());
    }
    if (type.dtype() != kiln::v1::FLOAT32 && type.dtype() != kiln::v1::FLOAT64) {
      return absl::UnimplementedError(absl::StrCat("input ", i, ": run makes float inputs only"));
    }
    ASSIGN_OR_RETURN(Tensor tensor,
                     Tensor::Empty(type.dtype(), sizes));  // every byte written below
    if (!files.empty()) {
      ASSIGN_OR_RETURN(const std::string bytes, ReadFile(files[i]));
      if (static_cast<int64_t>(bytes.size()) != tensor.NumBytes()) {
        return absl::InvalidArgumentError(absl::StrCat(
            files[i], " has ", bytes.size(), " bytes; input ", i, " needs ", tensor.NumBytes()));
      }
      std::copy(bytes.begin(), bytes.end(), tensor.data<char>());
    } else {
      for (int64_t e = 0; e < tensor.NumElements(); ++e) {
        if (type.dtype() == kiln::v1::FLOAT32) {
          tensor.data<float>()[e] = static_cast<float>(normal(random));
        } else {
          tensor.data<double>()[e] = normal(random);
        }
      }
    }
    inputs.push_back(std::move(tensor));
  }
  return LayOutAsDeclared(graph, std::move(inputs));
}

std::string Summary(const Tensor& tensor) {
  double low = INFINITY, high = -INFINITY, sum = 0;
  std::vector<std::string> first;
  for (int64_t i = 0; i < tensor.NumElements(); ++i) {
    const double v = ElementAsDouble(tensor, i);
    low = std::min(low, v);
    high = std::max(high, v);
    sum += v;
    if (i < 4) first.push_back(absl::StrFormat("%.6g", v));
  }
  return absl::StrFormat("%s[%s] min %.6g max %.6g mean %.6g first [%s]",
                         kiln::v1::DType_Name(tensor.dtype()), absl::StrJoin(tensor.sizes(), ", "),
                         low, high, sum / std::max<int64_t>(1, tensor.NumElements()),
                         absl::StrJoin(first, ", "));
}

absl::Status Check(const kiln::v1::Graph& graph, const std::vector<Tensor>& inputs,
                   const std::vector<Tensor>& outputs) {
  ASSIGN_OR_RETURN(const ir::Graph prepared, PrepareGraph(graph));
  std::vector<RefTensor> reference_inputs;
  for (const Tensor& input : inputs) {
    // The values the kernel read, row-major (inputs may be strided).
    ASSIGN_OR_RETURN(const Tensor values, Tensor::Empty(input.dtype(), input.sizes()));
    CopyElements(input.view(), values.view());
    RefTensor ref{input.sizes(), {}};
    for (int64_t i = 0; i < values.NumElements(); ++i) {
      ref.values.push_back(ElementAsDouble(values, i));
    }
    reference_inputs.push_back(std::move(ref));
  }
  ASSIGN_OR_RETURN(const auto expected, EvaluateReference(prepared, reference_inputs));
  for (size_t k = 0; k < outputs.size(); ++k) {
    double worst = 0;
    for (int64_t i = 0; i < outputs[k].NumElements(); ++i) {
      const double got = ElementAsDouble(outputs[k], i), want = expected[k].values[i];
      const bool same_special = (std::isnan(got) && std::isnan(want)) || got == want;
      const double error = std::abs(got - want);
      if (!same_special && !(error <= 1e-4 + 1e-4 * std::abs(want))) {
        return absl::InternalError(
            absl::StrFormat("check failed: output %d element %d is %.9g, the reference says %.9g",
                            k, i, got, want));
      }
      if (!std::isnan(error)) worst = std::max(worst, error);
    }
    std::cout << absl::StrFormat("check    output %d matches the reference (max abs error %.3g)\n",
                                 k, worst);
  }
  return absl::OkStatus();
}

absl::Status Run(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 1, "kiln run GRAPH.json [--inputs=a.bin,...] [--check]"));
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(kiln::v1::Graph graph, ReadGraphFile(args[0]));
  ASSIGN_OR_RETURN(const kiln::v1::CompileOptions options, CompileOptionsFromFlags());
  std::optional<kiln::v1::Reference> reference;
  if (!absl::GetFlag(FLAGS_reference).empty()) {
    ASSIGN_OR_RETURN(reference, ReadReferenceFile(absl::GetFlag(FLAGS_reference)));
  }
  ASSIGN_OR_RETURN(std::vector<Tensor> inputs,
                   MakeInputs(graph, reference.has_value() ? &*reference : nullptr));
  std::vector<TensorView> input_views;
  for (const Tensor& input : inputs) input_views.push_back(input.view());

  const absl::Time connect_start = absl::Now();
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags(/*lazy=*/true));
  const double connect_ms = absl::ToDoubleMilliseconds(absl::Now() - connect_start);
  CompiledGraph compiled(client.get(), graph, options);
  ASSIGN_OR_RETURN(const auto prepared, compiled.Prepare());
  const absl::Time first_start = absl::Now();
  ASSIGN_OR_RETURN(std::vector<Tensor> outputs, compiled.Run(input_views));
  const absl::Time first_end = absl::Now();
  const double first_call_us = absl::ToDoubleMicroseconds(first_end - first_start);
  const double to_first_result_ms = absl::ToDoubleMilliseconds(first_end - connect_start);

  std::vector<TensorView> output_views;
  for (const Tensor& output : outputs) output_views.push_back(output.view());
  std::vector<double> warm_us;
  for (int r = 0; r < absl::GetFlag(FLAGS_repeat); ++r) {
    const absl::Time t = absl::Now();
    RETURN_IF_ERROR(compiled.Run(input_views, output_views));
    warm_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - t));
  }
  std::sort(warm_us.begin(), warm_us.end());

  ASSIGN_OR_RETURN(const auto artifact, compiled.artifact());
  std::cout << "graph    " << (graph.name().empty() ? args[0] : graph.name()) << " -> "
            << ShortKey(artifact.key()) << " ("
            << (prepared.local       ? "cache hit, local index"
                : prepared.cache_hit ? "cache hit"
                                     : "compiled")
            << ")\n";
  for (size_t k = 0; k < outputs.size(); ++k) {
    std::cout << "output " << k << " " << Summary(outputs[k]) << "\n";
  }
  if (!prepared.cache_hit) {
    std::cout << absl::StrFormat("compile  %.1f ms (codegen %.2f ms, %s compile %.1f ms)\n",
                                 artifact.timings().total_ms(), artifact.timings().codegen_ms(),
                                 artifact.compiler(), artifact.timings().compile_ms());
  }
  std::cout << absl::StrFormat(
      "timings  client %.2f ms, fetch %.2f ms, load %.3f ms, first call %.1f us; "
      "client to first result %.2f ms\n",
      connect_ms, prepared.fetch_ms, prepared.open_ms, first_call_us, to_first_result_ms);
  if (!warm_us.empty()) {
    std::cout << absl::StrFormat(
        "warm     min %.2f us, median %.2f us, max %.2f us over %d calls\n", warm_us.front(),
        warm_us[warm_us.size() / 2], warm_us.back(), warm_us.size());
  }
  std::cout << absl::StrFormat("process  %.2f ms from start of `kiln run` to first result\n",
                               absl::ToDoubleMilliseconds(first_end - start));
  if (absl::GetFlag(FLAGS_check)) RETURN_IF_ERROR(Check(graph, inputs, outputs));
  if (reference.has_value()) {
    if (reference->outputs_size() != static_cast<int>(outputs.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("the reference has ", reference->outputs_size(),
                       " outputs; the graph returns ", outputs.size()));
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      Tolerance tolerance = DefaultTolerance(outputs[k].dtype());
      if (absl::GetFlag(FLAGS_rtol) >= 0) tolerance.rtol = absl::GetFlag(FLAGS_rtol);
      if (absl::GetFlag(FLAGS_atol) >= 0) tolerance.atol = absl::GetFlag(FLAGS_atol);
      RETURN_IF_ERROR(CompareToReference(absl::StrCat("output ", k), outputs[k],
                                         reference->outputs(k), tolerance));
    }
    std::cout << "eager    all " << outputs.size() << " outputs match eager PyTorch ("
              << reference->provenance() << ")\n";
  }
  return absl::OkStatus();
}

}  // namespace

const Command kRunCommand = {
    "run",
    "GRAPH.json",
    "compile, load and run on random inputs; print outputs and timings",
    {{"inputs",
      "comma-separated raw little-endian files, one per graph input, row-major (default: "
      "random; each laid out with the strides the graph declares for it)"},
     {"seed"},
     {"repeat"},
     {"check"},
     {"reference"},
     {"rtol"},
     {"atol"},
     {"salt"},
     {"target"},
     kSocketFlag,
     kCacheDirFlag,
     kStartFlag},
    "kiln run examples/f.json --check --repeat=1000",
    Run};

}  // namespace kiln
