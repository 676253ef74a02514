#include "tools/bench/kernel_report.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/bench/kernel_sides.h"

namespace kiln::bench {
namespace {

std::string Cell(const Samples& samples, const std::string& key, const char* format = "%.4g") {
  const std::optional<Summary> summary = Summarize(samples, key);
  return summary ? absl::StrFormat(format, summary->median) : "-";
}

std::string Range(const Samples& samples, const std::string& key) {
  const std::optional<Summary> summary = Summarize(samples, key);
  return summary ? absl::StrFormat("%.2f/%.2f/%.2f", summary->min, summary->median, summary->max)
                 : "n/a";
}

std::string Verdict(const Samples& samples, const std::string& key, double target, bool at_most) {
  if (target <= 0) return "";
  const std::optional<Summary> summary = Summarize(samples, key);
  if (!summary) return "n/a";
  const bool met = at_most ? summary->median <= target : summary->median >= target;
  return absl::StrFormat("%s%g %s", at_most ? "<=" : ">=", target, met ? "met" : "MISSED");
}

}  // namespace

void PrintTable(const Samples& samples, const Fields& facts) {
  absl::PrintF(
      "\nKiln kernels vs eager PyTorch (float32; times are medians over rounds of "
      "per-batch medians)\n");
  for (const auto& [key, value] : facts) absl::PrintF("  %-24s %s\n", key, value);
  // Times in us; "pre": Kiln into preallocated outputs; "AVX2": eager with
  // torch's default dispatch; speedups are eager / Kiln, per round.
  absl::PrintF("\n%-22s %3s %9s %9s %9s %9s  %-19s %7s %7s  %-13s %s\n", "measure", "thr", "kiln",
               "kiln pre", "eager", "eager AVX2", "speedup min/med/max", "vs AVX2", "pre vs",
               "minflt k/e", "target (1 thread)");
  for (const Measure& measure : kMeasures) {
    for (int threads = 1; threads <= 2; ++threads) {
      const std::string suffix = ThreadSuffix(threads);
      const std::string key = measure.key;
      absl::PrintF("%-22s %3d %9s %9s %9s %9s  %-19s %7s %7s  %-13s %s\n", threads == 1 ? key : "",
                   threads, Cell(samples, key + "_kiln" + suffix + "_us"),
                   measure.out ? "(same)" : Cell(samples, key + "_kiln_prealloc" + suffix + "_us"),
                   Cell(samples, key + "_eager" + suffix + "_us"),
                   Cell(samples, key + "_eager_default" + suffix + "_us"),
                   Range(samples, key + suffix),
                   Cell(samples, key + "_vs_default" + suffix, "%.2f"),
                   measure.out ? "" : Cell(samples, key + "_prealloc" + suffix, "%.2f"),
                   absl::StrCat(Cell(samples, key + "_kiln" + suffix + "_minflt", "%.3g"), "/",
                                Cell(samples, key + "_eager" + suffix + "_minflt", "%.3g")),
                   threads == 1 ? Verdict(samples, key, measure.target, false) : "");
    }
    absl::PrintF("  %s\n", measure.what);
  }
  absl::PrintF("\n%-44s %-24s %s\n", "figure", "min/median/max", "target (1 thread)");
  auto row = [&](const std::string& label, const std::string& key, const std::string& target) {
    absl::PrintF("%-44s %-24s %s\n", label, Range(samples, key), target);
  };
  for (int threads = 1; threads <= 2; ++threads) {
    const std::string suffix = ThreadSuffix(threads);
    const std::string at = threads == 1 ? "" : " (2 threads)";
    row("copy_bandwidth_fraction" + suffix, "copy_bandwidth_fraction" + suffix,
        threads == 1 ? Verdict(samples, "copy_bandwidth_fraction", 0.9, false) : "");
    row("  copy loop, us" + at, "copy" + suffix + "_us", "");
    row("  copy loop, GB/s read+written" + at, "copy" + suffix + "_gb_s", "");
    row("  Kiln tail out=, GB/s read+written" + at, "tail_2048_out_kiln" + suffix + "_gb_s", "");
  }
  absl::PrintF("hand-written baselines, 1 thread (time / Kiln's preallocated time):\n");
  row("  softmax_1024, vscalefps", "softmax_1024_hand_scalef_fraction", "");
  row("    us", "softmax_1024_hand_scalef_us", "");
  row("  softmax_1024, Kiln's exp arithmetic", "softmax_1024_hand_kiln_math_fraction", "");
  row("    us", "softmax_1024_hand_kiln_math_us", "");
  row("  tail_2048_out, streaming stores", "tail_2048_out_streaming_fraction", "");
  row("    us", "tail_2048_out_streaming_us", "");
  row("    speedup over eager out=", "tail_2048_out_streaming_speedup", "");
  row("  Kiln's tail, then a pass reading it, us", "tail_2048_out_kiln_then_sum_us", "");
  row("  streaming tail, then a pass reading it, us", "tail_2048_out_streaming_then_sum_us", "");
  const std::string compile = absl::StrCat(kCompiledGraph, "_compile");
  row(compile + "_ms", compile + "_ms", Verdict(samples, compile + "_ms", 500, true));
  row("  in kilnd: graph -> C++", compile + "_codegen_ms", "");
  row("  in kilnd: C++ -> .so (worker clang+lld)", compile + "_compiler_ms", "");
  row("resnet18_first_call_ms (fresh process, 1 thread)", "resnet18_first_call_ms", "");
  row("  its Warmup before it, ms", "resnet18_warmup_ms", "");
  row("  slowest of its first 16 calls, ms", "resnet18_first_calls_max_ms", "");
  row("  median of the 16 after them, ms", "resnet18_steady_ms", "");
  row("  slowest first call / steady median", "resnet18_first_calls_max_ratio", "");
}

std::string JsonLine(const Samples& samples, const Fields& facts) {
  std::vector<std::string> keys;
  // The headline figures first, in the order of kMeasures.
  for (const Measure& measure : kMeasures) keys.push_back(measure.key);
  keys.push_back("copy_bandwidth_fraction");
  keys.push_back(absl::StrCat(kCompiledGraph, "_compile_ms"));
  keys.push_back("resnet18_first_call_ms");
  for (const auto& [key, values] : samples) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return bench::JsonLine(samples, keys, facts);
}

}  // namespace kiln::bench
