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
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/compiled_graph.h"
#include "client/runtime/runtime.h"
#include "client/tensor.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/kernel_report.h"
#include "tools/bench/kernel_sides.h"
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
using bench::EagerSide;
using bench::Fields;
using bench::kCompiledGraph;
using bench::KilnGraph;
using bench::kMeasures;
using bench::kTraced;
using bench::LineProcess;
using bench::Measure;
using bench::MsSince;
using bench::NowNs;
using bench::NumberField;
using bench::Runfile;
using bench::Samples;
using bench::ThreadSuffix;
using bench::TimeBatch;

constexpr char kTarget[] = "//tools/bench:kernels";
constexpr int kMaxCalls = 5000;

// The graphs, as traced into tools/bench/traced/NAME{,.ref}.json.
constexpr const char* kGraphs[] = {"tail",      "f_1024",   "softmax",    "layer_norm",
                                   "gelu",      "mlp",      "attention",  "transformer_layer",
                                   "mlp_train", "resnet18", "resnet18_b8"};

// --graphs, or every graph.
std::vector<std::string> SelectedGraphs() {
  std::vector<std::string> graphs = absl::GetFlag(FLAGS_graphs);
  if (graphs.empty()) graphs.assign(std::begin(kGraphs), std::end(kGraphs));
  return graphs;
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
        batches[batch] = bench::TimeCopy(graph, t, *runtimes[t], calls_for(batch));
      }
      if (graph.hand && threads == 1) {
        for (auto& [name, fn] : bench::HandBaselines(graph)) {
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
                     bench::LoadKilnGraph(name, daemon->client(), runtimes));
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
                   bench::StartEager(python, eager_script, workloads, traced, SelectedGraphs(),
                                     graphs, facts, samples));

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
  bench::PrintTable(samples, facts);
  if (absl::GetFlag(FLAGS_json)) absl::PrintF("%s\n", bench::JsonLine(samples, facts));
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
