// kernels: Kiln's generated kernels against eager PyTorch (the checkout's
// .venv), at 1 and 2 threads, in one run. What each figure means, how to run
// it and the latest figures are in docs/BENCHMARKS.md ("Kernels").
//
// One private kilnd compiles the graphs traced at build time (//tools/bench:
// traced: the public workloads plus f at 1024x1024). Each graph is loaded
// twice, on Runtime(1) and Runtime(2), and every output is checked against
// eager PyTorch in float64 on the same inputs (traced/NAME.ref64.json), with
// a tolerance that grows with the reduction length (accuracy.h), before
// anything is timed: a wrong kernel gets no figure (and the run exits 1);
// eager's own outputs are held to the same bound. Eager PyTorch runs in
// long-lived Python processes (eager_kernels.py, driven over pipes), one per
// configuration: ATen dispatch (avx512 where the CPU has it, eager's best
// there, and torch's default AVX2) x threads (1, 2), plus, for the tail only, eager with
// glibc's default malloc thresholds (a fresh process's heap). Per round, for
// each graph, every side times one batch (calls one by one, median),
// interleaved:
//   eager avx512 1t, Kiln 1t allocating, Kiln 1t preallocated, [copy 1t],
//   [hand-written 1t], eager default 1t, [eager fresh heap 1t], the same at
//   2t (no hand-written)
// and each round starts with one cold compile of transformer_layer (fresh
// salt). Round -1 is a warm-up that also sizes each side's batches.
//
// Output: a table; with --json, also one JSON object as the last line: each
// measure's median speedup over eager at 1 thread under its own key (e.g.
// "softmax_1024"), then everything else. Figures measured in more than one
// round also have `<key>_min` and `<key>_max`; a figure that could not be
// measured is null (the reason is among the string facts).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/compiled_graph.h"
#include "client/runtime/runtime.h"
#include "client/tensor.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "tools/bench/accuracy.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/hand_kernels.h"
#include "tools/reference/tensor_data.h"

ABSL_FLAG(bool, json, false, "Also print every figure as one JSON object on the last line.");
ABSL_FLAG(int, repetitions, 10,
          "Timed rounds (each: every side of every graph once, and one cold compile); the "
          "documented figures use >= 10. ~7 s per round on the 2-vCPU VM.");
ABSL_FLAG(double, batch_ms, 50,
          "Target length of one batch (one side, one graph, one round); the warm-up round sizes "
          "each side's call count from its own time.");
ABSL_FLAG(int, min_calls, 9, "Fewest timed calls in a batch.");
ABSL_FLAG(std::string, python, "",
          "Interpreter for the eager PyTorch baseline (default: the checkout's .venv, from "
          "runfiles).");
ABSL_FLAG(std::string, first_call_child, "",
          "Internal: run as the fresh process of the first-call figure, for the graph named "
          "here, against kilnd at --first_call_socket.");
ABSL_FLAG(std::string, first_call_socket, "", "Internal: see --first_call_child.");
ABSL_FLAG(std::vector<std::string>, graphs, {},
          "Only these graphs (comma-separated: tail,f_1024,softmax,layer_norm,gelu,mlp,attention,"
          "transformer_layer,mlp_train,resnet18,resnet18_b8); default all. Figures of the others "
          "are null.");

namespace kiln {
namespace {

using bench::Batch;
using bench::Daemon;
using bench::Fields;
using bench::LineProcess;
using bench::MsSince;
using bench::NowNs;
using bench::NumberField;
using bench::ParseFields;
using bench::Runfile;
using bench::Samples;
using bench::Summarize;
using bench::Summary;
using bench::TimeBatch;

constexpr char kTarget[] = "//tools/bench:kernels";
constexpr char kTraced[] = "tools/bench/traced/";
constexpr int kMaxCalls = 5000;

// The graphs, as traced into tools/bench/traced/NAME{,.ref}.json.
constexpr const char* kGraphs[] = {"tail",      "f_1024",   "softmax",    "layer_norm",
                                   "gelu",      "mlp",      "attention",  "transformer_layer",
                                   "mlp_train", "resnet18", "resnet18_b8"};
constexpr char kCompiledGraph[] = "transformer_layer";  // the cold-compile figure's graph

struct Measure {
  const char* key;
  const char* graph;
  bool out;       // eager out= vs Kiln into preallocated outputs; else both allocate
  double target;  // minimum median speedup at 1 thread; 0: none
  const char* what;
  const char* eager = "eager";  // the eager process (EagerConfig::name) Kiln is held against
};

constexpr Measure kMeasures[] = {
    {"tail_2048", "tail", false, 4.0,
     "relu(x + 1.0), 2048x2048, both sides allocating; eager's process has glibc's default "
     "malloc thresholds, as a fresh process calling it has",
     "eager_fresh_heap"},
    {"tail_2048_adapted_heap", "tail", false, 0,
     "the same, eager's heap adapted to 16 MiB blocks (its process freed larger ones first)"},
    {"tail_2048_out", "tail", true, 1.8,
     "the same, no allocation: Run(in, out) vs add(out=) + relu_"},
    {"f_1024", "f_1024", false, 1.7, "relu(x @ x.T + 1.0), 1024x1024"},
    {"softmax_1024", "softmax", false, 1.6, "softmax(x, dim=-1), 1024x1024"},
    {"layer_norm_1024", "layer_norm", false, 1.5, "layer_norm(x, [1024], w, b), 1024x1024"},
    {"gelu", "gelu", false, 1.2, "gelu (erf), 256x1024"},
    {"mlp", "mlp", false, 1.15, "Linear 256->1024, GELU, Linear 1024->256, batch 64"},
    {"attention", "attention", false, 1.3, "softmax(q k^T / sqrt(32)) v, (2, 4, 128, 32)"},
    {"transformer_layer", "transformer_layer", false, 1.2,
     "TransformerEncoderLayer(64, 4, 128) eval, (16, 2, 64)"},
    {"mlp_train", "mlp_train", false, 1.2,
     "the mlp's training step: MSE loss and its four parameter gradients, batch 64"},
    {"resnet18_b1", "resnet18", false, 1.2, "torchvision resnet18 eval, 1x3x224x224"},
    {"resnet18_b8", "resnet18_b8", false, 1.1, "torchvision resnet18 eval, 8x3x128x128"},
};

// The eager processes: ATen dispatch x threads.
struct EagerConfig {
  const char* name;  // key part: "eager", "eager_default", "eager_fresh_heap"
  int threads;
  bool avx512;
  // glibc's initial malloc thresholds, held: without this, freeing the
  // references' 22 MiB strings at start-up raises them, and 16 MiB blocks
  // then stay on the heap. A fresh process calling relu(x + 1.0) in a loop
  // faults both 16 MiB buffers in on every call (glibc trims them off the
  // heap's top; held at these values it maps and unmaps them instead: the
  // same faults; docs/BENCHMARKS.md).
  // Only the tail's allocating variant runs here.
  bool fresh_heap = false;
};
constexpr EagerConfig kEagerConfigs[] = {{"eager", 1, true},
                                         {"eager_default", 1, false},
                                         {"eager", 2, true},
                                         {"eager_default", 2, false},
                                         {"eager_fresh_heap", 1, true, true},
                                         {"eager_fresh_heap", 2, true, true}};

// --graphs, or every graph.
std::vector<std::string> SelectedGraphs() {
  std::vector<std::string> graphs = absl::GetFlag(FLAGS_graphs);
  if (graphs.empty()) graphs.assign(std::begin(kGraphs), std::end(kGraphs));
  return graphs;
}

std::string ThreadSuffix(int threads) {
  return threads == 1 ? "" : absl::StrCat("_", threads, "t");
}

// ---------------------------------------------------------------- the sides

// One traced graph on Kiln's side: its inputs (the trace's), preallocated
// outputs, and a CompiledGraph per runtime.
struct KilnGraph {
  std::string name;
  kiln::v1::Reference reference;
  // Eager PyTorch in float64 on the same inputs (reference64.py), and each
  // output's reduction length: what both sides are checked against.
  std::vector<std::vector<double>> reference64;
  std::vector<int64_t> reduction_lengths;
  bench::Accuracy accuracy;  // Kiln's outputs, the worst over runtimes and variants
  std::vector<Tensor> inputs;
  std::vector<TensorView> input_views;
  // Per thread count (index 0: 1 thread, 1: 2 threads).
  std::unique_ptr<CompiledGraph> compiled[2];
  std::vector<Tensor> outputs[2];
  std::vector<TensorView> output_views[2];
  std::string error;       // non-empty: wrong or failed; no Kiln figures
  bool hand = false;       // hand-written baselines exist for it and matched eager
  std::string hand_error;  // why a baseline that exists was left out
  // Calls per batch of each side (by batch name), set by the warm-up round
  // so that every batch takes about --batch_ms; until then --min_calls.
  std::map<std::string, int> calls;
};

// One output against its float64 reference (accuracy.h).
bench::Accuracy MeasureOutput(const KilnGraph& graph, int k, const Tensor& got) {
  return bench::MeasureAccuracy(got, graph.reference64[k], graph.reduction_lengths[k]);
}

// Checks every output of both variants on both runtimes against eager's in
// float64; the worst errors go into graph.accuracy.
absl::Status CheckKilnGraph(KilnGraph& graph) {
  for (int t = 0; t < 2; ++t) {
    CompiledGraph& compiled = *graph.compiled[t];
    ASSIGN_OR_RETURN(const std::vector<Tensor> allocated, compiled.Run(graph.input_views));
    RETURN_IF_ERROR(compiled.Run(graph.input_views, graph.output_views[t]));
    if (static_cast<int>(allocated.size()) != graph.reference.outputs_size()) {
      return absl::InternalError(absl::StrCat("Kiln returned ", allocated.size(),
                                              " outputs; eager ", graph.reference.outputs_size()));
    }
    for (int k = 0; k < graph.reference.outputs_size(); ++k) {
      const std::string what = absl::StrCat(graph.name, " output ", k, " (", t + 1, " thread");
      const bench::Accuracy allocating = MeasureOutput(graph, k, allocated[k]);
      const bench::Accuracy preallocated = MeasureOutput(graph, k, graph.outputs[t][k]);
      graph.accuracy.Merge(allocating);
      graph.accuracy.Merge(preallocated);
      RETURN_IF_ERROR(bench::CheckAccuracy(absl::StrCat(what, ", allocating)"), allocating));
      RETURN_IF_ERROR(bench::CheckAccuracy(absl::StrCat(what, ", preallocated)"), preallocated));
    }
  }
  return absl::OkStatus();
}

// The hand-written baselines of `graph` at 1 thread (hand_kernels.h), each
// checked against eager's output the first time, into Kiln's preallocated
// output. softmax: AVX-512 intrinsics with vscalefps ("scalef") and with
// Kiln's scaling ("kiln_math"). tail: streaming stores ("streaming"), and
// each of Kiln and streaming stores followed by a pass that reads the
// output, as the next op would ("kiln_then_sum", "streaming_then_sum").
std::vector<std::pair<std::string, std::function<void()>>> HandBaselines(KilnGraph& graph) {
  const float* x = graph.inputs[0].data<float>();
  float* y = graph.outputs[0][0].data<float>();
  const int64_t n = graph.inputs[0].NumElements();
  std::vector<std::pair<std::string, std::function<void()>>> baselines;
  if (graph.name == "softmax") {
    const int64_t cols = graph.inputs[0].sizes().back();
    for (int scalef : {1, 0}) {
      baselines.emplace_back(scalef ? "scalef" : "kiln_math",
                             [=] { KilnBenchSoftmaxRows(x, y, n / cols, cols, scalef); });
    }
  } else if (graph.name == "tail") {
    CompiledGraph* compiled = graph.compiled[0].get();
    const std::vector<TensorView>* inputs = &graph.input_views;
    const std::vector<TensorView>* outputs = &graph.output_views[0];
    baselines.emplace_back("streaming", [=] { KilnBenchTailStreaming(x, y, n); });
    baselines.emplace_back("kiln_then_sum", [=] {
      compiled->Run(*inputs, *outputs).IgnoreError();
      KilnBenchSum(y, n);  // another translation unit: not optimized away
    });
    baselines.emplace_back("streaming_then_sum", [=] {
      KilnBenchTailStreaming(x, y, n);
      KilnBenchSum(y, n);
    });
  }
  return baselines;
}

// Runs each hand-written baseline once and checks its output as Kiln's is
// checked; a wrong one leaves the graph without hand-written figures.
absl::Status CheckHandBaselines(KilnGraph& graph) {
  for (auto& [name, fn] : HandBaselines(graph)) {
    fn();
    RETURN_IF_ERROR(bench::CheckAccuracy(absl::StrCat(graph.name, " hand-written ", name),
                                         MeasureOutput(graph, 0, graph.outputs[0][0])));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KilnGraph>> LoadKilnGraph(const std::string& name, Client& client,
                                                         Runtime* runtimes[2]) {
  auto graph = std::make_unique<KilnGraph>();
  graph->name = name;
  ASSIGN_OR_RETURN(const std::string graph_path, Runfile(kTraced + name + ".json", kTarget));
  ASSIGN_OR_RETURN(const std::string ref_path, Runfile(kTraced + name + ".ref.json", kTarget));
  ASSIGN_OR_RETURN(const kiln::v1::Graph proto, ReadGraphFile(graph_path));
  ASSIGN_OR_RETURN(graph->reference, ReadReferenceFile(ref_path));
  ASSIGN_OR_RETURN(const std::string ref64_path, Runfile(kTraced + name + ".ref64.json", kTarget));
  ASSIGN_OR_RETURN(const kiln::v1::Reference reference64, ReadReferenceFile(ref64_path));
  ASSIGN_OR_RETURN(graph->reduction_lengths, bench::ReductionLengths(proto));
  if (reference64.outputs_size() != graph->reference.outputs_size() ||
      graph->reduction_lengths.size() != static_cast<size_t>(reference64.outputs_size())) {
    return absl::InternalError(absl::StrCat(ref64_path, " has ", reference64.outputs_size(),
                                            " outputs; the graph ",
                                            graph->reduction_lengths.size()));
  }
  for (const auto& data : reference64.outputs()) {
    ASSIGN_OR_RETURN(const Tensor tensor, ToTensor(data));
    graph->reference64.push_back(bench::ToDoubles(tensor));
  }
  for (const auto& data : graph->reference.inputs()) {
    ASSIGN_OR_RETURN(Tensor tensor, ToTensor(data));
    graph->inputs.push_back(std::move(tensor));
  }
  for (const Tensor& input : graph->inputs) graph->input_views.push_back(input.view());
  for (int t = 0; t < 2; ++t) {
    graph->compiled[t] =
        std::make_unique<CompiledGraph>(&client, proto, kiln::v1::CompileOptions(), runtimes[t]);
    // Zero-filled by the constructor: the pages exist before the first call.
    for (const auto& data : graph->reference.outputs()) {
      graph->outputs[t].emplace_back(
          data.dtype(), std::vector<int64_t>(data.sizes().begin(), data.sizes().end()));
    }
    for (const Tensor& output : graph->outputs[t]) graph->output_views[t].push_back(output.view());
  }
  for (int t = 0; t < 2; ++t) {
    auto prepared = graph->compiled[t]->Prepare();
    if (!prepared.ok()) {
      graph->error = absl::StrCat("compile failed: ", prepared.status().message());
      return graph;
    }
  }
  const absl::Status checked = CheckKilnGraph(*graph);
  if (!checked.ok()) graph->error = absl::StrCat("wrong output: ", checked.message());
  // What the hand-written kernels assume of their buffers (hand_kernels.h).
  const Tensor& input = graph->inputs[0];
  const int64_t width = input.sizes().empty() ? 0 : input.sizes().back();
  const bool fits = input.dtype() == kiln::v1::FLOAT32 &&
                    (name == "softmax" ? width % 64 == 0 : input.NumElements() % 16 == 0) &&
                    reinterpret_cast<uintptr_t>(input.data<float>()) % 64 == 0 &&
                    reinterpret_cast<uintptr_t>(graph->outputs[0][0].data<float>()) % 64 == 0;
  const bool has_baselines = !HandBaselines(*graph).empty();
  graph->hand = KilnBenchHasAvx512() && checked.ok() && fits && has_baselines;
  if (has_baselines && !KilnBenchHasAvx512()) {
    graph->hand_error =
        "not measured: this CPU lacks AVX-512 (F, DQ, BW, VL), which the hand-written baselines "
        "are written in";
  }
  if (graph->hand) {
    const absl::Status hand = CheckHandBaselines(*graph);
    if (!hand.ok()) {
      graph->hand = false;
      graph->hand_error = std::string(hand.message());
    }
  }
  return graph;
}

// One eager configuration's process.
struct EagerSide {
  EagerConfig config;
  std::unique_ptr<LineProcess> process;  // null when unavailable
  std::string error;
  // Graphs whose eager output failed its float64 check: not timed here.
  std::map<std::string, std::string> wrong;

  // One batch of `calls` calls of `graph` (variant alloc or out).
  absl::StatusOr<Batch> Time(const std::string& graph, const char* variant, int calls) {
    ASSIGN_OR_RETURN(const std::string line,
                     process->Ask(absl::StrCat(graph, " ", variant, " ", calls)));
    if (absl::StartsWith(line, "error ")) {
      return absl::InternalError(absl::StrCat("eager_kernels.py: ", line.substr(6)));
    }
    const Fields fields = ParseFields(line);
    ASSIGN_OR_RETURN(const double ns, NumberField(fields, "ns"));
    ASSIGN_OR_RETURN(const double minflt, NumberField(fields, "minflt"));
    // With 2 threads, Debian's OpenBLAS pool spin-waits for ~100 ms after
    // the last GEMM: wait until the process is idle, so that its spinning
    // thread does not take a core from whatever is timed next.
    if (config.threads > 1) Settle();
    return Batch{ns, minflt};
  }

  // Returns when the process's CPU time has not moved for 30 ms (at most
  // 1 s). CPU time comes in 10 ms ticks.
  void Settle() {
    const int64_t deadline = NowNs() + 1000000000LL;
    int64_t last = bench::CpuTicks(process->pid()).value_or(0);
    int quiet = 0;
    while (quiet < 3 && NowNs() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
      const int64_t now = bench::CpuTicks(process->pid()).value_or(0);
      quiet = now == last ? quiet + 1 : 0;
      last = now;
    }
  }
};

// Eager's outputs, as eager_kernels.py measured them against the float64
// references (`accuracy_NAME_K=ABS,REL` in its ready line), checked with
// the bound Kiln's are checked with. Eager at 1 thread with its best
// dispatch is recorded as NAME_eager_max_abs_err / _max_rel_err.
void CheckEagerAccuracy(EagerSide& side, const std::string& side_name,
                        const std::vector<std::unique_ptr<KilnGraph>>& graphs, Samples& samples) {
  const Fields& ready = side.process->facts();
  for (const auto& graph : graphs) {
    double worst_abs = 0, worst_rel = 0;
    bool reported = false;
    for (size_t k = 0; k < graph->reduction_lengths.size(); ++k) {
      const auto it = ready.find(absl::StrCat("accuracy_", graph->name, "_", k));
      if (it == ready.end()) continue;
      const std::vector<std::string> parts = absl::StrSplit(it->second, ',');
      double abs_err, rel_err;
      if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &abs_err) ||
          !absl::SimpleAtod(parts[1], &rel_err)) {
        continue;
      }
      reported = true;
      worst_abs = std::max(worst_abs, abs_err);
      worst_rel = std::max(worst_rel, rel_err);
      const double bound =
          bench::ToleranceBound(graph->reference.outputs(k).dtype(), graph->reduction_lengths[k]);
      if (!(rel_err <= bound)) {
        side.wrong[graph->name] = absl::StrFormat(
            "eager output %d: max_rel_err %.3g beyond %.3g (max_abs_err %.3g) against float64", k,
            rel_err, bound, abs_err);
      }
    }
    if (!reported) side.wrong[graph->name] = "eager_kernels.py reported no accuracy";
    if (side_name == "eager" && reported) {
      samples[graph->name + "_eager_max_abs_err"].push_back(worst_abs);
      samples[graph->name + "_eager_max_rel_err"].push_back(worst_rel);
    }
  }
}

absl::StatusOr<std::vector<EagerSide>> StartEager(
    const std::string& python, const std::string& script, const std::string& workloads,
    const std::string& traced, const std::vector<std::unique_ptr<KilnGraph>>& graphs, Fields& facts,
    Samples& samples) {
  std::vector<EagerSide> sides;
  for (const EagerConfig& config : kEagerConfigs) {
    std::vector<std::string> argv = {python, script, workloads, traced};
    for (const std::string& graph : SelectedGraphs()) {
      if (!config.fresh_heap || graph == "tail") argv.push_back(graph);
    }
    if (argv.size() == 4) continue;  // no graph for it
    const std::string threads = absl::StrCat(config.threads);
    EnvChanges env = {
        {"OPENBLAS_NUM_THREADS", threads},       {"OMP_NUM_THREADS", threads},
        {"KILN_NUM_THREADS", std::nullopt},      {"OMP_WAIT_POLICY", std::nullopt},
        {"ATEN_CPU_CAPABILITY", std::nullopt},   {"MALLOC_MMAP_THRESHOLD_", std::nullopt},
        {"MALLOC_TRIM_THRESHOLD_", std::nullopt}};
    if (config.threads > 1) env["OMP_WAIT_POLICY"] = "PASSIVE";
    // ATen takes the variable on trust: avx512 on a CPU without it dies of
    // an illegal instruction. There, "eager" is the default dispatch too.
    if (config.avx512 && KilnBenchHasAvx512()) env["ATEN_CPU_CAPABILITY"] = "avx512";
    if (config.fresh_heap) {
      // glibc's defaults; setting them stops glibc from raising them.
      env["MALLOC_MMAP_THRESHOLD_"] = "131072";
      env["MALLOC_TRIM_THRESHOLD_"] = "131072";
    }
    const std::string name = absl::StrCat(config.name, ThreadSuffix(config.threads));
    absl::FPrintF(stderr, "kernels: starting %s (import torch, load the references)...\n", name);
    EagerSide side{config, nullptr, ""};
    auto process = LineProcess::Start(argv, "eager_kernels.py", env);
    if (process.ok()) {
      side.process = std::move(*process);
      const Fields& ready = side.process->facts();
      auto fact = [&](const char* key) {
        return ready.count(key) != 0 ? ready.at(key) : std::string("?");
      };
      facts[name] = absl::StrFormat(
          "torch %s, capability %s, torch threads %s, OPENBLAS_NUM_THREADS=%s "
          "OMP_NUM_THREADS=%s OMP_WAIT_POLICY=%s ATEN_CPU_CAPABILITY=%s%s",
          fact("torch"), fact("capability"), fact("threads"), fact("OPENBLAS_NUM_THREADS"),
          fact("OMP_NUM_THREADS"), fact("OMP_WAIT_POLICY"), fact("ATEN_CPU_CAPABILITY"),
          config.fresh_heap ? " MALLOC_MMAP_THRESHOLD_=MALLOC_TRIM_THRESHOLD_=131072" : "");
      facts[name + "_libblas"] = fact("libblas");
      facts[name + "_openblas"] = fact("openblas");
      CheckEagerAccuracy(side, name, graphs, samples);
      for (const auto& [graph, reason] : side.wrong) {
        facts[absl::StrCat(name, "_", graph)] = absl::StrCat("not measured: ", reason);
        absl::FPrintF(stderr, "kernels: %s %s not measured: %s\n", name, graph, reason);
      }
    } else {
      side.error = std::string(process.status().message());
      facts[name] = absl::StrCat("not measured: ", side.error);
      absl::FPrintF(stderr, "kernels: %s not measured: %s\n", name, side.error);
    }
    sides.push_back(std::move(side));
  }
  return sides;
}

// y = x over the tail's input and preallocated output (pre-faulted, the
// buffers Kiln's preallocated tail uses), on the runtime's pool at 2 threads.
Batch TimeCopy(const KilnGraph& tail, int t, Runtime& runtime, int calls) {
  const float* x = tail.inputs[0].data<float>();
  float* y = tail.outputs[t][0].data<float>();
  const int64_t n = tail.inputs[0].NumElements();
  auto copy = [&] {
    if (runtime.pool().threads() == 1) {
      KilnBenchCopyFloats(x, y, n);
    } else {
      runtime.pool().ParallelFor(n, (n + runtime.pool().threads() - 1) / runtime.pool().threads(),
                                 [&](int64_t begin, int64_t end) {
                                   KilnBenchCopyFloats(x + begin, y + begin, end - begin);
                                 });
    }
  };
  copy();
  return TimeBatch(calls, copy);
}

// ------------------------------------------------------------------ rounds

// One round's batches, by name: "kiln_alloc_1t"... "eager_default_out_2t", "copy_1t".
using RoundBatches = std::map<std::string, Batch>;

std::string BatchName(const std::string& side, const std::string& variant, int threads) {
  return absl::StrCat(side, "_", variant, "_", threads, "t");
}

// Times every side of `graph` once. Kiln's two variants swap places every
// other round: whichever runs first after an eager batch pays for what
// eager left behind (caches, the other core).
absl::Status TimeGraph(KilnGraph& graph, std::vector<EagerSide>& eager, Runtime* runtimes[2],
                       int min_calls, int round, RoundBatches& batches) {
  const bool tail = graph.name == "tail";
  auto calls_for = [&](const std::string& batch) {
    const auto it = graph.calls.find(batch);
    return it == graph.calls.end() ? min_calls : it->second;
  };
  auto time_eager = [&](const std::string& name, int threads) -> absl::Status {
    for (EagerSide& side : eager) {
      if (side.process == nullptr || side.config.threads != threads || side.config.name != name ||
          side.wrong.count(graph.name) != 0) {
        continue;
      }
      for (const char* variant : {"alloc", "out"}) {
        if (std::string(variant) == "out" && (!tail || side.config.fresh_heap)) continue;
        const std::string batch = BatchName(side.config.name, variant, side.config.threads);
        ASSIGN_OR_RETURN(batches[batch], side.Time(graph.name, variant, calls_for(batch)));
      }
    }
    return absl::OkStatus();
  };
  for (int t = 0; t < 2; ++t) {
    const int threads = t + 1;
    RETURN_IF_ERROR(time_eager("eager", threads));
    if (graph.error.empty()) {
      CompiledGraph& compiled = *graph.compiled[t];
      bool ok = true;
      // Allocating and preallocated in separate batches, each after one
      // untimed call: a freed 16 MiB output faults again and slows what
      // runs right after it.
      auto allocating = [&] {
        ok &= compiled.Run(graph.input_views).ok();
        const std::string batch = BatchName("kiln", "alloc", threads);
        batches[batch] =
            TimeBatch(calls_for(batch), [&] { ok &= compiled.Run(graph.input_views).ok(); });
      };
      auto preallocated = [&] {
        ok &= compiled.Run(graph.input_views, graph.output_views[t]).ok();
        const std::string batch = BatchName("kiln", "prealloc", threads);
        batches[batch] = TimeBatch(calls_for(batch), [&] {
          ok &= compiled.Run(graph.input_views, graph.output_views[t]).ok();
        });
      };
      if (round % 2 == 0) {
        allocating();
        preallocated();
      } else {
        preallocated();
        allocating();
      }
      if (!ok) return absl::InternalError(absl::StrCat("a Run of ", graph.name, " failed"));
      if (tail) {
        const std::string batch = BatchName("copy", "loop", threads);
        batches[batch] = TimeCopy(graph, t, *runtimes[t], calls_for(batch));
      }
      if (graph.hand && threads == 1) {
        for (auto& [name, fn] : HandBaselines(graph)) {
          const std::string batch = BatchName("hand", name, 1);
          fn();
          batches[batch] = TimeBatch(calls_for(batch), fn);
        }
      }
    }
    RETURN_IF_ERROR(time_eager("eager_default", threads));
    // Last: its freed 16 MiB buffers fault again in whatever runs next.
    if (tail) RETURN_IF_ERROR(time_eager("eager_fresh_heap", threads));
  }
  return absl::OkStatus();
}

// Per-round figures of one graph's measures, from its batches.
void RecordMeasures(const KilnGraph& graph, const RoundBatches& batches, Samples& samples) {
  auto find = [&](const std::string& name) -> const Batch* {
    const auto it = batches.find(name);
    return it == batches.end() ? nullptr : &it->second;
  };
  for (const Measure& measure : kMeasures) {
    if (graph.name != measure.graph) continue;
    const std::string key = measure.key;
    const char* eager_variant = measure.out ? "out" : "alloc";
    const char* kiln_variant = measure.out ? "prealloc" : "alloc";
    for (int threads = 1; threads <= 2; ++threads) {
      const std::string suffix = ThreadSuffix(threads);
      const Batch* kiln = find(BatchName("kiln", kiln_variant, threads));
      const Batch* kiln_prealloc = find(BatchName("kiln", "prealloc", threads));
      const Batch* eager = find(BatchName(measure.eager, eager_variant, threads));
      // torch's default dispatch, beside eager at its best.
      const Batch* eager_default = std::string(measure.eager) == "eager"
                                       ? find(BatchName("eager_default", eager_variant, threads))
                                       : nullptr;
      auto record = [&](const std::string& name, const Batch* batch) {
        if (batch == nullptr) return;
        samples[name + "_us"].push_back(batch->median_ns / 1e3);
        samples[name + "_minflt"].push_back(batch->minor_faults_per_call);
      };
      record(key + "_kiln" + suffix, kiln);
      if (!measure.out) record(key + "_kiln_prealloc" + suffix, kiln_prealloc);
      record(key + "_eager" + suffix, eager);
      record(key + "_eager_default" + suffix, eager_default);
      if (kiln != nullptr && eager != nullptr) {
        samples[key + suffix].push_back(eager->median_ns / kiln->median_ns);
      }
      if (kiln != nullptr && eager_default != nullptr) {
        samples[key + "_vs_default" + suffix].push_back(eager_default->median_ns / kiln->median_ns);
      }
      if (!measure.out && kiln_prealloc != nullptr && eager != nullptr) {
        samples[key + "_prealloc" + suffix].push_back(eager->median_ns / kiln_prealloc->median_ns);
      }
      if (measure.out) {
        const Batch* copy = find(BatchName("copy", "loop", threads));
        if (copy != nullptr && kiln != nullptr) {
          samples["copy_bandwidth_fraction" + suffix].push_back(copy->median_ns / kiln->median_ns);
          samples["copy" + suffix + "_us"].push_back(copy->median_ns / 1e3);
          // Bytes read + written per call, over the time.
          const double bytes = 2.0 * graph.inputs[0].NumBytes();
          samples["copy" + suffix + "_gb_s"].push_back(bytes / copy->median_ns);
          samples[key + "_kiln" + suffix + "_gb_s"].push_back(bytes / kiln->median_ns);
        }
      }
    }
  }
  // The hand-written baselines, at 1 thread: as a fraction of Kiln's
  // preallocated time (1: as fast as Kiln; below 1: faster than Kiln).
  const Batch* kiln_pre = find(BatchName("kiln", "prealloc", 1));
  auto hand = [&](const std::string& key, const std::string& name, bool fraction = true) {
    const Batch* batch = find(BatchName("hand", name, 1));
    if (batch == nullptr) return batch;
    samples[key + "_us"].push_back(batch->median_ns / 1e3);
    if (fraction && kiln_pre != nullptr) {
      samples[key + "_fraction"].push_back(batch->median_ns / kiln_pre->median_ns);
    }
    return batch;
  };
  if (graph.name == "softmax") {
    hand("softmax_1024_hand_scalef", "scalef");
    hand("softmax_1024_hand_kiln_math", "kiln_math");
  } else if (graph.name == "tail") {
    const Batch* streaming = hand("tail_2048_out_streaming", "streaming");
    const Batch* eager_out = find(BatchName("eager", "out", 1));
    if (streaming != nullptr && eager_out != nullptr) {
      samples["tail_2048_out_streaming_speedup"].push_back(eager_out->median_ns /
                                                           streaming->median_ns);
    }
    hand("tail_2048_out_kiln_then_sum", "kiln_then_sum", false);
    hand("tail_2048_out_streaming_then_sum", "streaming_then_sum", false);
  }
}

// A cold compile of `graph` with a fresh salt: the Compile RPC, which
// includes codegen, clang + lld in kilnd's compile worker, and the store.
absl::Status TimeColdCompile(Client& client, const kiln::v1::Graph& graph, int round,
                             Samples* samples) {
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = graph;
  request.mutable_options()->set_salt(absl::StrCat("kernels-bench-", getpid(), "-", round));
  const int64_t start = NowNs();
  ASSIGN_OR_RETURN(const kiln::v1::CompileResponse response, client.Compile(request));
  const double ms = MsSince(start);
  if (response.cache_hit()) return absl::InternalError("a salted compile was a cache hit");
  if (samples != nullptr) {
    const std::string key = absl::StrCat(kCompiledGraph, "_compile");
    (*samples)[key + "_ms"].push_back(ms);
    (*samples)[key + "_codegen_ms"].push_back(response.artifact().timings().codegen_ms());
    (*samples)[key + "_compiler_ms"].push_back(response.artifact().timings().compile_ms());
  }
  return absl::OkStatus();
}

// System-wide busy and steal time (clock ticks, /proc/stat), to tell how
// much of the 2 vCPUs other work took during the run.
struct CpuTimes {
  int64_t busy = 0, steal = 0;
};

CpuTimes SystemCpuTimes() {
  CpuTimes times;
  const std::string stat = ReadFile("/proc/stat").value_or("");
  const std::vector<std::string> words =
      absl::StrSplit(stat.substr(0, stat.find('\n')), ' ', absl::SkipEmpty());
  // cpu user nice system idle iowait irq softirq steal ...
  int64_t value[9] = {0};
  for (int i = 1; i < 9 && i < static_cast<int>(words.size()); ++i) {
    if (!absl::SimpleAtoi(words[i], &value[i])) value[i] = 0;
  }
  times.busy = value[1] + value[2] + value[3] + value[6] + value[7];
  times.steal = value[8];
  return times;
}

// This process's and its reaped children's CPU time, in clock ticks.
int64_t OwnCpuTicks() {
  const long hz = sysconf(_SC_CLK_TCK);
  int64_t ticks = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage usage;
    getrusage(who, &usage);
    for (const timeval& t : {usage.ru_utime, usage.ru_stime}) {
      ticks += (t.tv_sec * 1000000LL + t.tv_usec) * hz / 1000000;
    }
  }
  return ticks;
}

// ------------------------------------------------------------------ report

std::string Cell(const Samples& samples, const std::string& key, const char* format = "%.4g") {
  const std::optional<Summary> summary = Summarize(samples, key);
  return summary ? absl::StrFormat(format, summary->median) : "-";
}

std::string Range(const Samples& samples, const std::string& key) {
  const std::optional<Summary> summary = Summarize(samples, key);
  return summary ? absl::StrFormat("%.2f/%.2f/%.2f", summary->min, summary->median, summary->max)
                 : "n/a";
}

std::string Verdict(const Samples& samples, const std::string& key, double target, bool at_most) {
  if (target <= 0) return "";
  const std::optional<Summary> summary = Summarize(samples, key);
  if (!summary) return "n/a";
  const bool met = at_most ? summary->median <= target : summary->median >= target;
  return absl::StrFormat("%s%g %s", at_most ? "<=" : ">=", target, met ? "met" : "MISSED");
}

void PrintTable(const Samples& samples, const Fields& facts) {
  absl::PrintF(
      "\nKiln kernels vs eager PyTorch (float32; times are medians over rounds of "
      "per-batch medians)\n");
  for (const auto& [key, value] : facts) absl::PrintF("  %-24s %s\n", key, value);
  // Times in us; "pre": Kiln into preallocated outputs; "AVX2": eager with
  // torch's default dispatch; speedups are eager / Kiln, per round.
  absl::PrintF("\n%-22s %3s %9s %9s %9s %9s  %-19s %7s %7s  %-13s %s\n", "measure", "thr", "kiln",
               "kiln pre", "eager", "eager AVX2", "speedup min/med/max", "vs AVX2", "pre vs",
               "minflt k/e", "target (1 thread)");
  for (const Measure& measure : kMeasures) {
    for (int threads = 1; threads <= 2; ++threads) {
      const std::string suffix = ThreadSuffix(threads);
      const std::string key = measure.key;
      absl::PrintF("%-22s %3d %9s %9s %9s %9s  %-19s %7s %7s  %-13s %s\n", threads == 1 ? key : "",
                   threads, Cell(samples, key + "_kiln" + suffix + "_us"),
                   measure.out ? "(same)" : Cell(samples, key + "_kiln_prealloc" + suffix + "_us"),
                   Cell(samples, key + "_eager" + suffix + "_us"),
                   Cell(samples, key + "_eager_default" + suffix + "_us"),
                   Range(samples, key + suffix),
                   Cell(samples, key + "_vs_default" + suffix, "%.2f"),
                   measure.out ? "" : Cell(samples, key + "_prealloc" + suffix, "%.2f"),
                   absl::StrCat(Cell(samples, key + "_kiln" + suffix + "_minflt", "%.3g"), "/",
                                Cell(samples, key + "_eager" + suffix + "_minflt", "%.3g")),
                   threads == 1 ? Verdict(samples, key, measure.target, false) : "");
    }
    absl::PrintF("  %s\n", measure.what);
  }
  absl::PrintF("\n%-44s %-24s %s\n", "figure", "min/median/max", "target (1 thread)");
  auto row = [&](const std::string& label, const std::string& key, const std::string& target) {
    absl::PrintF("%-44s %-24s %s\n", label, Range(samples, key), target);
  };
  for (int threads = 1; threads <= 2; ++threads) {
    const std::string suffix = ThreadSuffix(threads);
    const std::string at = threads == 1 ? "" : " (2 threads)";
    row("copy_bandwidth_fraction" + suffix, "copy_bandwidth_fraction" + suffix,
        threads == 1 ? Verdict(samples, "copy_bandwidth_fraction", 0.9, false) : "");
    row("  copy loop, us" + at, "copy" + suffix + "_us", "");
    row("  copy loop, GB/s read+written" + at, "copy" + suffix + "_gb_s", "");
    row("  Kiln tail out=, GB/s read+written" + at, "tail_2048_out_kiln" + suffix + "_gb_s", "");
  }
  absl::PrintF("hand-written baselines, 1 thread (time / Kiln's preallocated time):\n");
  row("  softmax_1024, vscalefps", "softmax_1024_hand_scalef_fraction", "");
  row("    us", "softmax_1024_hand_scalef_us", "");
  row("  softmax_1024, Kiln's exp arithmetic", "softmax_1024_hand_kiln_math_fraction", "");
  row("    us", "softmax_1024_hand_kiln_math_us", "");
  row("  tail_2048_out, streaming stores", "tail_2048_out_streaming_fraction", "");
  row("    us", "tail_2048_out_streaming_us", "");
  row("    speedup over eager out=", "tail_2048_out_streaming_speedup", "");
  row("  Kiln's tail, then a pass reading it, us", "tail_2048_out_kiln_then_sum_us", "");
  row("  streaming tail, then a pass reading it, us", "tail_2048_out_streaming_then_sum_us", "");
  const std::string compile = absl::StrCat(kCompiledGraph, "_compile");
  row(compile + "_ms", compile + "_ms", Verdict(samples, compile + "_ms", 500, true));
  row("  in kilnd: graph -> C++", compile + "_codegen_ms", "");
  row("  in kilnd: C++ -> .so (worker clang+lld)", compile + "_compiler_ms", "");
  row("resnet18_first_call_ms (fresh process, 1 thread)", "resnet18_first_call_ms", "");
  row("  its Warmup before it, ms", "resnet18_warmup_ms", "");
  row("  slowest of its first 16 calls, ms", "resnet18_first_calls_max_ms", "");
  row("  median of the 16 after them, ms", "resnet18_steady_ms", "");
  row("  slowest first call / steady median", "resnet18_first_calls_max_ratio", "");
}

std::string JsonLine(const Samples& samples, const Fields& facts) {
  std::vector<std::string> keys;
  // The headline figures first, in the order of kMeasures.
  for (const Measure& measure : kMeasures) keys.push_back(measure.key);
  keys.push_back("copy_bandwidth_fraction");
  keys.push_back(absl::StrCat(kCompiledGraph, "_compile_ms"));
  keys.push_back("resnet18_first_call_ms");
  for (const auto& [key, values] : samples) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return bench::JsonLine(samples, keys, facts);
}

// --------------------------------------------------------------------- run

// The fresh process of `resnet18_first_call_ms`: connects to the bench's
// kilnd (the artifact is in its cache by then), runs CompiledGraph::Warmup
// as a serving worker does before traffic, then times its first Runs on
// the reference inputs: the first, the slowest of the first 16 and the
// median of the 16 after them. Prints `ready warmup_ms=W first_call_ms=F
// first_calls_max_ms=M steady_ms=S` and waits for EOF.
absl::Status RunFirstCallChild(const std::string& name) {
  ClientOptions options;
  options.socket_path = absl::GetFlag(FLAGS_first_call_socket);
  options.auto_start = false;
  ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(options));
  ASSIGN_OR_RETURN(const std::string path, Runfile(kTraced + name + ".json", kTarget));
  ASSIGN_OR_RETURN(const kiln::v1::Graph graph, ReadGraphFile(path));
  ASSIGN_OR_RETURN(const std::string ref_path, Runfile(kTraced + name + ".ref.json", kTarget));
  ASSIGN_OR_RETURN(const kiln::v1::Reference reference, ReadReferenceFile(ref_path));
  std::vector<Tensor> inputs;
  std::vector<TensorView> views;
  for (const auto& data : reference.inputs()) {
    ASSIGN_OR_RETURN(Tensor tensor, ToTensor(data));
    inputs.push_back(std::move(tensor));
  }
  for (const Tensor& input : inputs) views.push_back(input.view());
  CompiledGraph compiled(client.get(), graph);
  const int64_t warmup_start = NowNs();
  RETURN_IF_ERROR(compiled.Warmup(kiln::v1::WarmupGraph()).status());
  const double warmup_ms = MsSince(warmup_start);
  constexpr int kFirstCalls = 16;
  std::vector<double> ms;
  for (int call = 0; call < 2 * kFirstCalls; ++call) {
    const int64_t start = NowNs();
    RETURN_IF_ERROR(compiled.Run(views).status());
    ms.push_back(MsSince(start));
  }
  const double first_calls_max = *std::max_element(ms.begin(), ms.begin() + kFirstCalls);
  std::vector<double> steady(ms.begin() + kFirstCalls, ms.end());
  std::nth_element(steady.begin(), steady.begin() + kFirstCalls / 2, steady.end());
  absl::PrintF("ready warmup_ms=%.3f first_call_ms=%.3f first_calls_max_ms=%.3f steady_ms=%.3f\n",
               warmup_ms, ms[0], first_calls_max, steady[kFirstCalls / 2]);
  fflush(stdout);
  char line[16];
  while (fgets(line, sizeof(line), stdin) != nullptr) {
  }
  return absl::OkStatus();
}

// resnet18's first calls in a fresh process after Warmup (each round one
// process), into samples["resnet18_first_call_ms"], "_warmup_ms",
// "_first_calls_max_ms", "_steady_ms" and "_first_calls_max_ratio" (the
// slowest of the first 16 calls over the steady median: trials of GEMM
// and convolution ways left to traffic would show there).
absl::Status TimeFirstCall(const std::string& socket, Samples& samples) {
  ASSIGN_OR_RETURN(std::unique_ptr<LineProcess> child,
                   LineProcess::Start({"/proc/self/exe", "--first_call_child=resnet18",
                                       absl::StrCat("--first_call_socket=", socket)},
                                      "first-call process"));
  for (const char* figure : {"first_call_ms", "warmup_ms", "first_calls_max_ms", "steady_ms"}) {
    ASSIGN_OR_RETURN(const double value, NumberField(child->facts(), figure));
    samples[absl::StrCat("resnet18_", figure)].push_back(value);
  }
  samples["resnet18_first_calls_max_ratio"].push_back(
      samples["resnet18_first_calls_max_ms"].back() / samples["resnet18_steady_ms"].back());
  return absl::OkStatus();
}

absl::Status RunBenchmark(bool& kiln_wrong) {
  const int rounds = absl::GetFlag(FLAGS_repetitions);
  if (rounds < 1) return absl::InvalidArgumentError("--repetitions must be at least 1");
  if (rounds < 10) {
    absl::FPrintF(stderr, "kernels: fewer than 10 rounds: not for docs/BENCHMARKS.md\n");
  }
  const int min_calls = std::max(1, absl::GetFlag(FLAGS_min_calls));
  const double batch_ns = absl::GetFlag(FLAGS_batch_ms) * 1e6;
  ASSIGN_OR_RETURN(const bench::KilndBinary kilnd, bench::FindKilnd(kTarget));
  ASSIGN_OR_RETURN(const std::string eager_script,
                   Runfile("tools/bench/eager_kernels.py", kTarget));
  std::string python = absl::GetFlag(FLAGS_python);
  if (python.empty()) {
    ASSIGN_OR_RETURN(python, bench::VenvPython(kTarget));
  }
  ASSIGN_OR_RETURN(const std::string workloads, Runfile("tests/workloads/workloads.py", kTarget));
  ASSIGN_OR_RETURN(const std::string traced_tail, Runfile("tools/bench/traced/tail.json", kTarget));
  const std::string traced = Dirname(traced_tail);

  Fields facts;
  facts["cpu"] = bench::CpuModel();
  facts["openblas_core"] = bench::BlasCore();
  facts["cpus"] = absl::StrCat(sysconf(_SC_NPROCESSORS_ONLN));
  facts["repetitions"] = absl::StrCat(rounds);
  facts["load_before"] = bench::LoadAverage();
  const CpuTimes cpu_before = SystemCpuTimes();
  const int64_t own_before = OwnCpuTicks();
  const int64_t run_start = NowNs();
  facts["kiln"] =
      "Runtime(1) and Runtime(2) in one process (OPENBLAS_NUM_THREADS=OMP_NUM_THREADS="
      "KILN_NUM_THREADS=1: the runtime holds OpenBLAS at one thread during its GEMMs and "
      "splits them across its own pool)";
  const char* gemm_libraries = getenv("KILN_GEMM");
  facts["kiln_gemm"] = absl::StrCat(
      "KILN_GEMM=", gemm_libraries != nullptr ? gemm_libraries : "unset",
      " (unset: OpenBLAS or oneDNN, the faster per shape; openblas: eager's BLAS alone)");

  ASSIGN_OR_RETURN(const bench::ScratchDirectory root, bench::ScratchDirectory::Make());
  ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon,
                   Daemon::Start(kilnd, root.path() + "/w", "worker"));

  Runtime runtime1(1), runtime2(2);
  Runtime* runtimes[2] = {&runtime1, &runtime2};
  facts["kiln_blas"] = bench::MappedLibraries("blas");

  for (const std::string& name : SelectedGraphs()) {
    if (std::find(std::begin(kGraphs), std::end(kGraphs), name) == std::end(kGraphs)) {
      return absl::InvalidArgumentError(absl::StrCat("--graphs: no graph named ", name));
    }
  }
  Samples samples;
  std::vector<std::unique_ptr<KilnGraph>> graphs;
  for (const std::string& name : SelectedGraphs()) {
    absl::FPrintF(stderr, "kernels: compiling and checking %s...\n", name);
    ASSIGN_OR_RETURN(std::unique_ptr<KilnGraph> graph,
                     LoadKilnGraph(name, daemon->client(), runtimes));
    if (!graph->hand_error.empty()) facts[absl::StrCat("hand_", name)] = graph->hand_error;
    if (!graph->error.empty()) {
      facts[absl::StrCat("kiln_", name)] = graph->error;
      absl::FPrintF(stderr, "kernels: %s: %s\n", name, graph->error);
      kiln_wrong = true;
    }
    if (graph->accuracy.bound > 0) {  // measured (it compiled)
      samples[name + "_max_abs_err"].push_back(graph->accuracy.max_abs_err);
      samples[name + "_max_rel_err"].push_back(graph->accuracy.max_rel_err);
      samples[name + "_tolerance"].push_back(graph->accuracy.bound);
    }
    graphs.push_back(std::move(graph));
  }
  ASSIGN_OR_RETURN(const std::string compiled_path,
                   Runfile(absl::StrCat(kTraced, kCompiledGraph, ".json"), kTarget));
  ASSIGN_OR_RETURN(const kiln::v1::Graph compiled_graph, ReadGraphFile(compiled_path));

  ASSIGN_OR_RETURN(std::vector<EagerSide> eager,
                   StartEager(python, eager_script, workloads, traced, graphs, facts, samples));

  for (int round = -1; round < rounds; ++round) {
    absl::FPrintF(stderr, "kernels: round %d of %d%s...\n", round + 1, rounds,
                  round < 0 ? " (warm-up, sizes the batches)" : "");
    RETURN_IF_ERROR(
        TimeColdCompile(daemon->client(), compiled_graph, round, round < 0 ? nullptr : &samples));
    for (auto& graph : graphs) {
      RoundBatches batches;
      RETURN_IF_ERROR(TimeGraph(*graph, eager, runtimes, min_calls, round, batches));
      if (round < 0) {
        int fewest = kMaxCalls, most = min_calls;
        for (const auto& [name, batch] : batches) {
          const int calls = std::clamp(static_cast<int>(batch_ns / std::max(1.0, batch.median_ns)),
                                       min_calls, kMaxCalls);
          graph->calls[name] = calls;
          fewest = std::min(fewest, calls);
          most = std::max(most, calls);
        }
        absl::StrAppend(&facts["calls_per_batch"], facts["calls_per_batch"].empty() ? "" : " ",
                        graph->name, "=", fewest, "..", most);
        continue;
      }
      RecordMeasures(*graph, batches, samples);
    }
    const std::vector<std::string> selected = SelectedGraphs();
    if (round >= 0 && std::find(selected.begin(), selected.end(), "resnet18") != selected.end()) {
      RETURN_IF_ERROR(TimeFirstCall(daemon->socket_path(), samples));
    }
  }
  eager.clear();   // the Python processes exit
  graphs.clear();  // CompiledGraphs go before the Client they use
  RETURN_IF_ERROR(daemon->Stop());

  facts["load_after"] = bench::LoadAverage();
  {
    // After the eager processes and kilnd (with its compile worker) were
    // reaped: their CPU time is in RUSAGE_CHILDREN.
    const CpuTimes cpu_after = SystemCpuTimes();
    const double capacity =
        (NowNs() - run_start) / 1e9 * sysconf(_SC_CLK_TCK) * sysconf(_SC_NPROCESSORS_ONLN);
    const int64_t others = (cpu_after.busy - cpu_before.busy) - (OwnCpuTicks() - own_before);
    facts["other_cpu_share"] = absl::StrFormat("%.2f", std::max<int64_t>(0, others) / capacity);
    facts["steal_share"] = absl::StrFormat("%.3f", (cpu_after.steal - cpu_before.steal) / capacity);
  }
  PrintTable(samples, facts);
  if (absl::GetFlag(FLAGS_json)) absl::PrintF("%s\n", JsonLine(samples, facts));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Kiln's generated kernels vs eager PyTorch at 1 and 2 threads; docs/BENCHMARKS.md says "
      "what each figure means.\n"
      "Usage: bazel run -c opt //tools/bench:kernels -- [--json] [--repetitions=10]");
  // Kiln's side runs with OpenBLAS at one thread (its runtime splits GEMMs
  // over its own pool): set the variables and execute again if needed, as
  // OpenBLAS reads them when it is loaded. Each eager process gets its own.
  kiln::bench::PinThreadsOrReexecute(
      argv, {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "KILN_NUM_THREADS"}, "kernels");
  absl::ParseCommandLine(argc, argv);
  if (const std::string child = absl::GetFlag(FLAGS_first_call_child); !child.empty()) {
    const absl::Status status = kiln::RunFirstCallChild(child);
    if (!status.ok()) absl::PrintF("error %s\n", status.ToString());
    return status.ok() ? 0 : 1;
  }
  bool kiln_wrong = false;
  const absl::Status status = kiln::RunBenchmark(kiln_wrong);
  if (!status.ok()) {
    absl::FPrintF(stderr, "kernels: %s\n", status.ToString());
    return 1;
  }
  if (kiln_wrong) absl::FPrintF(stderr, "kernels: a Kiln kernel failed its check (see above)\n");
  return kiln_wrong ? 1 : 0;
}
