// //tools/bench:symbolic — what one artifact for every size costs: each
// workload traced with a symbolic batch or sequence dim (the graphs
// //tests/workloads:traced_dynamic checks) against the same graph
// specialized to static sizes, both at the trace's size and at 257 and 1024
// (33 with sequence and batch both symbolic; eager's references from the
// same genrule). Same process, same runtime
// (1 thread unless --threads), outputs preallocated; per round every case
// times one batch of each artifact, the order swapped every other round;
// min/median/max over rounds of the symbolic/static time ratio
// (docs/BENCHMARKS.md, "Symbolic shapes"). Both artifacts' outputs are
// checked first against eager PyTorch in float64 (//tools/bench:dynamic64,
// accuracy.h); the worst errors are in the JSON ("NAME max_rel_err").
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/compiled_graph.h"
#include "client/runtime/runtime.h"
#include "client/tensor.h"
#include "codegen/retype.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "tools/bench/accuracy.h"
#include "tools/bench/bench_util.h"
#include "tools/reference/tensor_data.h"

ABSL_FLAG(bool, json, false, "Also print every figure as one JSON object on the last line.");
ABSL_FLAG(int, repetitions, 10, "Timed rounds (each times both artifacts of every case once).");
ABSL_FLAG(double, batch_ms, 20, "Target length of one batch of calls.");
ABSL_FLAG(int, threads, 1, "The runtime's pool size.");

namespace kiln::bench {
namespace {

constexpr char kTarget[] = "//tools/bench:symbolic";
// Each workload at the trace's size and at the sizes its references were
// traced at (tests/workloads/BUILD.bazel): 257 and 1024, or 33 for the
// transformer layer with sequence and batch symbolic at once.
struct Workload {
  const char* name;
  std::vector<const char*> sizes;  // reference suffixes
};
const Workload kWorkloads[] = {
    {"attention_seq", {"", ".257", ".1024"}},
    {"f", {"", ".257", ".1024"}},
    {"layer_norm", {"", ".257", ".1024"}},
    {"mlp", {"", ".257", ".1024"}},
    {"softmax", {"", ".257", ".1024"}},
    {"transformer_layer", {"", ".257", ".1024"}},
    {"transformer_layer_batch", {"", ".257", ".1024"}},
    {"transformer_layer_both", {"", ".33"}},
};

// One workload at one size: its inputs, the symbolic and static artifacts,
// and the preallocated outputs both write: the same buffers, so that where
// they sit cannot favour either (with an output each, layer_norm at 1024
// rows read 1.09 from two identical loops).
struct Case {
  std::string name;
  std::vector<Tensor> inputs, outputs[2];
  std::vector<TensorView> input_views, output_views;
  std::unique_ptr<CompiledGraph> compiled[2];  // 0: symbolic, 1: static
  int calls = 1;
  Accuracy accuracy;  // both artifacts' outputs against float64 eager, the worst
};

absl::StatusOr<std::unique_ptr<Case>> LoadCase(const std::string& workload, const char* size,
                                               Client& client, Runtime& runtime) {
  auto result = std::make_unique<Case>();
  const std::string base = absl::StrCat("tests/workloads/dynamic/", workload);
  ASSIGN_OR_RETURN(const std::string graph_path, Runfile(base + ".json", kTarget));
  ASSIGN_OR_RETURN(const std::string ref_path,
                   Runfile(absl::StrCat(base, ".ref", size, ".json"), kTarget));
  ASSIGN_OR_RETURN(const kiln::v1::Graph symbolic, ReadGraphFile(graph_path));
  ASSIGN_OR_RETURN(
      const std::string ref64_path,
      Runfile(absl::StrCat("tools/bench/dynamic64/", workload, ".ref64", size, ".json"), kTarget));
  ASSIGN_OR_RETURN(const kiln::v1::Reference reference, ReadReferenceFile(ref_path));
  ASSIGN_OR_RETURN(const kiln::v1::Reference reference64, ReadReferenceFile(ref64_path));
  for (const auto& data : reference.inputs()) {
    ASSIGN_OR_RETURN(Tensor tensor, ToTensor(data));
    result->inputs.push_back(std::move(tensor));
  }
  for (const Tensor& input : result->inputs) result->input_views.push_back(input.view());
  std::vector<std::vector<int64_t>> sizes;
  for (const Tensor& input : result->inputs) sizes.push_back(input.sizes());
  const auto values = SymbolValues(symbolic, sizes);
  result->name = workload;
  for (const auto& [symbol, value] : values)
    absl::StrAppend(&result->name, " ", symbol, "=", value);
  const kiln::v1::Graph graphs[2] = {symbolic, Specialize(symbolic, values)};
  ASSIGN_OR_RETURN(const std::vector<int64_t> lengths, ReductionLengths(graphs[1]));
  if (reference64.outputs_size() != static_cast<int>(lengths.size())) {
    return absl::InternalError(absl::StrCat(ref64_path, " has ", reference64.outputs_size(),
                                            " outputs; the graph ", lengths.size()));
  }
  for (int k = 0; k < 2; ++k) {
    result->compiled[k] =
        std::make_unique<CompiledGraph>(&client, graphs[k], kiln::v1::CompileOptions(), &runtime);
    ASSIGN_OR_RETURN(result->outputs[k], result->compiled[k]->Run(result->input_views));
    for (int o = 0; o < reference64.outputs_size(); ++o) {
      ASSIGN_OR_RETURN(const Tensor want, ToTensor(reference64.outputs(o)));
      const Accuracy accuracy = MeasureAccuracy(result->outputs[k][o], ToDoubles(want), lengths[o]);
      RETURN_IF_ERROR(CheckAccuracy(
          absl::StrCat(result->name, k == 0 ? " symbolic" : " static", " output ", o), accuracy));
      result->accuracy.Merge(accuracy);
      if (k == 0) result->output_views.push_back(result->outputs[k][o].view());
    }
  }
  return result;
}

absl::Status Run() {
  const int rounds = absl::GetFlag(FLAGS_repetitions);
  if (rounds < 1) return absl::InvalidArgumentError("--repetitions must be at least 1");
  ASSIGN_OR_RETURN(const KilndBinary kilnd, FindKilnd(kTarget));
  ASSIGN_OR_RETURN(const ScratchDirectory root, ScratchDirectory::Make());
  ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon,
                   Daemon::Start(kilnd, root.path() + "/w", "worker"));
  Runtime runtime(absl::GetFlag(FLAGS_threads));

  std::vector<std::unique_ptr<Case>> cases;
  Samples samples;
  for (const Workload& workload : kWorkloads) {
    for (const char* size : workload.sizes) {
      fprintf(stderr, "symbolic: compiling and checking %s%s...\n", workload.name, size);
      ASSIGN_OR_RETURN(auto loaded, LoadCase(workload.name, size, daemon->client(), runtime));
      const bool seen = std::any_of(cases.begin(), cases.end(),
                                    [&](const auto& c) { return c->name == loaded->name; });
      if (seen) continue;  // softmax is traced at 1024 already
      samples[loaded->name + " max_abs_err"].push_back(loaded->accuracy.max_abs_err);
      samples[loaded->name + " max_rel_err"].push_back(loaded->accuracy.max_rel_err);
      samples[loaded->name + " tolerance"].push_back(loaded->accuracy.bound);
      cases.push_back(std::move(loaded));
    }
  }
  for (int round = 0; round <= rounds; ++round) {
    fprintf(stderr, "symbolic: round %d of %d%s\n", round, rounds, round == 0 ? " (warm-up)" : "");
    for (auto& c : cases) {
      double ns[2];
      for (int i = 0; i < 2; ++i) {
        const int k = (round + i) % 2;
        ns[k] = TimeBatch(c->calls, [&] {
                  c->compiled[k]->Run(c->input_views, c->output_views).IgnoreError();
                }).median_ns;
      }
      if (round == 0) {  // sizes the batches
        c->calls = std::max(5, int(absl::GetFlag(FLAGS_batch_ms) * 1e6 / std::max(ns[0], ns[1])));
        continue;
      }
      samples[c->name + " symbolic_us"].push_back(ns[0] / 1e3);
      samples[c->name + " static_us"].push_back(ns[1] / 1e3);
      samples[c->name + " ratio"].push_back(ns[0] / ns[1]);
    }
  }
  printf("Symbolic vs static artifacts (%d thread(s), preallocated outputs, %d rounds)\n",
         absl::GetFlag(FLAGS_threads), rounds);
  printf("%-40s %12s %12s %24s %12s %10s\n", "workload at size", "static us", "symbolic us",
         "symbolic/static min/med/max", "max_rel_err", "bound");
  std::vector<std::string> keys;
  for (const auto& c : cases) {
    const auto ratio = Summarize(samples, c->name + " ratio");
    printf("%-40s %12.2f %12.2f %8.3f/%7.3f/%7.3f %12.3g %10.3g\n", c->name.c_str(),
           Summarize(samples, c->name + " static_us")->median,
           Summarize(samples, c->name + " symbolic_us")->median, ratio->min, ratio->median,
           ratio->max, c->accuracy.max_rel_err, c->accuracy.bound);
    keys.push_back(c->name + " ratio");
  }
  for (const auto& c : cases) {
    for (const char* figure : {" max_abs_err", " max_rel_err", " tolerance"}) {
      keys.push_back(c->name + figure);
    }
  }
  if (absl::GetFlag(FLAGS_json)) {
    printf("%s\n", JsonLine(samples, keys, {{"cpu", CpuModel()}, {"load", LoadAverage()}}).c_str());
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  kiln::bench::PinThreadsOrReexecute(argv, {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}, "symbolic");
  absl::SetProgramUsageMessage(
      "Times artifacts with symbolic sizes against static ones of the same graphs.");
  absl::ParseCommandLine(argc, argv);
  return kiln::bench::ExitStatus("symbolic", kiln::bench::Run());
}
