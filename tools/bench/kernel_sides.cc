#include "tools/bench/kernel_sides.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "proto/graph_file.h"
#include "tools/bench/hand_kernels.h"
#include "tools/reference/tensor_data.h"

namespace kiln::bench {
namespace {

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

}  // namespace

std::string ThreadSuffix(int threads) {
  return threads == 1 ? "" : absl::StrCat("_", threads, "t");
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

namespace {

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

}  // namespace

absl::StatusOr<std::unique_ptr<KilnGraph>> LoadKilnGraph(const std::string& name, Client& client,
                                                         Runtime* runtimes[2]) {
  auto graph = std::make_unique<KilnGraph>();
  graph->name = name;
  ASSIGN_OR_RETURN(const std::string graph_path, Runfile(kTraced + name + ".json", kKernelsTarget));
  ASSIGN_OR_RETURN(const std::string ref_path,
                   Runfile(kTraced + name + ".ref.json", kKernelsTarget));
  ASSIGN_OR_RETURN(const kiln::v1::Graph proto, ReadGraphFile(graph_path));
  ASSIGN_OR_RETURN(graph->reference, ReadReferenceFile(ref_path));
  ASSIGN_OR_RETURN(const std::string ref64_path,
                   Runfile(kTraced + name + ".ref64.json", kKernelsTarget));
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

absl::StatusOr<Batch> EagerSide::Time(const std::string& graph, const char* variant, int calls) {
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

void EagerSide::Settle() {
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

absl::StatusOr<std::vector<EagerSide>> StartEager(
    const std::string& python, const std::string& script, const std::string& workloads,
    const std::string& traced, const std::vector<std::string>& selected,
    const std::vector<std::unique_ptr<KilnGraph>>& graphs, Fields& facts, Samples& samples) {
  std::vector<EagerSide> sides;
  for (const EagerConfig& config : kEagerConfigs) {
    std::vector<std::string> argv = {python, script, workloads, traced};
    for (const std::string& graph : selected) {
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

}  // namespace kiln::bench
