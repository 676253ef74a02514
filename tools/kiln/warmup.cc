#include "tools/kiln/warmup.h"

#include <signal.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/traffic.h"
#include "client/warmup_plan.h"
#include "client/warmup_suggest.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "tools/kiln/json.h"

namespace kiln {
namespace {

std::atomic<bool> interrupted{false};

void OnInterrupt(int) { interrupted = true; }

// What the compiles have come to so far.
struct Tally {
  absl::Mutex mutex;
  int done ABSL_GUARDED_BY(mutex) = 0;
  int hits ABSL_GUARDED_BY(mutex) = 0;
  int compiled ABSL_GUARDED_BY(mutex) = 0;
  std::vector<std::pair<std::string, std::string>> failures ABSL_GUARDED_BY(mutex);
};

std::string Seconds(absl::Duration duration) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(duration));
}

std::string ProgressLine(Tally& tally, int total, absl::Time start, bool bar) {
  absl::MutexLock lock(&tally.mutex);
  const absl::Duration elapsed = absl::Now() - start;
  std::string eta = "?";
  if (tally.done > 0 && tally.done < total) {
    eta = Seconds(elapsed / tally.done * (total - tally.done));
  } else if (tally.done == total) {
    eta = "0.0 s";
  }
  std::string line;
  if (bar) {
    constexpr int kWidth = 24;
    const int filled = total == 0 ? kWidth : tally.done * kWidth / total;
    line = absl::StrCat("[", std::string(filled, '#'), std::string(kWidth - filled, ' '), "] ");
  }
  absl::StrAppend(&line, "warmup ", tally.done, "/", total, ": ", tally.hits, " hits, ",
                  tally.compiled, " compiled, ", tally.failures.size(), " failed; ",
                  Seconds(elapsed), " elapsed, ETA ", eta);
  return line;
}

}  // namespace

absl::Status RunWarmup(const std::string& plan_path, Client& client, const WarmupOptions& options,
                       std::ostream& out, std::ostream& progress) {
  ASSIGN_OR_RETURN(const kiln::v1::WarmupPlan plan, ReadWarmupPlan(plan_path));
  ASSIGN_OR_RETURN(const std::vector<WarmupCompile> compiles,
                   ExpandWarmupPlan(plan, Dirname(plan_path)));
  int buckets = 0;
  for (const WarmupCompile& compile : compiles) buckets += compile.buckets.size();
  const int total = static_cast<int>(compiles.size());

  interrupted = false;
  struct sigaction action = {}, previous = {};
  action.sa_handler = OnInterrupt;
  sigaction(SIGINT, &action, &previous);

  const absl::Time start = absl::Now();
  Tally tally;
  std::atomic<int> next{0};
  auto work = [&] {
    while (!interrupted) {
      const int i = next++;
      if (i >= total) return;
      const absl::StatusOr<kiln::v1::CompileResponse> response =
          client.Compile(compiles[i].request);
      absl::MutexLock lock(&tally.mutex);
      ++tally.done;
      if (!response.ok()) {
        tally.failures.emplace_back(compiles[i].name, std::string(response.status().message()));
      } else if (response->cache_hit()) {
        ++tally.hits;
      } else {
        ++tally.compiled;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, std::min(options.jobs, total)); ++t) threads.emplace_back(work);

  // Progress until every thread is done: redrawn in place on a terminal,
  // a plain line every few seconds otherwise.
  const absl::Duration period = options.terminal ? absl::Milliseconds(100) : absl::Seconds(5);
  absl::Time last_line = start;
  while (true) {
    {
      absl::MutexLock lock(&tally.mutex);
      const int started = std::min(next.load(), total);
      if (tally.done == total || (interrupted && tally.done == started)) break;
    }
    absl::SleepFor(absl::Milliseconds(50));
    if (absl::Now() - last_line < period) continue;
    last_line = absl::Now();
    if (options.terminal) {
      progress << "\r" << ProgressLine(tally, total, start, true) << std::flush;
    } else {
      progress << ProgressLine(tally, total, start, false) << std::endl;
    }
  }
  for (std::thread& thread : threads) thread.join();
  sigaction(SIGINT, &previous, nullptr);
  if (options.terminal) progress << "\r" << ProgressLine(tally, total, start, true) << "\n";

  absl::MutexLock lock(&tally.mutex);
  const int skipped = total - tally.done;
  const double elapsed_s = absl::ToDoubleSeconds(absl::Now() - start);
  if (options.json) {
    std::string failures;
    for (const auto& [name, reason] : tally.failures) {
      absl::StrAppend(&failures, failures.empty() ? "" : ", ", "{\"compile\": \"",
                      absl::CHexEscape(name), "\", \"error\": \"", absl::CHexEscape(reason), "\"}");
    }
    out << absl::StrFormat(
        "{\"plan\": \"%s\", \"buckets\": %d, \"compiles\": %d, \"hits\": %d, \"compiled\": %d, "
        "\"failed\": %d, \"cancelled\": %d, \"elapsed_s\": %.3f, \"failures\": [%s]}\n",
        absl::CHexEscape(plan_path), buckets, total, tally.hits, tally.compiled,
        tally.failures.size(), skipped, elapsed_s, failures);
  } else {
    out << absl::StrFormat(
        "warmed %d buckets with %d compiles: %d hits, %d compiled, %d failed%s in %.2f s\n",
        buckets, total, tally.hits, tally.compiled, tally.failures.size(),
        skipped > 0 ? absl::StrCat(", ", skipped, " cancelled") : "", elapsed_s);
  }
  if (tally.failures.empty() && skipped == 0) return absl::OkStatus();
  std::vector<std::string> lines;
  if (!tally.failures.empty()) {
    lines.push_back(absl::StrCat(tally.failures.size(), " of ", total, " compiles failed:"));
  }
  for (const auto& [name, reason] : tally.failures) {
    lines.push_back(absl::StrCat("  ", name, ": ", reason));
  }
  if (skipped > 0) lines.push_back(absl::StrCat("interrupted: ", skipped, " compiles not sent"));
  const std::string message = absl::StrJoin(lines, "\n");
  return absl::AbortedError(message);
}

absl::Status SuggestWarmup(const std::string& graph_path, Client& client,
                           const SuggestOptions& options, std::ostream& out, std::ostream& info) {
  ASSIGN_OR_RETURN(const kiln::v1::Graph graph, ReadGraphFile(graph_path));
  const std::string digest = GraphDigest(graph);
  ASSIGN_OR_RETURN(const kiln::v1::TrafficHistogram traffic, client.Traffic(digest));
  if (traffic.rows_size() == 0 && traffic.other_calls() == 0) {
    return absl::NotFoundError(absl::StrCat(
        "kilnd has no recorded traffic for ", graph_path, " (graph digest ", digest.substr(0, 12),
        "): serving processes record the sizes they run a CompiledGraph of this graph at, and "
        "send them while connected to this kilnd"));
  }
  ASSIGN_OR_RETURN(const WarmupSuggestion suggestion,
                   SuggestWarmupPlan(graph, traffic, options.share, options.max_buckets));
  kiln::v1::WarmupPlan plan;
  kiln::v1::WarmupGraph* entry = plan.add_graphs();
  *entry = suggestion.entry;
  entry->set_graph(graph_path);
  out << ToJson(plan);
  const double covered =
      100.0 * suggestion.covered_calls / std::max<int64_t>(suggestion.total_calls, 1);
  info << absl::StrFormat("%d buckets cover %.1f%% of %d recorded calls", suggestion.buckets,
                          covered, suggestion.total_calls);
  if (suggestion.covered_calls < options.share * suggestion.total_calls) {
    info << absl::StrFormat(" (%.1f%% wanted: allow more than %d buckets with --max_buckets)",
                            100 * options.share, options.max_buckets);
  }
  if (suggestion.unmatched_calls > 0) {
    info << "; " << suggestion.unmatched_calls << " calls at sizes the graph does not fit";
  }
  info << "\n";
  return absl::OkStatus();
}

}  // namespace kiln
