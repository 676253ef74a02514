// The robustness campaigns in a bounded form (tools/stress; the long forms
// and their figures are in docs/RELIABILITY.md): kill -9 rounds, bit flips
// in every kind of cache file, malformed requests. Each asserts zero
// violations and prints the campaign's summary.
#include <iostream>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/daemon_fixture.h"
#include "tools/stress/campaigns.h"

namespace kiln::stress {
namespace {

CommonOptions Common(uint32_t seed) {
  CommonOptions options;
  options.kilnd = kKilndPath;
  options.examples_dir = "examples";
  options.seed = seed;
  return options;
}

TEST(StressTest, KillRoundsLeaveNoCorruptEntryAndNoWrongResult) {
  KillRoundsOptions options;
  options.common = Common(11);
  options.rounds = 5;
  options.clients = 2;
  options.new_graphs_per_round = 2;
  options.kill_after_max = absl::Milliseconds(600);
  options.run_after_restart = absl::Milliseconds(200);
  auto report = RunKillRounds(options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::cout << report->Text();
  EXPECT_EQ(report->rounds, 5);
  EXPECT_EQ(report->corrupt_entries, 0);
  EXPECT_EQ(report->wrong_results, 0);
  EXPECT_GT(report->entries_checked, 0) << "the rounds stored something to check";
  EXPECT_GT(report->runs_correct, 0);
  EXPECT_TRUE(report->violations.empty()) << absl::StrJoin(report->violations, "\n");
}

TEST(StressTest, BitFlipsInEveryKindOfCacheFileAreDetectedOrHarmless) {
  BitFlipsOptions options;
  options.common = Common(12);
  options.flips_per_kind = 1;
  options.generated_graphs = 1;
  auto report = RunBitFlips(options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::cout << report->Text();
  for (const std::string& kind : FileKinds()) {
    const KindFigures& figures = report->kinds[kind];
    EXPECT_EQ(figures.trials, 1) << kind << ": the populated cache has such a file";
    EXPECT_EQ(figures.wrong, 0) << kind;
    EXPECT_EQ(figures.crash, 0) << kind;
    EXPECT_EQ(figures.unhealed, 0) << kind;
    EXPECT_EQ(figures.detected + figures.harmless, figures.trials) << kind;
  }
  EXPECT_TRUE(report->violations.empty()) << absl::StrJoin(report->violations, "\n");
}

TEST(StressTest, MalformedRequestsAreRefusedAndKilndStaysUpAndSmall) {
  MalformedOptions options;
  options.common = Common(13);
  options.requests = 1000;
  options.raw_calls = 200;
  // What the largest refused requests (a 131,073-node chain) leave in
  // malloc's arenas: 72 MiB over 12,000 calls in the long form.
  options.max_rss_growth_kib = 256 << 10;
  auto report = RunMalformedRequests(options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::cout << report->Text();
  EXPECT_EQ(report->requests, 1000);
  EXPECT_EQ(report->raw_calls, 200);
  EXPECT_GT(report->by_code["INVALID_ARGUMENT"], 800);
  EXPECT_LE(report->rss_max_kib - report->rss_start_kib, options.max_rss_growth_kib);
  EXPECT_TRUE(report->violations.empty()) << absl::StrJoin(report->violations, "\n");
}

}  // namespace
}  // namespace kiln::stress
