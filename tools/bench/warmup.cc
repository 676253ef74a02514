// //tools/bench:warmup — shape-bucket warmup (docs/WARMUP.md) on the public
// transformer layer traced with sequence S and batch B symbolic
// (//tests/workloads:traced_dynamic), 24 static buckets: B in {1, 2, 4, 8,
// 16, 32} x S in {16, 32, 64, 128}. On a private kilnd with an empty cache:
//   warmup_cold_s, compile_sum_s   `kiln warmup`'s code path (RunWarmup),
//                                  and the sum of kilnd's compile times;
//   warmup_rerun_ms                the same plan again: all hits;
//   first_call_ratio               per bucket, after CompiledGraph::Warmup,
//                                  the first Run over the median warm Run
//                                  (first_call_other_thread_ratio: on a
//                                  thread Warmup did not run on);
//   dispatch_ns_24_buckets         Run minus the kernel called directly,
//                                  with all 24 buckets loaded (buckets
//                                  whose kernel takes under 100 us);
//   interactive_miss_ms_idle,      a cold compile of f, alone and while a
//   interactive_miss_ms_during_warmup  cold warmup runs (a second cache),
//                                  each kilnd past its start-up warm-up;
//   padded_vs_exact                B = 5, S = 64 padded to the B = 8 bucket
//                                  (B marked paddable) over B = 8 exactly
//                                  (padded_vs_symbolic: over B = 5 on the
//                                  symbolic artifact);
//   rss_*                          this process's RSS as one CompiledGraph
//                                  runs 1,000 distinct shapes on its
//                                  symbolic artifact, then after CloseIdle
//                                  and after the next call (scratch trimmed).
#include "tools/kiln/warmup.h"

#include <unistd.h>

#include <sstream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "client/compiled_graph.h"
#include "client/warmup_plan.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "tools/bench/bench_util.h"

ABSL_FLAG(bool, json, false, "Also print every figure as one JSON object on the last line.");
ABSL_FLAG(int, repetitions, 5, "Rounds of the re-run, the interactive misses and dispatch.");

namespace kiln::bench {
namespace {

constexpr char kTarget[] = "//tools/bench:warmup";
constexpr char kGraph[] = "tests/workloads/dynamic/transformer_layer_both.json";
constexpr char kPlan[] = R"({"graphs": [{"graph": "layer.json", "symbols": [
    {"symbol": "B", "powers_of_two": {"from": 1, "to": 32}},
    {"symbol": "S", "powers_of_two": {"from": 16, "to": 128}}]}]})";

absl::Status Warm(Client& client, const std::string& plan) {
  WarmupOptions options;
  options.json = true;
  std::ostringstream out, progress;
  return RunWarmup(plan, client, options, out, progress);
}

// A cold compile of f (a fresh salt), in ms.
absl::StatusOr<double> InteractiveMiss(Client& client, const kiln::v1::Graph& f, int salt) {
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = f;
  request.mutable_options()->set_salt(absl::StrCat("interactive-", salt));
  const int64_t start = NowNs();
  ASSIGN_OR_RETURN(const kiln::v1::CompileResponse response, client.Compile(request));
  if (response.cache_hit()) return absl::InternalError("a salted compile hit");
  return (NowNs() - start) / 1e6;
}

// Until kilnd's start-up warm-up has started its compile workers (one per
// compile job): a daemon that has just started is not what is measured.
absl::Status WaitForWorkers(const Daemon& daemon) {
  for (int i = 0; i < 1000; ++i) {
    if (ChildrenNamed(daemon.pid(), "kiln-compile-wo").size() >= 2) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError("kilnd started fewer than 2 compile workers in 10 s");
}

// This process's resident memory, in MB.
absl::StatusOr<double> RssMb() {
  ASSIGN_OR_RETURN(const double kb, ProcStatusKb(getpid(), "VmRSS"));
  return kb / 1024;
}

// Inputs of the layer at batch `b` and sequence `s`, zero-filled.
std::vector<Tensor> LayerInputs(const kiln::v1::Graph& graph, int64_t b, int64_t s) {
  std::vector<std::vector<int64_t>> sizes = BucketInputSizes(graph, {{"B", b}, {"S", s}});
  std::vector<Tensor> inputs;
  for (int i = 0; i < graph.inputs_size(); ++i) {
    inputs.emplace_back(graph.inputs(i).type().dtype(), std::move(sizes[i]));
  }
  return inputs;
}

std::vector<TensorView> Views(const std::vector<Tensor>& tensors) {
  std::vector<TensorView> views;
  for (const Tensor& tensor : tensors) views.push_back(tensor.view());
  return views;
}

// The median Run of `compiled` at `inputs`, in us.
absl::StatusOr<double> MedianRunUs(CompiledGraph& compiled, const std::vector<Tensor>& inputs) {
  const std::vector<TensorView> views = Views(inputs);
  ASSIGN_OR_RETURN(const std::vector<Tensor> outputs, compiled.Run(views));
  const std::vector<TensorView> output_views = Views(outputs);
  bool ok = true;
  const Batch batch = TimeBatch(200, [&] { ok &= compiled.Run(views, output_views).ok(); });
  if (!ok) return absl::InternalError("a timed Run failed");
  return batch.median_ns / 1e3;
}

// Padding B = 5 up to the warmed B = 8 bucket (S = 64), against that bucket
// run exactly and against B = 5 on the symbolic artifact.
absl::Status MeasurePadding(Client& client, const kiln::v1::Graph& graph,
                            kiln::v1::WarmupGraph buckets, int rounds, Samples& samples) {
  for (kiln::v1::SymbolSizes& sizes : *buckets.mutable_symbols()) {
    sizes.set_paddable(sizes.symbol() == "B");
  }
  CompiledGraph padded(&client, graph);
  RETURN_IF_ERROR(padded.Warmup(buckets).status());
  CompiledGraph symbolic(&client, graph);
  RETURN_IF_ERROR(symbolic.Prepare().status());
  const std::vector<Tensor> five = LayerInputs(graph, 5, 64), eight = LayerInputs(graph, 8, 64);
  for (int round = 0; round < rounds; ++round) {
    ASSIGN_OR_RETURN(const double padded_us, MedianRunUs(padded, five));
    ASSIGN_OR_RETURN(const double exact_us, MedianRunUs(padded, eight));
    ASSIGN_OR_RETURN(const double symbolic_us, MedianRunUs(symbolic, five));
    samples["padded_vs_exact"].push_back(padded_us / exact_us);
    samples["padded_vs_symbolic"].push_back(padded_us / symbolic_us);
    samples["padded_us"].push_back(padded_us);
  }
  return absl::OkStatus();
}

// A long-lived worker: 1,000 distinct shapes through one symbolic artifact,
// then its entries unloaded and its scratch trimmed.
absl::Status MeasureLongLived(Client& client, const kiln::v1::Graph& graph, Samples& samples) {
  CompiledGraph compiled(&client, graph);
  RETURN_IF_ERROR(compiled.Prepare().status());
  RETURN_IF_ERROR(compiled.Run(Views(LayerInputs(graph, 2, 2))).status());
  ASSIGN_OR_RETURN(const double before, RssMb());
  for (int i = 0; i < 1000; ++i) {
    const int64_t s = 2 + i % 40, b = 2 + i / 40;  // up to S = 41, B = 26
    RETURN_IF_ERROR(compiled.Run(Views(LayerInputs(graph, b, s))).status());
  }
  ASSIGN_OR_RETURN(const double after, RssMb());
  compiled.CloseIdle();  // marks: every entry was used since loading
  if (compiled.CloseIdle() != 1) return absl::InternalError("CloseIdle left the artifact");
  ASSIGN_OR_RETURN(const double unloaded, RssMb());
  RETURN_IF_ERROR(compiled.Run(Views(LayerInputs(graph, 2, 2))).status());
  ASSIGN_OR_RETURN(const double trimmed, RssMb());
  samples["rss_mb_before"].push_back(before);
  samples["rss_mb_after_1000_shapes"].push_back(after);
  samples["rss_mb_after_close"].push_back(unloaded);
  samples["rss_mb_after_next_call"].push_back(trimmed);
  return absl::OkStatus();
}

absl::Status Run() {
  const int rounds = absl::GetFlag(FLAGS_repetitions);
  ASSIGN_OR_RETURN(const KilndBinary kilnd, FindKilnd(kTarget));
  ASSIGN_OR_RETURN(const std::string graph_path, Runfile(kGraph, kTarget));
  ASSIGN_OR_RETURN(const std::string f_path, Runfile("examples/f.json", kTarget));
  ASSIGN_OR_RETURN(const kiln::v1::Graph graph, ReadGraphFile(graph_path));
  ASSIGN_OR_RETURN(const kiln::v1::Graph f, ReadGraphFile(f_path));
  ASSIGN_OR_RETURN(ScratchDirectory root, ScratchDirectory::Make());
  ASSIGN_OR_RETURN(const std::string layer_json, ReadFile(graph_path));
  RETURN_IF_ERROR(WriteFileAtomically(root.path() + "/layer.json", layer_json, 0644));
  const std::string plan = root.path() + "/plan.json";
  RETURN_IF_ERROR(WriteFileAtomically(plan, kPlan, 0644));
  Samples samples;
  Fields facts = {{"cpus", absl::StrCat(std::thread::hardware_concurrency())}};

  fprintf(stderr, "warmup: cold warmup of 24 buckets...\n");
  ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon,
                   Daemon::Start(kilnd, root.path() + "/a", "worker"));
  RETURN_IF_ERROR(WaitForWorkers(*daemon));
  Client& client = daemon->client();
  int64_t start = NowNs();
  RETURN_IF_ERROR(Warm(client, plan));
  samples["warmup_cold_s"].push_back((NowNs() - start) / 1e9);
  ASSIGN_OR_RETURN(const kiln::v1::StatsResponse stats, client.Stats());
  samples["compile_sum_s"].push_back(stats.compile_ms_total() / 1e3);
  for (int round = 0; round < rounds; ++round) {
    start = NowNs();
    RETURN_IF_ERROR(Warm(client, plan));
    samples["warmup_rerun_ms"].push_back((NowNs() - start) / 1e6);
  }

  // Before the phases below grow this process's heap.
  fprintf(stderr, "warmup: 1,000 shapes in a long-lived worker...\n");
  RETURN_IF_ERROR(MeasureLongLived(client, graph, samples));

  fprintf(stderr, "warmup: first calls after CompiledGraph::Warmup...\n");
  ASSIGN_OR_RETURN(const kiln::v1::WarmupPlan parsed, ReadWarmupPlan(plan));
  CompiledGraph compiled(&client, graph);
  ASSIGN_OR_RETURN(const CompiledGraph::WarmupResult warmed, compiled.Warmup(parsed.graphs(0)));
  if (warmed.entries != 24) {
    return absl::InternalError(absl::StrCat("Warmup loaded ", warmed.entries, " buckets, not 24"));
  }
  std::vector<std::vector<Tensor>> bucket_inputs;
  for (int64_t b = 1; b <= 32; b *= 2) {
    for (int64_t s = 16; s <= 128; s *= 2) {
      std::vector<std::vector<int64_t>> sizes = BucketInputSizes(graph, {{"B", b}, {"S", s}});
      std::vector<Tensor> inputs;
      for (int i = 0; i < graph.inputs_size(); ++i) {
        inputs.emplace_back(graph.inputs(i).type().dtype(), std::move(sizes[i]));
      }
      bucket_inputs.push_back(std::move(inputs));
    }
  }
  for (const std::vector<Tensor>& inputs : bucket_inputs) {
    std::vector<TensorView> views;
    for (const Tensor& tensor : inputs) views.push_back(tensor.view());
    ASSIGN_OR_RETURN(std::vector<Tensor> outputs, compiled.Run(views));  // outputs to reuse
    std::vector<TensorView> output_views;
    for (const Tensor& tensor : outputs) output_views.push_back(tensor.view());
    // The first call above allocated the outputs; time the first call into
    // them as a serving loop would, against the median of later ones.
    CompiledGraph fresh(&client, graph);
    RETURN_IF_ERROR(fresh.Warmup(parsed.graphs(0)).status());
    start = NowNs();
    RETURN_IF_ERROR(fresh.Run(views, output_views));
    const double first_ns = NowNs() - start;
    bool ok = true;
    const Batch warm = TimeBatch(200, [&] { ok &= fresh.Run(views, output_views).ok(); });
    if (!ok) return absl::InternalError("a warm Run failed");
    samples["first_call_ratio"].push_back(first_ns / warm.median_ns);
    samples["first_call_us"].push_back(first_ns / 1e3);
    samples["warm_call_us"].push_back(warm.median_ns / 1e3);
    // A thread Warmup did not run on: it pays its scratch's first touch.
    double other_ns = 0;
    absl::Status other;
    std::thread([&] {
      const int64_t t0 = NowNs();
      other = fresh.Run(views, output_views);
      other_ns = NowNs() - t0;
    }).join();
    RETURN_IF_ERROR(other);
    samples["first_call_other_thread_ratio"].push_back(other_ns / warm.median_ns);

    // Dispatch where it can be told from the kernel's own noise.
    if (warm.median_ns > 100e3) continue;
    ASSIGN_OR_RETURN(const CompiledGraph::DirectCall direct, fresh.DirectCallForBenchmark(views));
    std::vector<void*> input_pointers, output_pointers;
    for (const TensorView& view : views) input_pointers.push_back(view.data);
    for (const TensorView& view : output_views) output_pointers.push_back(view.data);
    std::vector<double> direct_ns(2000), run_ns(2000);
    int code = 0;
    for (int i = 0; i < 2000; ++i) {
      const int64_t t0 = NowNs();
      code |= direct.run(direct.runtime, nullptr, input_pointers.data(), output_pointers.data(),
                         direct.scratch);
      const int64_t t1 = NowNs();
      ok &= fresh.Run(views, output_views).ok();
      direct_ns[i] = t1 - t0;
      run_ns[i] = NowNs() - t1;
    }
    if (code != 0 || !ok) return absl::InternalError("a call failed in the dispatch phase");
    samples["dispatch_ns_24_buckets"].push_back(Median(run_ns) - Median(direct_ns));
  }

  fprintf(stderr, "warmup: interactive misses, idle and during a cold warmup...\n");
  for (int round = 0; round < rounds; ++round) {
    ASSIGN_OR_RETURN(std::unique_ptr<Daemon> other,
                     Daemon::Start(kilnd, absl::StrCat(root.path(), "/b", round), "worker"));
    RETURN_IF_ERROR(WaitForWorkers(*other));
    // The first compile may still meet a worker's start-up warm-up; the
    // second is the idle figure, on this same kilnd.
    RETURN_IF_ERROR(InteractiveMiss(other->client(), f, 3 * round).status());
    ASSIGN_OR_RETURN(const double idle, InteractiveMiss(other->client(), f, 3 * round + 1));
    samples["interactive_miss_ms_idle"].push_back(idle);
    absl::Status warmup = absl::UnknownError("not run");
    std::thread thread([&] { warmup = Warm(other->client(), plan); });
    while (true) {  // once compiles are running
      ASSIGN_OR_RETURN(const kiln::v1::StatsResponse busy, other->client().Stats());
      if (busy.compiles() > 2) break;
      absl::SleepFor(absl::Milliseconds(1));
    }
    absl::StatusOr<double> during = InteractiveMiss(other->client(), f, 3 * round + 2);
    thread.join();
    RETURN_IF_ERROR(warmup);
    RETURN_IF_ERROR(during.status());
    samples["interactive_miss_ms_during_warmup"].push_back(*during);
  }

  fprintf(stderr, "warmup: padding...\n");
  RETURN_IF_ERROR(MeasurePadding(client, graph, parsed.graphs(0), rounds, samples));

  const std::vector<std::pair<std::string, std::string>> figures = {
      {"warmup_cold_s", "24 buckets on an empty cache, kiln warmup's code path"},
      {"compile_sum_s", "  sum of kilnd's compile times (over warmup_cold_s: core use)"},
      {"warmup_rerun_ms", "the same plan again: all hits (target <= 200)"},
      {"first_call_ratio", "per bucket: first Run after Warmup / median warm Run (target <= 2)"},
      {"first_call_us", "  the first Run"},
      {"first_call_other_thread_ratio", "  the same for a thread Warmup did not run on"},
      {"warm_call_us", "  the median warm Run"},
      {"dispatch_ns_24_buckets", "Run minus the direct call, 24 loaded; buckets under 100 us"},
      {"interactive_miss_ms_idle", "cold compile of f, kilnd idle"},
      {"interactive_miss_ms_during_warmup", "the same during a cold warmup (target <= 2x idle)"},
      {"padded_vs_exact", "B=5 S=64 padded to the B=8 bucket / B=8 exactly"},
      {"padded_vs_symbolic", "  / B=5 on the symbolic artifact"},
      {"padded_us", "  the padded Run"},
      {"rss_mb_before", "process RSS, symbolic artifact loaded"},
      {"rss_mb_after_1000_shapes", "  after 1,000 distinct (B, S) on it"},
      {"rss_mb_after_close", "  after CloseIdle"},
      {"rss_mb_after_next_call", "  after the next (small) call: scratch trimmed"},
  };
  printf("\nKiln warmup: transformer layer, 24 static buckets (B 1..32 x S 16..128)\n\n");
  printf("%-36s %10s %10s %10s  %s\n", "figure", "min", "median", "max", "meaning");
  std::vector<std::string> keys;
  for (const auto& [key, meaning] : figures) {
    keys.push_back(key);
    const std::optional<Summary> summary = Summarize(samples, key);
    if (!summary.has_value()) continue;
    printf("%-36s %10.4g %10.4g %10.4g  %s\n", key.c_str(), summary->min, summary->median,
           summary->max, meaning.c_str());
  }
  if (absl::GetFlag(FLAGS_json)) printf("%s\n", JsonLine(samples, keys, facts).c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  kiln::bench::PinThreadsOrReexecute(argv, {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}, "warmup");
  absl::SetProgramUsageMessage("Measures shape-bucket warmup (docs/WARMUP.md).");
  absl::ParseCommandLine(argc, argv);
  return kiln::bench::ExitStatus("warmup", kiln::bench::Run());
}
