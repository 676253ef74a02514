// Warmup plans (proto/warmup.proto): reading one, and expanding it into the
// compile requests that make every bucket a hit.
//
// A static bucket's request is the graph specialized to the bucket's sizes
// by proto/specialize.h Specialize — the code a serving process uses for its
// own specializations — so a bucket warmed by `kiln warmup` is a local hit
// in any process that asks for the same bucket. Buckets served by the
// symbolic artifact share one request: the graph as traced.
#ifndef KILN_CLIENT_WARMUP_PLAN_H_
#define KILN_CLIENT_WARMUP_PLAN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/service.pb.h"
#include "proto/warmup.pb.h"

namespace kiln {

// The plan in `path` (protobuf JSON). InvalidArgument naming the file when
// it does not parse.
absl::StatusOr<kiln::v1::WarmupPlan> ReadWarmupPlan(const std::string& path);

// One compile of an expanded plan, and the buckets it serves.
struct WarmupCompile {
  // Names the plan entry and the bucket, for progress and errors:
  // "graphs[0] layer.json B=8 S=16" (static) or "graphs[1] f.json symbolic".
  std::string name;
  // Symbol sizes of each bucket it serves (one for a static bucket).
  std::vector<std::map<std::string, int64_t>> buckets;
  kiln::v1::CompileRequest request;  // priority PRIORITY_WARMUP
  bool symbolic = false;             // the graph as traced, serving its buckets
};

// Per input of `graph`, its sizes in `bucket` (symbol sizes). A symbol the
// bucket does not list takes the value of a symbol stated equal to it, else
// the smallest value the graph's relations allow (>= 2).
std::vector<std::vector<int64_t>> BucketInputSizes(const kiln::v1::Graph& graph,
                                                   const std::map<std::string, int64_t>& bucket);

// The graph file of `entry`: its `graph`, relative to `plan_dir` unless
// absolute; for a package that kiln.save wrote (a directory), the
// package's graph.json.
std::string WarmupGraphPath(const kiln::v1::WarmupGraph& entry, const std::string& plan_dir);

// Every compile `plan` needs, graph files read relative to `plan_dir`, in
// plan order. Errors name the entry (graphs[i], its file and symbol):
// NotFound for a graph file that cannot be read; InvalidArgument for a
// symbol the graph's inputs do not have, a symbol listed twice, an empty or
// inverted rule, a size below 1, sizes that break an equality between
// symbols, or a bucket for the symbolic artifact that breaks one of the
// graph's relations (ranges, divisibility).
absl::StatusOr<std::vector<WarmupCompile>> ExpandWarmupPlan(const kiln::v1::WarmupPlan& plan,
                                                            const std::string& plan_dir);

// The compiles of one plan entry for `graph` (entry.graph is not read),
// named after `label`; errors as ExpandWarmupPlan's.
absl::StatusOr<std::vector<WarmupCompile>> ExpandWarmupGraph(const kiln::v1::Graph& graph,
                                                             const kiln::v1::WarmupGraph& entry,
                                                             const std::string& label);

// The sizes of one SymbolSizes (list and rules, sorted, without repeats);
// InvalidArgument for an empty or inverted rule or a size below 1.
absl::StatusOr<std::vector<int64_t>> ExpandSizes(const kiln::v1::SymbolSizes& sizes);

}  // namespace kiln

#endif  // KILN_CLIENT_WARMUP_PLAN_H_
