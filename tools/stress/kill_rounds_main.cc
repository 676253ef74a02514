// kill_rounds: SIGKILL kilnd or a compile worker at random times during
// concurrent compiles, restart, and check every stored entry.
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tools/stress/main_util.h"

ABSL_FLAG(int, rounds, 20, "Kill rounds.");
ABSL_FLAG(int, clients, 4, "Concurrent client threads.");
ABSL_FLAG(int, new_graphs, 6, "Fresh (salted) graphs per round, beside the shared ones.");
ABSL_FLAG(absl::Duration, kill_after_max, absl::Milliseconds(1500),
          "A round's kill comes between 50 ms and this long after its clients start.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "kill_rounds: kill -9 of kilnd and of its compile workers during concurrent compiles.\n"
      "Exits 1 on any corrupt entry or wrong result. Usage:\n"
      "  bazel run -c opt //tools/stress:kill_rounds -- --rounds=20 --seed=1 [--json]");
  absl::ParseCommandLine(argc, argv);
  kiln::stress::KillRoundsOptions options;
  options.common = kiln::stress::CommonOptionsFromFlags();
  options.rounds = absl::GetFlag(FLAGS_rounds);
  options.clients = absl::GetFlag(FLAGS_clients);
  options.new_graphs_per_round = absl::GetFlag(FLAGS_new_graphs);
  options.kill_after_max = absl::GetFlag(FLAGS_kill_after_max);
  return kiln::stress::Finish("kill_rounds", kiln::stress::RunKillRounds(options),
                              absl::GetFlag(FLAGS_json));
}
