// e2e: Kiln's end-to-end benchmark. What each figure means, how to run it
// and the latest figures are in docs/BENCHMARKS.md.
//
// One run starts two private kilnds (compile worker, clang++ subprocess) and
// measures f = relu(x @ x.T + 1) at 64x64 float32 in phases. Within a phase
// the baseline and Kiln alternate (ABAB...), one pair per round, for
// --repetitions rounds:
//   cold compile    Compile RPC with a fresh salt: subprocess kilnd vs worker kilnd
//   fresh process   a child that reports from main vs one that connects, hits
//                   and runs f once (this binary re-executed with --child)
//   warm call       eager PyTorch (eager.py, alive on a pipe) vs Run
//   dispatch        a direct kiln_run call vs Run on the same buffers, call by call
// then memory: the idle daemon's and its compile worker's RSS, and what a
// second process loading the same artifact adds to the first (smaps).
//
// Output: a table; with --json, also one JSON object as the last line. Each
// figure is under its own key as the median over rounds; figures measured in
// more than one round also have `<key>_min` and `<key>_max`. A figure that
// could not be measured (no torch) is null.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/compiled_graph.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/e2e_phases.h"

ABSL_FLAG(bool, json, false, "Also print every figure as one JSON object on the last line.");
ABSL_FLAG(int, repetitions, 12,
          "Rounds per phase, baseline and Kiln alternating (the documented figures use >= 10).");
ABSL_FLAG(int, warm_calls, 5000, "Timed calls per side per round in the warm-call phase.");
ABSL_FLAG(int, dispatch_calls, 10000,
          "Timed calls per side per round in the dispatch phase (raised so that all rounds "
          "together make at least 10^5).");
ABSL_FLAG(std::string, python, "",
          "Interpreter for the eager PyTorch baseline (default: the checkout's .venv, from "
          "runfiles).");
// The bench re-executes itself as the processes it times.
ABSL_FLAG(std::string, child, "", "Internal: run as a timed child (fresh, hold or smaps).");
ABSL_FLAG(std::string, socket, "", "Internal (--child): kilnd's socket.");
ABSL_FLAG(std::string, cache_dir, "", "Internal (--child): kilnd's cache directory.");
ABSL_FLAG(std::string, graph, "", "Internal (--child): the graph file.");

namespace kiln {
namespace {

constexpr int kMinDispatchCalls = 100000;  // per side, over all rounds
constexpr char kTarget[] = "//tools/bench:e2e";

using bench::CpuModel;
using bench::Daemon;
using bench::Eager;
using bench::Fields;
using bench::kSize;
using bench::LoadAverage;
using bench::MappedLibraries;
using bench::Runfile;
using bench::Samples;
using bench::Summarize;
using bench::Summary;

// ------------------------------------------------------------------ report

struct Figure {
  const char* key;
  const char* target;  // "" when there is none
  const char* meaning;
};

// Table rows and JSON keys, in order. Indented meanings break down the row
// above them.
constexpr Figure kFigures[] = {
    {"cold_compile_ms", "<= 100", "cold compile, compile worker: Compile RPC, fresh salt"},
    {"cold_compile_codegen_ms", "", "  in kilnd: graph -> C++"},
    {"cold_compile_compiler_ms", "", "  in kilnd: C++ -> .so (worker clang + lld)"},
    {"cold_compile_subprocess_ms", "", "cold compile, clang++ subprocess per compile"},
    {"cold_compile_subprocess_compiler_ms", "", "  in kilnd: C++ -> .so (clang++ process)"},
    {"fresh_hit_ms", "<= 3", "fresh process: Client::Open -> first Run result (hit)"},
    {"fresh_hit_connect_ms", "", "  Client::Open (lazy: a local hit never connects)"},
    {"fresh_hit_fetch_ms", "",
     "  request alias (or key in-process) + local index (or Compile RPC)"},
    {"fresh_hit_open_ms", "", "  SHA-256 of the .so + dlopen"},
    {"fresh_hit_other_ms", "", "  the rest of Prepare (CompiledGraph, request)"},
    {"fresh_hit_first_run_ms", "", "  first Run"},
    {"fresh_hit_unaliased_ms", "", "fresh hit of a request kilnd has not answered: one RPC"},
    {"fresh_hit_unaliased_fetch_ms", "", "  of which the RPC"},
    {"fresh_process_ms", "", "fresh process: posix_spawn -> first result, timed by the parent"},
    {"process_start_ms", "", "  baseline: posix_spawn -> main of the same binary"},
    {"child_read_graph_ms", "", "  flags + reading examples/f.json (not in fresh_hit)"},
    {"warm_call_us", "", "Run(inputs, preallocated outputs) from C++"},
    {"warm_call_alloc_us", "", "Run(inputs), outputs allocated"},
    {"eager_call_us", "", "eager torch.relu(x @ x.T + 1.0) from Python"},
    {"eager_out_call_us", "", "eager mm(out=) + add_ + relu_, no allocation"},
    {"warm_call_minflt", "", "minor page faults per call: Run, preallocated"},
    {"warm_call_alloc_minflt", "", "minor page faults per call: Run, allocating"},
    {"eager_call_minflt", "", "minor page faults per call: eager"},
    {"eager_out_call_minflt", "", "minor page faults per call: eager, out="},
    {"direct_call_us", "", "kiln_run called directly (the kernel alone)"},
    {"dispatch_ns", "<= 500", "Run minus the direct call, same buffers"},
    {"daemon_rss_mb", "", "VmRSS of the idle kilnd (compile worker mode)"},
    {"daemon_subprocess_rss_mb", "", "VmRSS of the idle kilnd (subprocess mode)"},
    {"worker_rss_mb", "", "VmRSS of its kiln-compile-worker (largest)"},
    {"workers", "", "kiln-compile-worker processes"},
    {"second_client_artifact_private_kb", "", "2nd process: Private_Clean+Dirty of the .so"},
    {"second_client_artifact_private_dirty_kb", "", "  of which Private_Dirty (relocations)"},
    {"second_client_artifact_rss_kb", "", "  Rss of the .so mappings"},
    {"second_client_artifact_pss_kb", "", "  Pss of the .so mappings"},
    {"f_max_abs_err", "", "Run's output vs f in float64: largest |error|"},
    {"f_max_rel_err", "", "  largest |error| / (|ref| + mean |ref|)"},
    {"f_tolerance", "", "  its bound, 16 * eps(float32) * sqrt(64)"},
};

void PrintTable(const Samples& samples, const Fields& facts) {
  absl::PrintF("\nKiln end-to-end: f = relu(x @ x.T + 1), %dx%d float32\n", kSize, kSize);
  for (const auto& [key, value] : facts) absl::PrintF("  %-14s %s\n", key, value);
  absl::PrintF("\n%-40s %10s %10s %10s  %-7s %s\n", "figure", "min", "median", "max", "target",
               "meaning");
  for (const Figure& figure : kFigures) {
    const std::optional<Summary> summary = Summarize(samples, figure.key);
    if (!summary) {
      absl::PrintF("%-40s %10s %10s %10s  %-7s %s\n", figure.key, "-", "n/a", "-", figure.target,
                   figure.meaning);
    } else if (summary->count == 1) {
      absl::PrintF("%-40s %10s %10.4g %10s  %-7s %s\n", figure.key, "", summary->median, "",
                   figure.target, figure.meaning);
    } else {
      absl::PrintF("%-40s %10.4g %10.4g %10.4g  %-7s %s\n", figure.key, summary->min,
                   summary->median, summary->max, figure.target, figure.meaning);
    }
  }
}

std::string JsonLine(const Samples& samples, const Fields& facts) {
  std::vector<std::string> keys;
  for (const Figure& figure : kFigures) keys.push_back(figure.key);
  return bench::JsonLine(samples, keys, facts);
}

// --------------------------------------------------------------------- run

absl::Status RunBenchmark() {
  const int rounds = absl::GetFlag(FLAGS_repetitions);
  if (rounds < 1) return absl::InvalidArgumentError("--repetitions must be at least 1");
  if (rounds < 10) absl::FPrintF(stderr, "e2e: fewer than 10 rounds: not for docs/BENCHMARKS.md\n");
  const int warm_calls = std::max(1, absl::GetFlag(FLAGS_warm_calls));
  const int dispatch_calls =
      std::max(absl::GetFlag(FLAGS_dispatch_calls), (kMinDispatchCalls + rounds - 1) / rounds);
  const std::string self = ExecutablePath();
  ASSIGN_OR_RETURN(const bench::KilndBinary kilnd, bench::FindKilnd(kTarget));
  ASSIGN_OR_RETURN(const std::string graph_path, Runfile("examples/f.json", kTarget));
  ASSIGN_OR_RETURN(const std::string eager_script, Runfile("tools/bench/eager.py", kTarget));
  std::string python = absl::GetFlag(FLAGS_python);
  if (python.empty()) {
    ASSIGN_OR_RETURN(python, bench::VenvPython(kTarget));
  }
  ASSIGN_OR_RETURN(const kiln::v1::Graph graph, ReadGraphFile(graph_path));

  Fields facts;
  facts["cpu"] = CpuModel();
  facts["openblas_core"] = bench::BlasCore();
  facts["cpus"] = absl::StrCat(sysconf(_SC_NPROCESSORS_ONLN));
  facts["repetitions"] = absl::StrCat(rounds);
  facts["threads"] = "1 (OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=KILN_NUM_THREADS=1)";
  facts["load_before"] = LoadAverage();

  ASSIGN_OR_RETURN(const bench::ScratchDirectory root, bench::ScratchDirectory::Make());
  ASSIGN_OR_RETURN(std::unique_ptr<Daemon> worker,
                   Daemon::Start(kilnd, root.path() + "/w", "worker"));
  ASSIGN_OR_RETURN(std::unique_ptr<Daemon> subprocess,
                   Daemon::Start(kilnd, root.path() + "/s", "subprocess"));

  Samples samples;
  absl::FPrintF(stderr, "e2e: cold compiles (%d rounds)...\n", rounds);
  RETURN_IF_ERROR(bench::MeasureColdCompile(graph, *subprocess, *worker, rounds, samples));

  // The parent's own copy of f: compiled here, so every child hits.
  CompiledGraph compiled(&worker->client(), graph);
  RETURN_IF_ERROR(compiled.Prepare().status());
  facts["kiln_blas"] = MappedLibraries("blas");
  absl::FPrintF(stderr, "e2e: fresh processes...\n");
  RETURN_IF_ERROR(bench::MeasureFreshProcess(self, graph_path, *worker, rounds, samples));

  absl::FPrintF(stderr, "e2e: starting eager PyTorch (import torch takes ~1 s)...\n");
  auto eager = Eager::Start(python, eager_script);
  if (eager.ok()) {
    for (const char* key : {"torch", "threads", "libblas", "openblas"}) {
      facts[absl::StrCat("eager_", key)] =
          (*eager)->facts().count(key) != 0 ? (*eager)->facts().at(key) : "?";
    }
  } else {
    facts["eager"] = absl::StrCat("not measured: ", eager.status().message());
    absl::FPrintF(stderr, "e2e: eager baseline not measured: %s\n", eager.status().message());
  }
  absl::FPrintF(stderr, "e2e: warm calls (%d per side per round)...\n", warm_calls);
  RETURN_IF_ERROR(bench::MeasureWarmCalls(compiled, eager.ok() ? eager->get() : nullptr, rounds,
                                          warm_calls, samples));
  if (eager.ok()) eager->reset();  // no python process left for the rest

  absl::FPrintF(stderr, "e2e: dispatch (%d calls per side per round)...\n", dispatch_calls);
  RETURN_IF_ERROR(bench::MeasureDispatch(compiled, rounds, dispatch_calls, samples));
  RETURN_IF_ERROR(bench::MeasureSecondClient(self, graph_path, *worker, samples));
  RETURN_IF_ERROR(bench::MeasureMemory(*worker, *subprocess, samples));
  RETURN_IF_ERROR(worker->Stop());
  RETURN_IF_ERROR(subprocess->Stop());

  facts["load_after"] = LoadAverage();
  PrintTable(samples, facts);
  if (absl::GetFlag(FLAGS_json)) absl::PrintF("%s\n", JsonLine(samples, facts));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  // Before anything else: this child's whole job is to say "main reached".
  if (argc == 2 && strcmp(argv[1], kiln::bench::kNoopChild) == 0) {
    return write(kiln::bench::kReportFd, "R", 1) == 1 ? 0 : 1;
  }
  absl::SetProgramUsageMessage(
      "Kiln's end-to-end benchmark; docs/BENCHMARKS.md says what each figure means.\n"
      "Usage: bazel run -c opt //tools/bench:e2e -- [--json] [--repetitions=12]");
  // Both sides run on one thread with the same BLAS: sets the variables and
  // executes itself again if they were not set (OpenBLAS reads them when it
  // is loaded, before main). Children and eager.py inherit them: no-op there.
  kiln::bench::PinThreadsOrReexecute(
      argv, {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "KILN_NUM_THREADS"}, "e2e");
  absl::ParseCommandLine(argc, argv);
  const std::string child = absl::GetFlag(FLAGS_child);
  if (!child.empty()) {
    const absl::Status status =
        kiln::bench::RunChild({child, absl::GetFlag(FLAGS_socket), absl::GetFlag(FLAGS_cache_dir),
                               absl::GetFlag(FLAGS_graph)});
    if (!status.ok()) absl::FPrintF(stderr, "e2e --child=%s: %s\n", child, status.ToString());
    return status.ok() ? 0 : 1;
  }
  const absl::Status status = kiln::RunBenchmark();
  if (!status.ok()) {
    absl::FPrintF(stderr, "e2e: %s\n", status.ToString());
    return 1;
  }
  return 0;
}
