// `kiln warmup PLAN.json`: compiles every bucket of a warmup plan
// (client/warmup_plan.h) through kilnd, several at once, below interactive
// misses (CompileRequest.priority), showing progress.
// `kiln warmup --suggest GRAPH.json`: a plan for the graph from the traffic
// serving processes recorded (client/traffic.h, client/warmup_suggest.h).
#ifndef KILN_TOOLS_KILN_WARMUP_H_
#define KILN_TOOLS_KILN_WARMUP_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "client/client.h"

namespace kiln {

struct WarmupOptions {
  int jobs = 8;           // requests in flight; kilnd's --compile_jobs bounds the compiles
  bool json = false;      // a summary object at the end instead of the text summary
  bool terminal = false;  // a progress bar redrawn in place; else a line every few seconds
};

// Expands and warms `plan_path`, printing progress to `progress` and the
// summary to `out`. OK when every compile succeeded; otherwise an error
// listing each failed compile and its reason. Ctrl-C stops sending new
// compiles: what finished stays cached.
absl::Status RunWarmup(const std::string& plan_path, Client& client, const WarmupOptions& options,
                       std::ostream& out, std::ostream& progress);

struct SuggestOptions {
  double share = 0.99;  // of the recorded calls the buckets should cover
  int max_buckets = 24;
};

// Prints to `out` a plan (JSON) whose one entry is `graph_path` with the
// buckets that cover `options.share` of the calls kilnd recorded for that
// graph, and to `info` what it covers. NotFound when kilnd has no traffic
// for the graph.
absl::Status SuggestWarmup(const std::string& graph_path, Client& client,
                           const SuggestOptions& options, std::ostream& out, std::ostream& info);

}  // namespace kiln

#endif  // KILN_TOOLS_KILN_WARMUP_H_
