// What the stress campaigns compile and how they judge a result: graphs
// (the examples the reference evaluator knows, and generated ones of varied
// sizes and depths, made distinct by a salt), run through the client library
// on seeded random inputs and compared with tools/reference.
#ifndef KILN_TOOLS_STRESS_WORKLOAD_H_
#define KILN_TOOLS_STRESS_WORKLOAD_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/client.h"
#include "proto/graph.pb.h"
#include "proto/service.pb.h"

namespace kiln::stress {

struct Workload {
  std::string name;  // for reports: "f", "pointwise-7x130-d5", ...
  kiln::v1::Graph graph;
  kiln::v1::CompileOptions options;  // the salt makes otherwise equal graphs distinct

  kiln::v1::CompileRequest Request() const;
};

// Every examples/*.json graph the reference evaluator can check (static
// sizes, ops it knows), under `examples_dir`.
absl::StatusOr<std::vector<Workload>> ExampleWorkloads(const std::string& examples_dir);
// A chain of 1-12 pointwise ops (scalar add/sub/mul/div, relu, add or mul
// with the input) over a random [1-64, 1-300] float32 tensor.
Workload PointwiseWorkload(std::mt19937& random, const std::string& salt);
// relu(x @ w + c) with random sizes up to 96.
Workload LinearWorkload(std::mt19937& random, const std::string& salt);
// Either of the two, pointwise three times in four.
Workload GeneratedWorkload(std::mt19937& random, const std::string& salt);

enum class Verdict { kCorrect, kWrong, kError };

struct RunResult {
  Verdict verdict = Verdict::kError;
  absl::Status error;  // kError: why
  std::string detail;  // kWrong: the first element that differs
  bool cache_hit = false;
  std::string key;
};

// Fetches (compiling on a miss) and loads `workload` through a fresh
// CompiledGraph on `client`, runs it on inputs drawn from `seed` and
// compares every output with the reference evaluator (|error| <= 1e-4 +
// 1e-4 |expected|, NaN where the reference has NaN).
RunResult RunAndCheck(Client* client, const Workload& workload, uint32_t seed);

// What a store holds, checked entry by entry against the workloads that
// could have made its entries.
struct StoreAudit {
  int64_t listed = 0;    // entries List returned
  int64_t verified = 0;  // found by Lookup, loaded from kilnd's answer, run and correct
  int64_t corrupt = 0;   // a Lookup or load error, or a listed key no workload explains
  int64_t wrong = 0;     // loaded and run, but a wrong result
  int64_t corrupt_blobs = 0, corrupt_entries = 0, unreadable_ranges = 0;  // kilnd's stats
  std::vector<std::string> problems;                                      // one line each
};
// Lists the store, looks every workload up (never compiling), loads each
// hit from kilnd's answer (digest and ABI checks), runs it against the
// reference, and accounts for every listed key.
StoreAudit AuditStore(Client* client, const std::vector<Workload>& workloads, uint32_t seed);

// A JSON string literal.
std::string JsonString(const std::string& text);

}  // namespace kiln::stress

#endif  // KILN_TOOLS_STRESS_WORKLOAD_H_
