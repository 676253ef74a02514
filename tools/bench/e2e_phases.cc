#include "tools/bench/e2e_phases.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/client.h"
#include "client/tensor.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "tools/bench/accuracy.h"

namespace kiln::bench {
namespace {

// x[i][j], deterministic and of mixed sign so that relu clips some outputs.
Tensor MakeInput() {
  Tensor x(kiln::v1::FLOAT32, {kSize, kSize});
  float* data = x.data<float>();
  for (int64_t i = 0; i < kSize * kSize; ++i) data[i] = ((i * 37) % 101 - 50) / 50.0f;
  return x;
}

// A figure for a wrong kernel is worthless: Run's output against f
// computed in float64, within the K-scaled tolerance (accuracy.h; K = 64,
// the product's inner dim).
absl::StatusOr<bench::Accuracy> CheckOutput(const Tensor& x, const Tensor& out) {
  const float* a = x.data<float>();
  std::vector<double> expected(kSize * kSize);
  for (int64_t i = 0; i < kSize; ++i) {
    for (int64_t j = 0; j < kSize; ++j) {
      double dot = 0;
      for (int64_t k = 0; k < kSize; ++k) dot += double(a[i * kSize + k]) * a[j * kSize + k];
      expected[i * kSize + j] = std::max(dot + 1, 0.0);
    }
  }
  const bench::Accuracy accuracy = bench::MeasureAccuracy(out, expected, kSize);
  RETURN_IF_ERROR(bench::CheckAccuracy("Run's output of relu(x @ x.T + 1)", accuracy));
  return accuracy;
}

// ------------------------------------------------------- the timed child

// Summed smaps fields of this process's mappings of files under `directory`.
absl::StatusOr<std::string> ArtifactMemory(const std::string& directory) {
  ASSIGN_OR_RETURN(const std::string smaps, ReadFile("/proc/self/smaps"));
  std::map<std::string, double> kb = {
      {"Rss", 0}, {"Pss", 0}, {"Private_Clean", 0}, {"Private_Dirty", 0}};
  bool in_artifact = false;
  int mappings = 0;
  for (absl::string_view line : absl::StrSplit(smaps, '\n')) {
    const std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.empty()) continue;
    if (!absl::EndsWith(words[0], ":")) {  // "start-end perms offset dev inode path"
      in_artifact = words.size() >= 6 && absl::StartsWith(words[5], directory);
      mappings += in_artifact;
      continue;
    }
    const auto it = kb.find(std::string(absl::StripSuffix(words[0], ":")));
    double value;
    if (in_artifact && it != kb.end() && words.size() >= 2 && absl::SimpleAtod(words[1], &value)) {
      it->second += value;
    }
  }
  if (mappings == 0) return absl::InternalError(absl::StrCat("no mapping under ", directory));
  return absl::StrFormat(
      "second_client_artifact_private_kb=%g second_client_artifact_private_dirty_kb=%g "
      "second_client_artifact_rss_kb=%g second_client_artifact_pss_kb=%g",
      kb["Private_Clean"] + kb["Private_Dirty"], kb["Private_Dirty"], kb["Rss"], kb["Pss"]);
}

}  // namespace

absl::Status RunChild(const ChildFlags& flags) {
  const std::string& mode = flags.mode;
  if (mode != "fresh" && mode != "hold" && mode != "smaps") {
    return absl::InvalidArgumentError(
        absl::StrCat("--child=", mode, " is not fresh, hold or smaps"));
  }
  const int64_t start = NowNs();
  ASSIGN_OR_RETURN(kiln::v1::Graph graph, ReadGraphFile(flags.graph));
  Tensor x = MakeInput();
  Tensor out(kiln::v1::FLOAT32, {kSize, kSize});
  const TensorView inputs[] = {x.view()};
  const TensorView outputs[] = {out.view()};

  const int64_t connect = NowNs();
  ClientOptions options;
  options.socket_path = flags.socket;
  options.cache_dir = flags.cache_dir;
  options.auto_start = false;
  options.client_name = "bench-child";
  // As a serving worker would: a lazy client, so that a same-host hit
  // needs no connection.
  std::unique_ptr<Client> client = Client::Open(options);
  const int64_t connected = NowNs();
  // Prepare is what the first Run does on its own (fetch + load); calling it
  // separately only splits the time.
  CompiledGraph compiled(client.get(), std::move(graph));
  ASSIGN_OR_RETURN(const CompiledGraph::PrepareResult prepared, compiled.Prepare());
  const int64_t loaded = NowNs();
  RETURN_IF_ERROR(compiled.Run(inputs, outputs));
  const int64_t done = NowNs();
  RETURN_IF_ERROR(WriteAll(kReportFd, "R"));

  std::string report = absl::StrFormat(
      "cache_hit=%d fresh_hit_ms=%.4f fresh_hit_connect_ms=%.4f fresh_hit_fetch_ms=%.4f "
      "fresh_hit_open_ms=%.4f fresh_hit_other_ms=%.4f fresh_hit_first_run_ms=%.4f "
      "child_read_graph_ms=%.4f",
      int{prepared.cache_hit}, (done - connect) / 1e6, (connected - connect) / 1e6,
      prepared.fetch_ms, prepared.open_ms,
      (loaded - connected) / 1e6 - prepared.fetch_ms - prepared.open_ms, (done - loaded) / 1e6,
      (connect - start) / 1e6);
  RETURN_IF_ERROR(CheckOutput(x, out).status());
  if (mode == "smaps") {
    ASSIGN_OR_RETURN(const std::string memory, ArtifactMemory(options.cache_dir + "/objects/"));
    absl::StrAppend(&report, " ", memory);
  }
  RETURN_IF_ERROR(WriteAll(kReportFd, report + "\n"));
  close(kReportFd);
  if (mode == "hold") {
    char byte;
    ssize_t n;
    do {
      n = read(STDIN_FILENO, &byte, 1);
    } while (n > 0 || (n < 0 && errno == EINTR));
  }
  return absl::OkStatus();
}

namespace {

// The parent's handle on a timed child.
struct Child {
  pid_t pid = -1;
  int64_t spawn_ns = 0;
  ScopedFd report;  // read end of the child's kReportFd
  ScopedFd input;   // write end of the child's stdin (hold only)
};

absl::StatusOr<Child> StartChild(const std::vector<std::string>& argv, bool hold) {
  Child child;
  ASSIGN_OR_RETURN(auto report, MakePipe());
  std::vector<std::pair<int, int>> redirects = {{report.second.get(), kReportFd}};
  std::pair<ScopedFd, ScopedFd> input;
  if (hold) {
    ASSIGN_OR_RETURN(input, MakePipe());
    redirects.push_back({input.first.get(), STDIN_FILENO});
  }
  child.spawn_ns = NowNs();  // fresh_process_ms starts here
  ASSIGN_OR_RETURN(child.pid, SpawnProcess(argv, redirects));
  child.report = std::move(report.first);
  child.input = std::move(input.second);
  return child;
}

// Milliseconds from spawn to the child's first byte on its report pipe.
absl::StatusOr<double> WaitForFirstResult(Child& child) {
  pollfd ready = {child.report.get(), POLLIN, 0};
  if (poll(&ready, 1, 60000) != 1) {
    return absl::DeadlineExceededError("a child did not report within 60 s");
  }
  const int64_t arrived = NowNs();
  char byte;
  if (read(child.report.get(), &byte, 1) != 1) {
    const absl::Status exited = Reap(std::exchange(child.pid, -1), "bench child");
    return exited.ok() ? absl::InternalError("a bench child exited without reporting") : exited;
  }
  return (arrived - child.spawn_ns) / 1e6;
}

// The rest of the child's report, once it has exited.
absl::StatusOr<std::string> FinishChild(Child& child) {
  auto report = ReadToEof(child.report.get());
  child.input.Close();  // a held child exits now
  RETURN_IF_ERROR(Reap(child.pid, "bench child"));
  return report;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Eager>> Eager::Start(const std::string& python,
                                                    const std::string& script) {
  std::unique_ptr<Eager> eager(new Eager);
  ASSIGN_OR_RETURN(eager->process_,
                   LineProcess::Start({python, script, absl::StrCat(kSize)}, "eager.py"));
  return eager;
}

absl::StatusOr<Fields> Eager::Batch(int calls) {
  ASSIGN_OR_RETURN(const std::string line, process_->Ask(absl::StrCat(calls)));
  return ParseFields(line);
}

// ------------------------------------------------------------------ phases

// A: the clang++ subprocess kilnd, B: the compile-worker kilnd. Each round
// compiles f with a fresh salt on both. Round -1 is not recorded: it waits
// out kilnd's own worker warm-up and brings clang into the page cache.
absl::Status MeasureColdCompile(const kiln::v1::Graph& graph, Daemon& subprocess, Daemon& worker,
                                int rounds, Samples& samples) {
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = graph;
  const struct {
    Daemon* daemon;
    const char* compiler;
    const char* figure;
  } sides[] = {{&subprocess, "subprocess", "cold_compile_subprocess"},
               {&worker, "worker", "cold_compile"}};
  for (int round = -1; round < rounds; ++round) {
    for (const auto& side : sides) {
      request.mutable_options()->set_salt(absl::StrCat("bench-", getpid(), "-", round));
      const int64_t start = NowNs();
      ASSIGN_OR_RETURN(const kiln::v1::CompileResponse response,
                       side.daemon->client().Compile(request));
      const double ms = MsSince(start);
      if (response.cache_hit()) return absl::InternalError("a salted compile was a cache hit");
      if (response.artifact().compiler() != side.compiler) {
        return absl::FailedPreconditionError(absl::StrCat(
            "kilnd --compiler=", side.compiler, " compiled with ", response.artifact().compiler(),
            " (no kiln-compile-worker in its runfiles?); ", LogTail(side.daemon->log_path())));
      }
      if (round < 0) continue;
      const std::string figure = side.figure;
      samples[figure + "_ms"].push_back(ms);
      samples[figure + "_codegen_ms"].push_back(response.artifact().timings().codegen_ms());
      samples[figure + "_compiler_ms"].push_back(response.artifact().timings().compile_ms());
    }
  }
  return absl::OkStatus();
}

namespace {

// A fresh child's report, and the parent's time to its first result.
absl::StatusOr<Fields> RunFreshChild(const std::vector<std::string>& argv, double& fresh_ms) {
  ASSIGN_OR_RETURN(Child child, StartChild(argv, /*hold=*/false));
  ASSIGN_OR_RETURN(fresh_ms, WaitForFirstResult(child));
  ASSIGN_OR_RETURN(const std::string report, FinishChild(child));
  Fields fields = ParseFields(report);
  if (fields.count("cache_hit") == 0 || fields.at("cache_hit") != "1") {
    return absl::InternalError("a fresh child missed the cache: " + report);
  }
  return fields;
}

}  // namespace

// A: a child that reports from the top of main (process start: exec,
// dynamic linking of ~60 libraries, static initialisers). B: a child that
// connects, hits, loads and runs f. The parent has compiled f already, so
// kilnd has recorded the request's alias (cache/local_index.h). C: the
// same with the aliases moved away: a process whose request kilnd has not
// answered before asks kilnd (one RPC), which keys it.
absl::Status MeasureFreshProcess(const std::string& self, const std::string& graph_path,
                                 const Daemon& daemon, int rounds, Samples& samples) {
  const std::vector<std::string> noop = {self, kNoopChild};
  const std::vector<std::string> fresh = {self, "--child=fresh", "--socket=" + daemon.socket_path(),
                                          "--cache_dir=" + daemon.cache_dir(),
                                          "--graph=" + graph_path};
  const std::string aliases = daemon.cache_dir() + "/requests";
  for (int round = 0; round < rounds; ++round) {
    ASSIGN_OR_RETURN(Child baseline, StartChild(noop, /*hold=*/false));
    ASSIGN_OR_RETURN(const double start_ms, WaitForFirstResult(baseline));
    RETURN_IF_ERROR(FinishChild(baseline).status());
    samples["process_start_ms"].push_back(start_ms);

    double fresh_ms = 0;
    ASSIGN_OR_RETURN(const Fields fields, RunFreshChild(fresh, fresh_ms));
    samples["fresh_process_ms"].push_back(fresh_ms);
    for (const auto& [key, value] : fields) {
      ASSIGN_OR_RETURN(const double number, NumberField(fields, key));
      if (key != "cache_hit") samples[key].push_back(number);
    }

    if (rename(aliases.c_str(), (aliases + ".away").c_str()) != 0) {
      return absl::InternalError(absl::StrCat("cannot move ", aliases, ": ", strerror(errno)));
    }
    absl::StatusOr<Fields> unaliased = RunFreshChild(fresh, fresh_ms);
    // kilnd wrote that request's alias again: the moved copy has it too.
    RETURN_IF_ERROR(RemoveRecursively(aliases));
    if (rename((aliases + ".away").c_str(), aliases.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("cannot restore ", aliases, ": ", strerror(errno)));
    }
    RETURN_IF_ERROR(unaliased.status());
    ASSIGN_OR_RETURN(const double hit_ms, NumberField(*unaliased, "fresh_hit_ms"));
    ASSIGN_OR_RETURN(const double fetch_ms, NumberField(*unaliased, "fresh_hit_fetch_ms"));
    samples["fresh_hit_unaliased_ms"].push_back(hit_ms);
    samples["fresh_hit_unaliased_fetch_ms"].push_back(fetch_ms);
  }
  return absl::OkStatus();
}

// A: eager PyTorch (one batch per variant, in eager.py), B: Run from C++,
// into preallocated outputs and allocating them. Round -1 is a warm-up.
absl::Status MeasureWarmCalls(CompiledGraph& compiled, Eager* eager, int rounds, int calls,
                              Samples& samples) {
  Tensor x = MakeInput();
  Tensor out(kiln::v1::FLOAT32, {kSize, kSize});
  const TensorView inputs[] = {x.view()};
  const TensorView outputs[] = {out.view()};
  RETURN_IF_ERROR(compiled.Run(inputs, outputs));
  ASSIGN_OR_RETURN(const bench::Accuracy accuracy, CheckOutput(x, out));
  samples["f_max_abs_err"].push_back(accuracy.max_abs_err);
  samples["f_max_rel_err"].push_back(accuracy.max_rel_err);
  samples["f_tolerance"].push_back(accuracy.bound);
  for (int round = -1; round < rounds; ++round) {
    if (eager != nullptr) {
      ASSIGN_OR_RETURN(const Fields fields, eager->Batch(calls));
      ASSIGN_OR_RETURN(const double alloc_ns, NumberField(fields, "alloc_ns"));
      ASSIGN_OR_RETURN(const double out_ns, NumberField(fields, "out_ns"));
      ASSIGN_OR_RETURN(const double alloc_faults, NumberField(fields, "alloc_minflt"));
      ASSIGN_OR_RETURN(const double out_faults, NumberField(fields, "out_minflt"));
      if (round >= 0) {
        samples["eager_call_us"].push_back(alloc_ns / 1e3);
        samples["eager_out_call_us"].push_back(out_ns / 1e3);
        samples["eager_call_minflt"].push_back(alloc_faults);
        samples["eager_out_call_minflt"].push_back(out_faults);
      }
    }
    bool ok = true;
    const Batch preallocated = TimeBatch(calls, [&] { ok &= compiled.Run(inputs, outputs).ok(); });
    const Batch allocating = TimeBatch(calls, [&] { ok &= compiled.Run(inputs).ok(); });
    if (!ok) return absl::InternalError("a warm Run failed");
    if (round < 0) continue;
    samples["warm_call_us"].push_back(preallocated.median_ns / 1e3);
    samples["warm_call_alloc_us"].push_back(allocating.median_ns / 1e3);
    samples["warm_call_minflt"].push_back(preallocated.minor_faults_per_call);
    samples["warm_call_alloc_minflt"].push_back(allocating.minor_faults_per_call);
  }
  return absl::OkStatus();
}

// A: kiln_run called directly with the arguments Run would pass, B: Run on
// the same buffers, alternating. dispatch = median(B) - median(A), per round.
absl::Status MeasureDispatch(CompiledGraph& compiled, int rounds, int calls, Samples& samples) {
  Tensor x = MakeInput();
  Tensor out(kiln::v1::FLOAT32, {kSize, kSize});
  const TensorView inputs[] = {x.view()};
  const TensorView outputs[] = {out.view()};
  ASSIGN_OR_RETURN(const CompiledGraph::DirectCall direct, compiled.DirectCallForBenchmark(inputs));
  void* const input_pointers[] = {x.data<float>()};
  void* const output_pointers[] = {out.data<float>()};
  std::vector<double> direct_ns(calls), run_ns(calls);
  for (int round = -1; round < rounds; ++round) {
    int code = 0;
    bool ok = true;
    // Alternating call by call, not batch by batch: the difference sought
    // (~100 ns) is smaller than the drift between two batches on a shared
    // VM. One clock read ends the direct call and starts Run.
    for (int i = 0; i < calls; ++i) {
      const int64_t start = NowNs();
      code |= direct.run(direct.runtime, nullptr, input_pointers, output_pointers, direct.scratch);
      const int64_t middle = NowNs();
      ok &= compiled.Run(inputs, outputs).ok();
      direct_ns[i] = middle - start;
      run_ns[i] = NowNs() - middle;
    }
    if (code != 0 || !ok) return absl::InternalError("a call failed in the dispatch phase");
    if (round < 0) continue;
    const double direct_median = Median(direct_ns);
    samples["direct_call_us"].push_back(direct_median / 1e3);
    samples["dispatch_ns"].push_back(Median(run_ns) - direct_median);
  }
  return CheckOutput(x, out).status();
}

// Two children load the artifact the parent also has mapped; the first
// stays alive while the second loads it and reads its own smaps.
absl::Status MeasureSecondClient(const std::string& self, const std::string& graph_path,
                                 const Daemon& daemon, Samples& samples) {
  const std::vector<std::string> common = {"--socket=" + daemon.socket_path(),
                                           "--cache_dir=" + daemon.cache_dir(),
                                           "--graph=" + graph_path};
  std::vector<std::string> hold = {self, "--child=hold"}, smaps = {self, "--child=smaps"};
  hold.insert(hold.end(), common.begin(), common.end());
  smaps.insert(smaps.end(), common.begin(), common.end());
  ASSIGN_OR_RETURN(Child first, StartChild(hold, /*hold=*/true));
  RETURN_IF_ERROR(WaitForFirstResult(first).status());
  ASSIGN_OR_RETURN(Child second, StartChild(smaps, /*hold=*/false));
  RETURN_IF_ERROR(WaitForFirstResult(second).status());
  ASSIGN_OR_RETURN(const std::string report, FinishChild(second));
  RETURN_IF_ERROR(FinishChild(first).status());
  const Fields fields = ParseFields(report);
  for (const auto& [key, value] : fields) {
    if (!absl::StartsWith(key, "second_client_")) continue;
    ASSIGN_OR_RETURN(const double number, NumberField(fields, key));
    samples[key].push_back(number);
  }
  return absl::OkStatus();
}

// The idle daemon (all phases done, no client connected but ours) and its
// compile workers.
absl::Status MeasureMemory(const Daemon& worker, const Daemon& subprocess, Samples& samples) {
  ASSIGN_OR_RETURN(const double daemon_kb, ProcStatusKb(worker.pid(), "VmRSS"));
  ASSIGN_OR_RETURN(const double subprocess_daemon_kb, ProcStatusKb(subprocess.pid(), "VmRSS"));
  samples["daemon_rss_mb"].push_back(daemon_kb / 1024);
  samples["daemon_subprocess_rss_mb"].push_back(subprocess_daemon_kb / 1024);
  const std::vector<pid_t> workers = ChildrenNamed(worker.pid(), "kiln-compile-wo");
  if (workers.empty()) return absl::InternalError("kilnd has no kiln-compile-worker child");
  double largest_kb = 0;
  for (pid_t pid : workers) {
    ASSIGN_OR_RETURN(const double kb, ProcStatusKb(pid, "VmRSS"));
    largest_kb = std::max(largest_kb, kb);
  }
  samples["worker_rss_mb"].push_back(largest_kb / 1024);
  samples["workers"].push_back(workers.size());
  return absl::OkStatus();
}

}  // namespace kiln::bench
