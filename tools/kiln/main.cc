// kiln: the Kiln command-line tool (compile, run, explain; cache admin).
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "client/compiled_graph.h"
#include "client/specialization.h"
#include "client/traffic.h"
#include "codegen/compile/target.h"
#include "codegen/compile/toolchain.h"
#include "codegen/ops/ops_doc.h"
#include "codegen/pipeline.h"
#include "codegen/retype.h"
#include "common/files.h"
#include "common/graph_file.h"
#include "common/prometheus.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "tools/kiln/bundle.h"
#include "tools/kiln/human_units.h"
#include "tools/kiln/lifecycle.h"
#include "tools/kiln/ls.h"
#include "tools/kiln/warmup.h"
#include "tools/reference/reference.h"
#include "tools/reference/tensor_data.h"

ABSL_FLAG(bool, json, false,
          "Print machine-readable JSON (stats, ls, show, compile; warmup: a summary object).");
ABSL_FLAG(std::string, format, "text",
          "stats: text, json (as --json) or prometheus (the text kilnd serves on /metrics).");
ABSL_FLAG(std::string, socket, "",
          "kilnd's socket (default: $KILN_SOCKET or the per-user default).");
ABSL_FLAG(std::string, cache_dir, "", "Cache directory for an auto-started kilnd.");
ABSL_FLAG(bool, start, true, "Start kilnd when none is running.");
ABSL_FLAG(std::string, inputs, "",
          "run: comma-separated raw little-endian files, one per graph input, row-major "
          "(default: random; each laid out with the strides the graph declares for it). "
          "why: the input sizes a process called GRAPH.json with: each input's dims joined by x, "
          "inputs separated by commas (8x64,64x32; an empty item for a 0-d input), or symbol "
          "sizes (B=8,S=16); explains the request the client makes for them.");
ABSL_FLAG(int, seed, 0, "run: seed of the random inputs.");
ABSL_FLAG(int, repeat, 100, "run: warm calls to time after the first.");
ABSL_FLAG(bool, check, false, "run: compare the outputs with the naive reference evaluator.");
ABSL_FLAG(std::string, reference, "",
          "run: a NAME.ref.json from tools/trace: run on its inputs (laid out with the strides the "
          "graph declares) and compare the outputs with "
          "eager PyTorch's (assert_close tolerances unless --rtol/--atol).");
ABSL_FLAG(double, rtol, -1, "run --reference: relative tolerance (default: by dtype).");
ABSL_FLAG(double, atol, -1, "run --reference: absolute tolerance (default: by dtype).");
ABSL_FLAG(bool, asm, false, "explain: also print the assembly clang generates.");
ABSL_FLAG(std::string, salt, "",
          "compile/run: a salt that enters the cache key (forces a compile).");
ABSL_FLAG(int, jobs, 8,
          "warmup: compile requests in flight at once (kilnd's --compile_jobs bounds how many "
          "compile).");
ABSL_FLAG(bool, suggest, false,
          "warmup: take a GRAPH.json and print a plan for it from the input sizes serving "
          "processes recorded (docs/WARMUP.md).");
ABSL_FLAG(double, share, 0.99, "warmup --suggest: the share of recorded calls to cover.");
ABSL_FLAG(int, max_buckets, 24, "warmup --suggest: the most buckets to suggest.");
ABSL_FLAG(std::string, max_bytes, "",
          "gc: evict least recently used entries until the store holds at most this many "
          "bytes (e.g. 2G, 500M; default: kilnd's --max_cache_bytes)");
ABSL_FLAG(std::string, older_than, "",
          "gc: evict entries unused for longer than this (e.g. 30d, 12h; default: kilnd's "
          "--max_entry_age)");
ABSL_FLAG(bool, dry_run, false, "gc, prune: list what would be removed; remove nothing.");
ABSL_FLAG(bool, repair, false,
          "verify: rewrite damaged object files and index records from the store, evict entries "
          "whose blob is damaged, remove orphan object files.");
ABSL_FLAG(int, last, 0, "why: explain the last N misses kilnd remembers (it keeps 64).");
ABSL_FLAG(bool, stale, false,
          "prune: remove entries built by another toolchain, codegen version or CPU (required: "
          "the one kind of pruning there is, named so that it is never a surprise).");
ABSL_FLAG(std::string, sort, "last_use",
          "ls: last_use (newest first), size (largest first), created (newest first), name or "
          "key (A to Z).");
ABSL_FLAG(bool, reverse, false, "ls: the other way round (oldest, smallest, Z to A first).");
ABSL_FLAG(std::string, graph, "",
          "ls: only entries whose graph name contains this. export: a graph file whose entry to "
          "export (the arguments after it are graph files too).");
ABSL_FLAG(int64_t, limit, -1,
          "ls: at most this many entries; 0: all; default: 50 for a table on a terminal, else "
          "all.");
ABSL_FLAG(absl::Duration, wait, absl::Seconds(30),
          "stop: how long to wait for kilnd to finish draining and exit.");
ABSL_FLAG(std::string, target, "native",
          "compile/run/explain: the CPUs to compile for: native (this host's, 512-bit vectors "
          "where it has AVX-512), x86-64-v3 (AVX2) or x86-64-v4 (AVX-512); a portable level's "
          "artifacts serve every host with the same compiler. It enters the cache key.");
ABSL_FLAG(std::string, output, "", "export: the bundle file to write (also -o FILE).");
ABSL_FLAG(std::string, o, "", "export: as --output.");
ABSL_FLAG(std::string, plan, "",
          "export: a warmup plan (docs/WARMUP.md) whose every bucket to export.");
ABSL_FLAG(bool, force, false,
          "import: store entries built for another toolchain, codegen version or target too "
          "(they can never be a hit here).");

namespace kiln {
namespace {

using Args = std::vector<std::string>;

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

// Admin commands connect now; `run` opens lazily, so that a hit in the
// local index needs no daemon at all.
absl::StatusOr<std::unique_ptr<Client>> ConnectFromFlags(bool lazy = false) {
  ClientOptions options;
  options.socket_path = absl::GetFlag(FLAGS_socket);
  options.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  options.auto_start = absl::GetFlag(FLAGS_start);
  options.client_name = "kiln-cli";
  if (lazy) return Client::Open(options);
  return Client::Connect(options);
}

absl::Status NeedArgs(const Args& args, size_t count, const char* usage) {
  if (args.size() != count) return absl::InvalidArgumentError(absl::StrCat("usage: ", usage));
  return absl::OkStatus();
}

absl::StatusOr<kiln::v1::CompileOptions> OptionsFromFlags() {
  kiln::v1::CompileOptions options;
  options.set_salt(absl::GetFlag(FLAGS_salt));
  ASSIGN_OR_RETURN(const kiln::v1::Target target, ParseTarget(absl::GetFlag(FLAGS_target)));
  options.set_target(target);
  return options;
}

std::string Short(const std::string& key) { return key.substr(0, 16); }

absl::Status Compile(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 1, "kiln compile GRAPH.json"));
  ASSIGN_OR_RETURN(kiln::v1::Graph graph, ReadGraphFile(args[0]));
  ASSIGN_OR_RETURN(const kiln::v1::CompileOptions options, OptionsFromFlags());
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = graph;
  *request.mutable_options() = options;
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(auto response, client->Compile(request));
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(response) << "\n";
    return absl::OkStatus();
  }
  const auto& timings = response.artifact().timings();
  std::cout << (response.cache_hit() ? "hit " : "compiled ") << response.artifact().key() << "\n"
            << "  object   " << response.object_path() << " (" << response.artifact().object_bytes()
            << " bytes)\n"
            << "  target   " << TargetName(response.artifact().target()) << " ("
            << response.artifact().toolchain().cpu() << ")\n"
            << absl::StrFormat("  request  %.2f ms", ms);
  if (!response.cache_hit()) {
    std::cout << absl::StrFormat(" (codegen %.2f ms, compile %.2f ms with the %s compiler)",
                                 timings.codegen_ms(), timings.compile_ms(),
                                 response.artifact().compiler());
  }
  std::cout << "\n";
  return absl::OkStatus();
}

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
  ASSIGN_OR_RETURN(const kiln::v1::CompileOptions options, OptionsFromFlags());
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
            << Short(artifact.key()) << " ("
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
      connect_ms, prepared.fetch_ms, prepared.load_ms, first_call_us, to_first_result_ms);
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

absl::Status Explain(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 1, "kiln explain GRAPH.json [--asm] [--target=...]"));
  ASSIGN_OR_RETURN(kiln::v1::Graph graph, ReadGraphFile(args[0]));
  ASSIGN_OR_RETURN(const kiln::v1::CompileOptions options, OptionsFromFlags());
  ASSIGN_OR_RETURN(ir::Graph prepared, PrepareGraph(graph));
  CodegenInputs inputs;
  inputs.graph = std::move(prepared);
  inputs.options = options;
  ASSIGN_OR_RETURN(GeneratedCode code, GenerateCode(inputs, /*keep_stages=*/true));
  for (const auto& [stage, text] : code.stages) {
    std::cout << "== " << stage << " ==\n" << text << "\n";
  }
  if (absl::GetFlag(FLAGS_asm)) {
    ASSIGN_OR_RETURN(const std::string dir, MakeTempDirectory("/tmp/kiln-asmXXXXXX"));
    const std::string source = dir + "/kernel.cc";
    RETURN_IF_ERROR(WriteFileAtomically(source, code.source, 0600));
    std::vector<std::string> argv = {kDefaultClang};
    for (const std::string& flag : CodegenFlags(options.target())) {
      if (flag != "-shared" && flag != "-nostdlib" && flag != "-fuse-ld=lld") argv.push_back(flag);
    }
    for (const char* arg : {"-S", "-fno-verbose-asm", "-o", "-"}) argv.push_back(arg);
    argv.push_back(source);
    auto result = RunProcess(argv, absl::Minutes(1));
    RemoveRecursively(dir).IgnoreError();
    RETURN_IF_ERROR(result.status());
    std::cout << "== assembly ==\n" << result->output;
  }
  return absl::OkStatus();
}

absl::Status Stats(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln stats"));
  std::string format = absl::GetFlag(FLAGS_format);
  if (format != "text" && format != "json" && format != "prometheus") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format=", format, " is not one of text, json, prometheus"));
  }
  if (absl::GetFlag(FLAGS_json)) {
    if (format == "prometheus") {
      return absl::InvalidArgumentError("--json and --format=prometheus conflict: pass one");
    }
    format = "json";
  }
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  ASSIGN_OR_RETURN(auto stats, client->Stats());
  if (format == "json") {
    std::cout << ToJson(stats) << "\n";
    return absl::OkStatus();
  }
  if (format == "prometheus") {
    std::cout << PrometheusText(stats);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const kiln::v1::HelloResponse daemon, client->daemon());
  // Failed requests by kind, the kinds that occurred, A to Z.
  const std::map<std::string, int64_t> failures_by_kind(stats.failures_by_kind().begin(),
                                                        stats.failures_by_kind().end());
  int64_t failed_requests = 0;
  std::vector<std::string> kinds;
  for (const auto& [kind, count] : failures_by_kind) {
    failed_requests += count;
    if (count > 0) kinds.push_back(absl::StrCat(kind, " ", count));
  }
  std::cout << absl::StrFormat(
      "kilnd %s (pid %d) on %s, up %.1f s\n"
      "hits      %d answered by kilnd, %d from clients' local index (as they report them)\n"
      "misses    %d (%d waited on a running compile)\n"
      "compiles  %d (%d failed), %.1f ms compiling in all\n"
      "failed    %d compile requests%s%s\n"
      "failures  %d remembered, %d retries answered from memory (`kiln evict KEY` forgets one)\n"
      "store     %d entries, %d blobs, %d bytes\n"
      "damage    %d corrupt blobs and %d corrupt entries quarantined (each compiles again)\n",
      daemon.daemon_version(), daemon.pid(), client->socket_path(), stats.uptime_ms() / 1000.0,
      stats.hits(), stats.local_index_hits(), stats.misses(), stats.coalesced(), stats.compiles(),
      stats.compile_failures(), stats.compile_ms_total(), failed_requests,
      kinds.empty() ? "" : ": ", absl::StrJoin(kinds, ", "), stats.remembered_failures(),
      stats.failures_replayed(), stats.entries(), stats.blobs(), stats.bytes_stored(),
      stats.corrupt_blobs(), stats.corrupt_entries());
  if (stats.unreadable_ranges() > 0) {
    std::cout << absl::StrFormat(
        "          %d damaged stretches of the store could not be counted: the store counts\n"
        "          above are lower bounds (see kilnd.log)\n",
        stats.unreadable_ranges());
  }
  if (stats.has_remote()) {
    const kiln::v1::RemoteStats& remote = stats.remote();
    std::cout << absl::StrFormat(
        "remote    %s, %s%s\n"
        "          %d hits (%d bytes), %d misses, %d waited on another machine's compile (%d "
        "took it over)\n"
        "          %d published (%d bytes), %d not; %d errors, %d entries refused (bad "
        "signature or digest)\n",
        remote.url(), remote.available() ? "reachable" : "UNREACHABLE (compiling locally)",
        remote.read_only() ? ", read-only (no signing key)" : "", remote.hits(),
        remote.bytes_read(), remote.misses(), remote.lease_waits(), remote.lease_takeovers(),
        remote.publishes(), remote.bytes_written(), remote.publishes_dropped(), remote.errors(),
        remote.refused());
  }
  return absl::OkStatus();
}

absl::Status List(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln ls"));
  LsOptions options;
  options.sort = absl::GetFlag(FLAGS_sort);
  options.reverse = absl::GetFlag(FLAGS_reverse);
  options.graph = absl::GetFlag(FLAGS_graph);
  options.json = absl::GetFlag(FLAGS_json);
  options.limit = absl::GetFlag(FLAGS_limit);
  if (options.limit == -1) options.limit = !options.json && isatty(STDOUT_FILENO) ? 50 : 0;
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  return ListEntries(*client, options, std::cout, std::cerr);
}

// status and stop never start kilnd.
ClientOptions DaemonOptionsFromFlags() {
  ClientOptions options;
  options.socket_path = absl::GetFlag(FLAGS_socket);
  options.auto_start = false;
  options.client_name = "kiln-cli";
  return options;
}

absl::Status Status(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln status"));
  return PrintDaemonStatus(DaemonOptionsFromFlags(), absl::GetFlag(FLAGS_json), std::cout);
}

absl::Status Stop(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln stop"));
  return StopDaemon(DaemonOptionsFromFlags(), absl::GetFlag(FLAGS_wait), std::cout);
}

absl::Status Show(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 1, "kiln show KEY"));
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  ASSIGN_OR_RETURN(auto artifact, client->Show(args[0]));
  std::cout << ToJson(artifact) << "\n";  // the metadata is structured: JSON either way
  return absl::OkStatus();
}

absl::Status Evict(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 1, "kiln evict KEY"));
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  // kilnd removes the entry and forgets a compile failure remembered for the
  // key: either makes the next request compile afresh.
  ASSIGN_OR_RETURN(const std::string key, client->Evict(args[0]));
  std::cout << "evicted " << key << "\n";
  return absl::OkStatus();
}

absl::Status Gc(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln gc"));
  kiln::v1::GcRequest request;
  if (const std::string bytes = absl::GetFlag(FLAGS_max_bytes); !bytes.empty()) {
    ASSIGN_OR_RETURN(const int64_t max_bytes, ParseBytes(bytes));
    request.set_max_bytes(max_bytes);
  }
  if (const std::string age = absl::GetFlag(FLAGS_older_than); !age.empty()) {
    ASSIGN_OR_RETURN(const absl::Duration older_than, ParseAge(age));
    request.set_older_than_ms(absl::ToInt64Milliseconds(older_than));
  }
  request.set_dry_run(absl::GetFlag(FLAGS_dry_run));
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  ASSIGN_OR_RETURN(const kiln::v1::GcResponse response, client->Gc(request));
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(response) << "\n";
    return absl::OkStatus();
  }
  const char* verb = request.dry_run() ? "would evict" : "evicted";
  for (const kiln::v1::GcResponse::Evicted& entry : response.evicted()) {
    std::cout << absl::StrFormat("%s %s  %10s  last used %s\n", verb, Short(entry.key()),
                                 HumanBytes(entry.object_bytes()),
                                 HumanTime(absl::FromUnixMillis(entry.last_use_unix_ms())));
  }
  std::cout << absl::StrFormat("%s %d entries: %s -> %s\n", verb, response.evicted_size(),
                               HumanBytes(response.bytes_before()),
                               HumanBytes(response.bytes_after()));
  return absl::OkStatus();
}

absl::Status SetPinned(const Args& args, bool pinned) {
  RETURN_IF_ERROR(
      NeedArgs(args, 1, pinned ? "kiln pin KEY|GRAPH.json" : "kiln unpin KEY|GRAPH.json"));
  kiln::v1::PinRequest request;
  request.set_pinned(pinned);
  if (absl::EndsWith(args[0], ".json")) {
    // A graph: every entry compiled from it, its specializations included.
    ASSIGN_OR_RETURN(const kiln::v1::Graph graph, ReadGraphFile(args[0]));
    request.set_graph_digest(GraphDigest(graph));
  } else {
    request.set_key(args[0]);
  }
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  ASSIGN_OR_RETURN(const std::vector<std::string> keys, client->Pin(request));
  for (const std::string& key : keys)
    std::cout << (pinned ? "pinned " : "unpinned ") << key << "\n";
  return absl::OkStatus();
}

absl::Status Verify(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln verify"));
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  ASSIGN_OR_RETURN(const kiln::v1::VerifyResponse report,
                   client->Verify(absl::GetFlag(FLAGS_repair)));
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(report) << "\n";
  } else {
    for (const std::string& problem : report.problems()) std::cout << "bad " << problem << "\n";
    std::cout << absl::StrFormat(
        "checked %d entries: %d bad entries, %d bad blobs, %d bad object files, %d bad index "
        "records; %d unindexed, %d orphan object files; %d repaired\n",
        report.entries(), report.bad_entries(), report.bad_blobs(), report.bad_objects(),
        report.bad_index(), report.unindexed(), report.orphan_objects(), report.repaired());
  }
  const int64_t bad =
      report.bad_entries() + report.bad_blobs() + report.bad_objects() + report.bad_index();
  if (bad > 0) {
    return absl::DataLossError(absl::StrCat(bad, " damaged ", bad == 1 ? "item" : "items",
                                            absl::GetFlag(FLAGS_repair)
                                                ? " (repaired as listed)"
                                                : "; `kiln verify --repair` repairs them"));
  }
  return absl::OkStatus();
}

absl::Status Prune(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln prune --stale"));
  if (!absl::GetFlag(FLAGS_stale)) {
    return absl::InvalidArgumentError("say what to prune: kiln prune --stale");
  }
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  ASSIGN_OR_RETURN(const kiln::v1::PruneResponse response,
                   client->Prune(absl::GetFlag(FLAGS_dry_run)));
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(response) << "\n";
    return absl::OkStatus();
  }
  const char* verb = absl::GetFlag(FLAGS_dry_run) ? "would prune" : "pruned";
  int64_t bytes = 0;
  for (const kiln::v1::PruneResponse::Pruned& entry : response.pruned()) {
    std::cout << verb << " " << Short(entry.key()) << "  " << HumanBytes(entry.object_bytes())
              << "  " << entry.reason() << "\n";
    bytes += entry.object_bytes();
  }
  std::cout << verb << " " << response.pruned_size() << " stale entries (" << HumanBytes(bytes)
            << ")\n";
  return absl::OkStatus();
}

// One request of a WhyResponse: its key, whether it is stored, and the
// nearest stored entries with what differs.
void PrintWhy(const kiln::v1::WhyResponse::Request& asked, bool past_miss) {
  std::cout << (past_miss ? "miss " : "request ") << Short(asked.key()) << " ("
            << asked.graph_name() << ")";
  if (past_miss) std::cout << " at " << HumanTime(absl::FromUnixMillis(asked.unix_ms()));
  std::cout << "\n";
  if (asked.stored()) {
    std::cout << (past_miss ? "  stored since (that miss compiled it); before it:\n"
                            : "  stored: a request for it hits\n");
    if (!past_miss) return;
  }
  if (asked.nearest().empty()) std::cout << "  nothing else is stored to compare with\n";
  for (const kiln::v1::WhyResponse::Nearest& nearest : asked.nearest()) {
    std::cout << "  nearest " << Short(nearest.key()) << " (" << nearest.graph_name() << "):\n";
    for (const std::string& line : nearest.differences()) std::cout << "    " << line << "\n";
  }
}

// `kiln why GRAPH.json --inputs SIZES`: the requests a CompiledGraph of the
// graph makes for inputs of these sizes (client/specialization.h
// RequestsForSizes), each explained; the client takes the first that
// compiles, so the first decides whether the call hit.
absl::Status WhyForSizes(const kiln::v1::Graph& graph, const kiln::v1::CompileOptions& options,
                         Client& client) {
  ASSIGN_OR_RETURN(const std::vector<std::vector<int64_t>> sizes,
                   ParseInputSizes(graph, absl::GetFlag(FLAGS_inputs)));
  ASSIGN_OR_RETURN(const std::vector<SizedRequest> requests, RequestsForSizes(graph, sizes));
  kiln::v1::WhyResponse all;
  for (const SizedRequest& sized : requests) {
    kiln::v1::WhyRequest request;
    *request.mutable_request()->mutable_graph() = sized.graph;
    *request.mutable_request()->mutable_options() = options;
    ASSIGN_OR_RETURN(const kiln::v1::WhyResponse response, client.Why(request));
    if (response.requests_size() != 1) {
      return absl::InternalError("kilnd did not answer for the one request asked");
    }
    *all.add_requests() = response.requests(0);
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(all) << "\n";
    return absl::OkStatus();
  }
  const std::string shown = InputSizesString(sizes);
  if (const absl::Status taken = CheckGraphTakesSizes(graph, sizes); taken.ok()) {
    std::cout << "inputs " << shown << ": the graph as given takes them\n";
  } else {
    std::cout << "inputs " << shown << ": the graph as given does not take them ("
              << taken.message() << "); the client requests, in order, taking the first that "
              << "compiles:\n";
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests.size() > 1 || requests[i].description != "the graph as given") {
      std::cout << i + 1 << ". " << requests[i].description << "\n";
    }
    PrintWhy(all.requests(i), /*past_miss=*/false);
  }
  std::cout << (all.requests(0).stored()
                    ? "a call at these sizes hits: the first request is stored\n"
                    : "a call at these sizes compiles: the first request is not stored\n");
  return absl::OkStatus();
}

absl::Status Why(const Args& args) {
  kiln::v1::WhyRequest request;
  const bool sized = !absl::GetFlag(FLAGS_inputs).empty();
  if (absl::GetFlag(FLAGS_last) > 0) {
    RETURN_IF_ERROR(NeedArgs(args, 0, "kiln why --last=N"));
    if (sized) return absl::InvalidArgumentError("--inputs is for a graph file, not --last");
    request.set_last(absl::GetFlag(FLAGS_last));
  } else {
    RETURN_IF_ERROR(NeedArgs(args, 1, "kiln why GRAPH.json [--inputs=SIZES] | kiln why --last=N"));
    ASSIGN_OR_RETURN(*request.mutable_request()->mutable_graph(), ReadGraphFile(args[0]));
    ASSIGN_OR_RETURN(*request.mutable_request()->mutable_options(), OptionsFromFlags());
  }
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  if (sized) return WhyForSizes(request.request().graph(), request.request().options(), *client);
  ASSIGN_OR_RETURN(const kiln::v1::WhyResponse response, client->Why(request));
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(response) << "\n";
    return absl::OkStatus();
  }
  if (response.requests().empty()) std::cout << "no misses since kilnd started\n";
  for (const kiln::v1::WhyResponse::Request& asked : response.requests()) {
    PrintWhy(asked, /*past_miss=*/request.has_last());
  }
  return absl::OkStatus();
}

absl::Status Pin(const Args& args) { return SetPinned(args, true); }
absl::Status Unpin(const Args& args) { return SetPinned(args, false); }

absl::Status Warmup(const Args& args) {
  if (absl::GetFlag(FLAGS_suggest)) {
    RETURN_IF_ERROR(NeedArgs(args, 1, "kiln warmup --suggest GRAPH.json"));
    ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
    SuggestOptions options;
    options.share = absl::GetFlag(FLAGS_share);
    options.max_buckets = absl::GetFlag(FLAGS_max_buckets);
    return SuggestWarmup(args[0], *client, options, std::cout, std::cerr);
  }
  RETURN_IF_ERROR(NeedArgs(args, 1, "kiln warmup PLAN.json"));
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  WarmupOptions options;
  options.jobs = absl::GetFlag(FLAGS_jobs);
  options.json = absl::GetFlag(FLAGS_json);
  options.terminal = isatty(STDERR_FILENO);
  return RunWarmup(args[0], *client, options, std::cout, std::cerr);
}

absl::Status Ops(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln ops"));
  std::cout << ops::OpsMarkdown();
  return absl::OkStatus();
}

struct Command {
  const char* arguments;  // "GRAPH.json", or "" for none
  const char* summary;
  std::vector<const char*> flags;  // the command's own, listed by `kiln COMMAND --help`
  const char* example;
  std::function<absl::Status(const Args&)> run;
};

// Flags every command that talks to kilnd takes.
#define KILN_DAEMON_FLAGS "socket", "cache_dir", "start"

const std::map<std::string, Command>& Commands() {
  static const auto* const commands = new std::map<std::string, Command>{
      {"compile",
       {"GRAPH.json",
        "compile (or fetch from the cache); print the key and timings",
        {"json", "salt", "target", KILN_DAEMON_FLAGS},
        "kiln compile examples/f.json --target=x86-64-v3",
        Compile}},
      {"run",
       {"GRAPH.json",
        "compile, load and run on random inputs; print outputs and timings",
        {"inputs", "seed", "repeat", "check", "reference", "rtol", "atol", "salt", "target",
         KILN_DAEMON_FLAGS},
        "kiln run examples/f.json --check --repeat=1000",
        Run}},
      {"explain",
       {"GRAPH.json",
        "print each codegen stage: graph, loop IR, kernels, buffers, C++",
        {"asm", "target"},
        "kiln explain examples/tail.json --asm --target=x86-64-v3",
        Explain}},
      {"stats",
       {"",
        "daemon counters and store totals",
        {"format", "json", KILN_DAEMON_FLAGS},
        "kiln stats --format=prometheus",
        Stats}},
      {"ls",
       {"",
        "list cache entries: sorted (last use by default), filtered by graph name, paged",
        {"sort", "reverse", "graph", "limit", "json", KILN_DAEMON_FLAGS},
        "kiln ls --sort=size --graph=mlp --limit=20",
        List}},
      {"status",
       {"",
        "is kilnd running (never starts one): version, pid, socket, cache, uptime; exit 3 if not",
        {"json", "socket"},
        "kiln status --json",
        Status}},
      {"stop",
       {"",
        "drain kilnd and wait for it to exit (exit code 3 when none runs)",
        {"wait", "socket"},
        "kiln stop --wait=1m",
        Stop}},
      {"ops", {"", "the supported ops, as Markdown (docs/OPS.md)", {}, "kiln ops > ops.md", Ops}},
      {"warmup",
       {"PLAN.json | --suggest GRAPH.json",
        "compile every bucket of a warmup plan ahead of traffic, or suggest a plan from "
        "recorded traffic (docs/WARMUP.md)",
        {"jobs", "json", "suggest", "share", "max_buckets", KILN_DAEMON_FLAGS},
        "kiln warmup examples/plans/warmup.json --jobs=4",
        Warmup}},
      {"show",
       {"KEY",
        "one entry's metadata (a unique key prefix will do)",
        {KILN_DAEMON_FLAGS},
        "kiln show 3f2a9c",
        Show}},
      {"evict",
       {"KEY",
        "remove an entry, or forget its remembered compile failure",
        {KILN_DAEMON_FLAGS},
        "kiln evict 3f2a9c",
        Evict}},
      {"gc",
       {"",
        "evict least recently used entries past a size, and entries unused for an age "
        "(pinned ones never)",
        {"max_bytes", "older_than", "dry_run", "json", KILN_DAEMON_FLAGS},
        "kiln gc --max_bytes=2G --older_than=30d --dry_run",
        Gc}},
      {"verify",
       {"",
        "check every entry, blob, object file and index record against its digest; exit 1 "
        "when anything is damaged",
        {"repair", "json", KILN_DAEMON_FLAGS},
        "kiln verify --repair",
        Verify}},
      {"prune",
       {"--stale",
        "remove entries built by another toolchain, codegen version or CPU (they can never hit)",
        {"stale", "dry_run", "json", KILN_DAEMON_FLAGS},
        "kiln prune --stale --dry_run",
        Prune}},
      {"why",
       {"GRAPH.json [--inputs=SIZES] | --last=N",
        "why a request missed: the nearest stored entries and which part of the key differs "
        "(graph node, guard, options, toolchain, codegen version); with --inputs, for the "
        "request a process calling GRAPH.json at those sizes makes",
        {"last", "inputs", "target", "salt", "json", KILN_DAEMON_FLAGS},
        "kiln why model.json --inputs=8x64,64x32",
        Why}},
      {"pin",
       {"KEY|GRAPH.json",
        "keep through every eviction the entries whose keys start with KEY, or every entry "
        "compiled from GRAPH.json (its specializations and warmup buckets too)",
        {KILN_DAEMON_FLAGS},
        "kiln pin models/layer.kiln/graph.json",
        Pin}},
      {"unpin",
       {"KEY|GRAPH.json",
        "let them be evicted again",
        {KILN_DAEMON_FLAGS},
        "kiln unpin 3f2a9c",
        Unpin}},
      {"export",
       {"[KEY...] -o FILE",
        "write entries (by key, --graph file or --plan bucket; all when none is named) and "
        "their objects to one checksummed bundle, to import elsewhere",
        {"output", "o", "graph", "plan", "target", KILN_DAEMON_FLAGS},
        "kiln warmup plan.json && kiln export --plan plan.json -o warm.kb",
        [](const Args& args) -> absl::Status {
          ExportOptions options;
          options.output = absl::GetFlag(FLAGS_output);
          if (options.output.empty()) options.output = absl::GetFlag(FLAGS_o);
          Args arguments = args;
          if (const std::string graph = absl::GetFlag(FLAGS_graph); !graph.empty()) {
            options.graphs = true;
            arguments.insert(arguments.begin(), graph);
          }
          ASSIGN_OR_RETURN(options.compile_options, OptionsFromFlags());
          options.plan = absl::GetFlag(FLAGS_plan);
          ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
          return RunExport(arguments, options, *client, std::cout);
        }}},
      {"import",
       {"FILE",
        "store every entry of a bundle, or none: digests are checked, and entries for another "
        "toolchain or CPU refused",
        {"force", KILN_DAEMON_FLAGS},
        "kiln import warm.kb",
        [](const Args& args) -> absl::Status {
          RETURN_IF_ERROR(NeedArgs(args, 1, "kiln import FILE"));
          ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
          return RunImport(args[0], absl::GetFlag(FLAGS_force), *client, std::cout);
        }}},
  };
  return *commands;
}

#undef KILN_DAEMON_FLAGS

constexpr char kEnvironment[] =
    "Environment:\n"
    "  KILN_SOCKET      kilnd's socket (default $XDG_RUNTIME_DIR/kiln/kilnd.sock, else\n"
    "                   /tmp/kiln-$UID/kilnd.sock)\n"
    "  KILN_CACHE_DIR   the cache directory (default $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)\n"
    "  KILN_DAEMON      the kilnd binary to start on demand (default: next to kiln, else PATH)\n"
    "  KILN_DAEMON_UID  a uid whose daemon and files are trusted besides yours and root's\n"
    "                   (a kilnd shared on purpose; see docs/SECURITY.md)\n"
    "  KILN_NUM_THREADS threads that run kernels (default: one per core)\n";

std::string Usage() {
  std::string usage =
      "kiln: compile tensor graphs through the Kiln cache, and manage the cache.\n\n"
      "Usage: kiln COMMAND [ARGS] [FLAGS]   (kiln COMMAND --help: its flags and an example)\n\n"
      "Commands:\n";
  // Name and arguments in a column of 20; longer ones get the summary on
  // a line of its own.
  constexpr int kColumn = 20;
  for (const auto& [name, command] : Commands()) {
    const std::string head = absl::StrFormat("%-8s%s", name, command.arguments);
    if (head.size() < kColumn) {
      absl::StrAppend(&usage, "  ", absl::StrFormat("%-*s", kColumn, head), command.summary, "\n");
    } else {
      absl::StrAppend(&usage, "  ", head, "\n", std::string(2 + kColumn, ' '), command.summary,
                      "\n");
    }
  }
  absl::StrAppend(&usage,
                  "\nGraph files are the protobuf JSON of kiln.v1.Graph (see examples/).\n"
                  "kilnd is started on demand.\n\n",
                  kEnvironment);
  return usage;
}

std::string CommandUsage(const std::string& name, const Command& command) {
  std::string usage = absl::StrCat("kiln ", name, ": ", command.summary, "\n\nUsage: kiln ", name,
                                   *command.arguments ? " " : "", command.arguments,
                                   command.flags.empty() ? "" : " [FLAGS]", "\n");
  if (!command.flags.empty()) absl::StrAppend(&usage, "\nFlags:\n");
  for (const char* flag_name : command.flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(flag_name);
    absl::StrAppend(&usage, "  --", flag_name,
                    " (default: ", flag->DefaultValue().empty() ? "\"\"" : flag->DefaultValue(),
                    ")\n      ", flag->Help(), "\n");
  }
  absl::StrAppend(&usage, "\nExample:\n  ", command.example, "\n\n", kEnvironment);
  return usage;
}

// `kiln --help`, `kiln help`, `kiln COMMAND --help`: answered before the
// flags are parsed, so that each command lists its own flags.
bool PrintedHelp(int argc, char** argv) {
  const std::string command = argc > 1 && argv[1][0] != '-' ? argv[1] : "";
  const bool asked = command == "help" || std::any_of(argv + 1, argv + argc, [](const char* arg) {
                       return std::string(arg) == "--help" || std::string(arg) == "-h";
                     });
  if (!asked) return false;
  const auto it = Commands().find(command);
  std::cout << (it == Commands().end() ? Usage() : CommandUsage(it->first, it->second));
  return true;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  if (kiln::PrintedHelp(argc, argv)) return 0;
  absl::SetProgramUsageMessage(kiln::Usage());
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() < 2) {
    std::cerr << kiln::Usage();
    return 2;
  }
  const std::string name = positional[1];
  auto it = kiln::Commands().find(name);
  if (it == kiln::Commands().end()) {
    std::cerr << "kiln: unknown command '" << name << "'; run `kiln --help` for the list\n";
    return 2;
  }
  const kiln::Args args(positional.begin() + 2, positional.end());
  const absl::Status status = it->second.run(args);
  if (!status.ok()) {
    std::cerr << "kiln " << name << ": " << status.message() << "\n";
    return kiln::ExitCodeOf(status);  // 1, or what the command chose (status: 3)
  }
  return 0;
}
