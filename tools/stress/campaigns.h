// The robustness campaigns, as functions: the tools/stress binaries run
// them long (docs/RELIABILITY.md has the commands and figures) and
// tests/stress_test.cc runs them short. Each returns a report whose
// `violations` must be empty; everything else in it is a figure.
#ifndef KILN_TOOLS_STRESS_CAMPAIGNS_H_
#define KILN_TOOLS_STRESS_CAMPAIGNS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/daemon_process/daemon_process.h"

namespace kiln::stress {

struct CommonOptions {
  std::string kilnd;         // the kilnd binary (FindKilnd)
  std::string examples_dir;  // examples/*.json
  uint32_t seed = 1;
  bool verbose = false;  // a line per round / trial / batch on stderr
};

// The private kilnd a campaign starts: `common.kilnd`, with an RPC timeout
// long enough for the compiles a campaign queues up.
inline DaemonProcess::Options CampaignDaemon(const CommonOptions& common) {
  DaemonProcess::Options options;
  options.kilnd = common.kilnd;
  options.client.client_name = "kiln-stress";
  options.client.rpc_timeout = absl::Seconds(150);
  return options;
}

// kill -9 rounds: concurrent clients compile distinct and identical graphs
// while kilnd or one of its compile workers is SIGKILLed at a random time;
// kilnd is restarted and every stored entry is checked.
struct KillRoundsOptions {
  CommonOptions common;
  int rounds = 20;
  int clients = 4;
  int new_graphs_per_round = 6;  // salted: compiles in flight when the kill comes
  absl::Duration kill_after_min = absl::Milliseconds(50);
  absl::Duration kill_after_max = absl::Milliseconds(1500);
  absl::Duration run_after_restart = absl::Milliseconds(500);
};
struct KillRoundsReport {
  int rounds = 0, kilnd_kills = 0, worker_kills = 0;
  int64_t runs_correct = 0, runs_failed_during_kill = 0;
  int64_t entries_checked = 0, entries_listed_last = 0;
  int64_t corrupt_entries = 0, wrong_results = 0;
  int64_t max_rss_kib = 0;
  std::vector<std::string> violations;
  double seconds = 0;
  std::string Json() const;
  std::string Text() const;
};
absl::StatusOr<KillRoundsReport> RunKillRounds(const KillRoundsOptions& options);

// Bit flips: for each kind of file under the cache directory, copies of one
// populated cache get random bytes of one such file flipped while kilnd is
// stopped; kilnd starts on the copy and every graph must come out correct
// (a clear error followed by a correct retry counts as detected), kilnd
// must not crash, a second pass must be all correct, and a restart must
// bring no damage back.
struct BitFlipsOptions {
  CommonOptions common;
  int flips_per_kind = 5;
  int max_bytes_per_flip = 3;  // 1..this many bytes flipped per trial
  int generated_graphs = 4;
  std::vector<std::string> kinds;  // empty: every kind (FileKinds())
};
struct KindFigures {
  int trials = 0, absent = 0;  // absent: the cache had no file of the kind
  int detected = 0, harmless = 0, wrong = 0, crash = 0, unhealed = 0;
  // Over the trials: graphs run after the flip, and how many of them were
  // still a hit (their entry survived).
  int graphs = 0, kept = 0;
};
struct BitFlipsReport {
  std::map<std::string, KindFigures> kinds;
  std::vector<std::string> violations;
  double seconds = 0;
  std::string Json() const;
  std::string Text() const;
};
std::vector<std::string> FileKinds();
absl::StatusOr<BitFlipsReport> RunBitFlips(const BitFlipsOptions& options);

// Malformed requests: generated CompileRequests that break one rule each,
// and raw gRPC calls with bytes that are not a valid request, with and
// without the version metadata. Each must be refused with the expected
// code; kilnd must stay alive and its RSS bounded.
struct MalformedOptions {
  CommonOptions common;
  int requests = 1000;  // generated CompileRequests
  int raw_calls = 300;  // raw gRPC calls
  int batch = 100;      // liveness and RSS sampled after each batch
  int64_t max_rss_growth_kib = 256 << 10;
};
struct MalformedReport {
  int64_t requests = 0, raw_calls = 0;
  std::map<std::string, int64_t> by_code;      // "INVALID_ARGUMENT" -> count
  std::map<std::string, int64_t> by_mutation;  // "dangling_input" -> count
  int64_t accepted_valid = 0;                  // a mutation that left a valid graph, compiled
  // kilnd's RSS after the warm-up, the largest once a batch settled (what
  // the limit applies to), the largest sampled at all, and at the end.
  int64_t rss_start_kib = 0, rss_max_kib = 0, rss_peak_kib = 0, rss_end_kib = 0;
  std::vector<std::string> violations;
  double seconds = 0;
  std::string Json() const;
  std::string Text() const;
};
absl::StatusOr<MalformedReport> RunMalformedRequests(const MalformedOptions& options);

}  // namespace kiln::stress

#endif  // KILN_TOOLS_STRESS_CAMPAIGNS_H_
