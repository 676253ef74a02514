// //tools/bench:fleet — the fleet tier: kilnds with their own cache
// directories sharing one real redis-server (a Unix socket), with the
// public transformer layer (tests/workloads/transformer_layer.json).
//   compile_ms       a client's Compile on kilnd A, which misses everywhere
//                    and compiles (then publishes behind the reply);
//   remote_hit_ms    the same request on kilnd B (running, a reader), whose
//                    store misses and whose Redis hits: from the Compile
//                    call to the object dlopen'ed, B's local write included;
//   local_hit_ms     the same once more on B: its store hits;
//   fleet_compiles_for_8_racing   eight kilnds sent the same new request
//                    at once compile it this many times in all (must be 1);
//   fleet_plan_compiles   four kilnds warming one 24-bucket plan at once
//                    (`kiln warmup`, one process each) compile this many
//                    buckets in all (must be 24).
// Each round uses a fresh salt (CompileRequest.options.salt), so a fresh key.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache/remote/signing.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "tests/redis_fixture.h"
#include "tools/bench/bench_util.h"

ABSL_FLAG(bool, json, false, "Also print every figure as one JSON object on the last line.");
ABSL_FLAG(int, repetitions, 5, "Rounds of each timed figure.");

namespace kiln::bench {
namespace {

constexpr char kTarget[] = "//tools/bench:fleet";
constexpr char kGraph[] = "tests/workloads/transformer_layer.json";
constexpr char kPlanGraph[] = "examples/tail_dynamic.json";
constexpr int kRacing = 8;
constexpr int kPlanDaemons = 4;
constexpr int kPlanBuckets = 24;

// Daemons sharing one Redis, each with its own cache directory.
class Fleet {
 public:
  static absl::StatusOr<std::unique_ptr<Fleet>> Make(const std::string& root) {
    auto fleet = std::unique_ptr<Fleet>(new Fleet(root));
    ASSIGN_OR_RETURN(fleet->kilnd_, FindKilnd(kTarget));
    ASSIGN_OR_RETURN(fleet->redis_, RedisServer::Start({}));
    ASSIGN_OR_RETURN(const KeyPairPem keys, GenerateSigningKeyPair());
    RETURN_IF_ERROR(WriteFileAtomically(root + "/signing.pem", keys.private_key, 0600));
    RETURN_IF_ERROR(WriteFileAtomically(root + "/signing.pub", keys.public_key, 0644));
    return fleet;
  }

  // A kilnd on a fresh cache directory that signs and publishes, or (not
  // `publisher`) only reads.
  absl::StatusOr<std::unique_ptr<Daemon>> Start(bool publisher) {
    const std::string dir = absl::StrCat(root_, "/d", ++daemons_);
    RETURN_IF_ERROR(MakeDirectories(dir + "/cache", 0700));
    // The toolchain probes of the first kilnd are valid for all (they are
    // keyed by the compiler's and the CPU's fingerprint): no clang run per start.
    if (!memo_.empty()) {
      RETURN_IF_ERROR(WriteFileAtomically(dir + "/cache/toolchains", memo_, 0600));
    }
    std::vector<std::string> flags = {"--remote=" + redis_->url()};
    flags.push_back(publisher ? "--remote_signing_key=" + root_ + "/signing.pem"
                              : "--remote_trusted_keys=" + root_ + "/signing.pub");
    ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon,
                     Daemon::Start(kilnd_, dir, "worker", dir + "/cache", flags));
    if (memo_.empty()) {
      if (absl::StatusOr<std::string> memo = ReadFile(dir + "/cache/toolchains"); memo.ok()) {
        memo_ = *memo;
      }
    }
    return daemon;
  }

  RedisServer& redis() { return *redis_; }

 private:
  explicit Fleet(std::string root) : root_(std::move(root)) {}
  const std::string root_;
  KilndBinary kilnd_;
  std::unique_ptr<RedisServer> redis_;
  std::string memo_;
  int daemons_ = 0;
};

// Until `daemon` has published `n` entries (its writes are behind replies).
absl::Status WaitForPublishes(Daemon& daemon, int64_t n) {
  for (int i = 0; i < 1000; ++i) {
    ASSIGN_OR_RETURN(const kiln::v1::StatsResponse stats, daemon.client().Stats());
    if (stats.remote().publishes() >= n) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat("kilnd published fewer than ", n, " entries"));
}

// Compile, then dlopen the object: what a client does before its first call.
absl::StatusOr<kiln::v1::CompileResponse> CompileAndLoad(Daemon& daemon,
                                                         const kiln::v1::CompileRequest& request) {
  ASSIGN_OR_RETURN(kiln::v1::CompileResponse response, daemon.client().Compile(request));
  void* handle = dlopen(response.object_path().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return absl::InternalError(absl::StrCat("dlopen: ", dlerror()));
  dlclose(handle);
  return response;
}

absl::Status MeasureHits(Fleet& fleet, const kiln::v1::Graph& graph, Samples& samples) {
  ASSIGN_OR_RETURN(std::unique_ptr<Daemon> a, fleet.Start(/*publisher=*/true));
  ASSIGN_OR_RETURN(std::unique_ptr<Daemon> b, fleet.Start(/*publisher=*/false));
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = graph;
  for (int round = -1; round < absl::GetFlag(FLAGS_repetitions); ++round) {
    request.mutable_options()->set_salt(absl::StrCat("fleet-", getpid(), "-", round));
    int64_t start = NowNs();
    ASSIGN_OR_RETURN(kiln::v1::CompileResponse compiled, CompileAndLoad(*a, request));
    const double compile_ms = MsSince(start);
    if (compiled.cache_hit()) return absl::InternalError("a salted request hit on A");
    RETURN_IF_ERROR(WaitForPublishes(*a, round + 2));

    start = NowNs();
    ASSIGN_OR_RETURN(kiln::v1::CompileResponse fetched, CompileAndLoad(*b, request));
    const double remote_ms = MsSince(start);
    start = NowNs();
    ASSIGN_OR_RETURN(kiln::v1::CompileResponse local, CompileAndLoad(*b, request));
    const double local_ms = MsSince(start);
    ASSIGN_OR_RETURN(const kiln::v1::StatsResponse on_b, b->client().Stats());
    if (on_b.compiles() != 0 || on_b.remote().hits() != round + 2) {
      return absl::InternalError(absl::StrCat("B compiled ", on_b.compiles(), " and hit Redis ",
                                              on_b.remote().hits(), " times, not 0 and ",
                                              round + 2));
    }
    if (round < 0) continue;  // page cache, Redis's and kilnd's first connections
    samples["compile_ms"].push_back(compile_ms);
    samples["remote_hit_ms"].push_back(remote_ms);
    samples["local_hit_ms"].push_back(local_ms);
    samples["entry_kb"].push_back(fetched.artifact().object_bytes() / 1024.0);
  }
  return absl::OkStatus();
}

absl::Status MeasureRace(Fleet& fleet, const kiln::v1::Graph& graph, Samples& samples) {
  std::vector<std::unique_ptr<Daemon>> daemons;
  for (int i = 0; i < kRacing; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon, fleet.Start(/*publisher=*/true));
    daemons.push_back(std::move(daemon));
  }
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = graph;
  int64_t compiled_before = 0;
  for (int round = 0; round < absl::GetFlag(FLAGS_repetitions); ++round) {
    request.mutable_options()->set_salt(absl::StrCat("race-", getpid(), "-", round));
    std::vector<absl::Status> results(kRacing);
    std::vector<std::thread> clients;
    for (int i = 0; i < kRacing; ++i) {
      clients.emplace_back([&, i] { results[i] = daemons[i]->client().Compile(request).status(); });
    }
    for (std::thread& client : clients) client.join();
    int64_t compiled = 0;
    for (int i = 0; i < kRacing; ++i) {
      RETURN_IF_ERROR(results[i]);
      ASSIGN_OR_RETURN(const kiln::v1::StatsResponse stats, daemons[i]->client().Stats());
      compiled += stats.compiles();
    }
    samples["fleet_compiles_for_8_racing"].push_back(compiled - compiled_before);
    compiled_before = compiled;
  }
  return absl::OkStatus();
}

absl::Status MeasurePlan(Fleet& fleet, const std::string& root, Samples& samples) {
  ASSIGN_OR_RETURN(const std::string kiln, Runfile("tools/kiln/kiln", kTarget));
  ASSIGN_OR_RETURN(const std::string graph, Runfile(kPlanGraph, kTarget));
  char absolute[4096];
  if (realpath(graph.c_str(), absolute) == nullptr) return absl::NotFoundError(graph);
  for (int round = 0; round < std::min(2, absl::GetFlag(FLAGS_repetitions)); ++round) {
    // 24 buckets, a fresh key space per round (the salt is the namespace's).
    const std::string plan = absl::StrCat(root, "/plan", round, ".json");
    RETURN_IF_ERROR(WriteFileAtomically(
        plan,
        absl::StrCat(R"({"graphs": [{"graph": ")", absolute,
                     R"(", "symbols": [{"symbol": "s0", "multiples": {"of": )", round + 1,
                     R"(, "up_to": )", (round + 1) * kPlanBuckets, "}}]}]}"),
        0644));
    ASSIGN_OR_RETURN(const std::string flushed, fleet.redis().Cli({"FLUSHALL"}));
    if (flushed != "OK") return absl::InternalError("FLUSHALL: " + flushed);
    std::vector<std::unique_ptr<Daemon>> daemons;
    for (int i = 0; i < kPlanDaemons; ++i) {
      ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon, fleet.Start(/*publisher=*/true));
      daemons.push_back(std::move(daemon));
    }
    std::vector<absl::StatusOr<ProcessResult>> results(kPlanDaemons);
    std::vector<std::thread> warmers;
    const int64_t start = NowNs();
    for (int i = 0; i < kPlanDaemons; ++i) {
      warmers.emplace_back([&, i] {
        RunOptions options;
        options.timeout = absl::Minutes(10);
        // Its own daemon's local index, not the user's default one.
        options.env = {{"KILN_CACHE_DIR", daemons[i]->cache_dir()}};
        results[i] = RunProcess(
            {kiln, "--socket=" + daemons[i]->socket_path(), "--start=false", "warmup", plan},
            options);
      });
    }
    for (std::thread& warmer : warmers) warmer.join();
    samples["fleet_plan_ms"].push_back(MsSince(start));
    int64_t compiles = 0;
    for (int i = 0; i < kPlanDaemons; ++i) {
      RETURN_IF_ERROR(results[i].status());
      if (results[i]->exit_code != 0) {
        return absl::InternalError("kiln warmup failed: " + results[i]->output.substr(0, 2000));
      }
      ASSIGN_OR_RETURN(const kiln::v1::StatsResponse stats, daemons[i]->client().Stats());
      compiles += stats.compiles();
    }
    samples["fleet_plan_compiles"].push_back(compiles);
  }
  return absl::OkStatus();
}

absl::Status Run() {
  ASSIGN_OR_RETURN(ScratchDirectory scratch, ScratchDirectory::Make());
  ASSIGN_OR_RETURN(std::unique_ptr<Fleet> fleet, Fleet::Make(scratch.path()));
  ASSIGN_OR_RETURN(const std::string graph_path, Runfile(kGraph, kTarget));
  ASSIGN_OR_RETURN(const kiln::v1::Graph graph, ReadGraphFile(graph_path));
  Samples samples;
  const std::string load_before = LoadAverage();
  RETURN_IF_ERROR(MeasureHits(*fleet, graph, samples));
  RETURN_IF_ERROR(MeasureRace(*fleet, graph, samples));
  RETURN_IF_ERROR(MeasurePlan(*fleet, scratch.path(), samples));

  printf("Fleet tier: kilnds sharing one redis-server on a Unix socket (%d rounds)\n",
         absl::GetFlag(FLAGS_repetitions));
  PrintFigures(samples,
               {"remote_hit_ms", "local_hit_ms", "compile_ms", "entry_kb",
                "fleet_compiles_for_8_racing", "fleet_plan_compiles", "fleet_plan_ms"},
               {{"graph", kGraph},
                {"cpu", CpuModel()},
                {"load_before", load_before},
                {"load_after", LoadAverage()}},
               absl::GetFlag(FLAGS_json));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times the fleet tier: remote hits against local hits and compiles, and counts the "
      "compiles of racing kilnds.");
  absl::ParseCommandLine(argc, argv);
  return kiln::bench::ExitStatus("fleet", kiln::bench::Run());
}
