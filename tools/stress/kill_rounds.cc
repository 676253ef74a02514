// kill -9 rounds (campaigns.h).
#include <signal.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tools/stress/campaigns.h"
#include "tools/stress/workload.h"

namespace kiln::stress {

std::string KillRoundsReport::Json() const {
  std::vector<std::string> quoted;
  for (const std::string& violation : violations) quoted.push_back(JsonString(violation));
  return absl::StrFormat(
      "{\"campaign\": \"kill_rounds\", \"rounds\": %d, \"kilnd_kills\": %d, \"worker_kills\": %d, "
      "\"runs_correct\": %d, \"runs_failed_during_kill\": %d, \"entries_checked\": %d, "
      "\"entries_listed_last\": %d, \"corrupt_entries\": %d, \"wrong_results\": %d, "
      "\"max_rss_kib\": %d, \"seconds\": %.1f, \"violations\": [%s]}",
      rounds, kilnd_kills, worker_kills, runs_correct, runs_failed_during_kill, entries_checked,
      entries_listed_last, corrupt_entries, wrong_results, max_rss_kib, seconds,
      absl::StrJoin(quoted, ", "));
}

std::string KillRoundsReport::Text() const {
  std::string text = absl::StrFormat(
      "kill_rounds: %d rounds (%d kilnd kills, %d worker kills) in %.1f s\n"
      "  runs: %d correct, %d failed while a process was down\n"
      "  entries: %d checked over the rounds, %d in the store at the end\n"
      "  corrupt entries: %d, wrong results: %d, kilnd max RSS %d KiB\n",
      rounds, kilnd_kills, worker_kills, seconds, runs_correct, runs_failed_during_kill,
      entries_checked, entries_listed_last, corrupt_entries, wrong_results, max_rss_kib);
  for (const std::string& violation : violations)
    absl::StrAppend(&text, "  VIOLATION ", violation, "\n");
  return text;
}

absl::StatusOr<KillRoundsReport> RunKillRounds(const KillRoundsOptions& options) {
  const absl::Time start = absl::Now();
  KillRoundsReport report;
  std::mt19937 random(options.common.seed);
  auto examples = ExampleWorkloads(options.common.examples_dir);
  if (!examples.ok()) return examples.status();
  // Identical across clients and rounds: hits, and coalesced misses at first.
  std::vector<Workload> shared = *examples;
  for (int i = 0; i < 3; ++i) shared.push_back(GeneratedWorkload(random, "shared"));
  std::vector<Workload> submitted = shared;

  auto daemon = DaemonProcess::Create(CampaignDaemon(options.common));
  if (!daemon.ok()) return daemon.status();
  DaemonProcess& kilnd = **daemon;
  const std::vector<std::string> flags = {"--compile_jobs=2"};
  if (absl::Status started = kilnd.Start(flags); !started.ok()) return started;

  absl::Mutex mutex;
  for (int round = 1; round <= options.rounds; ++round) {
    std::vector<Workload> fresh;
    for (int i = 0; i < options.new_graphs_per_round; ++i) {
      fresh.push_back(GeneratedWorkload(random, absl::StrCat("round", round, "-", i)));
    }
    submitted.insert(submitted.end(), fresh.begin(), fresh.end());

    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int c = 0; c < options.clients; ++c) {
      const uint32_t client_seed = random();
      clients.emplace_back([&, client_seed] {
        std::mt19937 choose(client_seed);
        std::unique_ptr<Client> client;
        while (!stop) {
          if (client == nullptr) {
            auto connected = kilnd.Connect();
            if (!connected.ok()) {
              absl::SleepFor(absl::Milliseconds(20));
              continue;
            }
            client = *std::move(connected);
          }
          const bool pick_shared = std::uniform_int_distribution<int>(0, 1)(choose) == 0;
          const std::vector<Workload>& pool = pick_shared ? shared : fresh;
          const Workload& workload =
              pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(choose)];
          // A few input seeds per graph: the reference's answers are reused.
          const RunResult run = RunAndCheck(client.get(), workload, choose() % 3);
          if (run.verdict == Verdict::kError) absl::SleepFor(absl::Milliseconds(50));
          absl::MutexLock lock(&mutex);
          if (run.verdict == Verdict::kCorrect) {
            ++report.runs_correct;
          } else if (run.verdict == Verdict::kWrong) {
            ++report.wrong_results;
            report.violations.push_back(absl::StrCat("round ", round, ": WRONG ", run.detail));
          } else {
            // The daemon or a worker died under the call: an error, then a retry.
            ++report.runs_failed_during_kill;
            if (options.common.verbose) {
              std::cerr << "  round " << round << " " << workload.name << ": " << run.error << "\n";
            }
          }
        }
      });
    }

    const int64_t wait_ms = std::uniform_int_distribution<int64_t>(
        absl::ToInt64Milliseconds(options.kill_after_min),
        absl::ToInt64Milliseconds(options.kill_after_max))(random);
    absl::SleepFor(absl::Milliseconds(wait_ms));
    report.max_rss_kib = std::max(report.max_rss_kib, kilnd.RssKib());
    const std::vector<pid_t> workers = kilnd.CompileWorkers();
    const bool kill_worker = !workers.empty() && std::uniform_int_distribution<int>(0, 1)(random);
    std::string what;
    if (kill_worker) {
      const pid_t worker =
          workers[std::uniform_int_distribution<size_t>(0, workers.size() - 1)(random)];
      kill(worker, SIGKILL);
      ++report.worker_kills;
      what = absl::StrCat("worker ", worker);
      absl::SleepFor(options.run_after_restart);
      if (!kilnd.Alive()) {
        report.violations.push_back(absl::StrCat("round ", round, ": kilnd exited (status ",
                                                 kilnd.exit_status(), ") after a worker kill"));
        if (absl::Status restarted = kilnd.Start(flags); !restarted.ok()) return restarted;
      }
    } else {
      what = absl::StrCat("kilnd ", kilnd.pid());
      kilnd.Kill(SIGKILL);
      ++report.kilnd_kills;
      if (absl::Status restarted = kilnd.Start(flags); !restarted.ok()) {
        stop = true;
        for (std::thread& thread : clients) thread.join();
        report.violations.push_back(
            absl::StrCat("round ", round, ": kilnd does not restart: ", restarted.ToString()));
        break;
      }
      absl::SleepFor(options.run_after_restart);
    }
    stop = true;
    const absl::Time stopping = absl::Now();
    for (std::thread& thread : clients) thread.join();
    ++report.rounds;
    const absl::Duration joined = absl::Now() - stopping;

    // Every entry the store holds now must load and run correctly.
    auto client = kilnd.Connect();
    if (!client.ok()) return client.status();
    const absl::Time audit_start = absl::Now();
    const StoreAudit audit = AuditStore(client->get(), submitted, round % 3);
    const absl::Duration audited = absl::Now() - audit_start;
    report.entries_checked += audit.verified + audit.corrupt + audit.wrong;
    report.entries_listed_last = audit.listed;
    report.corrupt_entries += audit.corrupt + audit.corrupt_blobs + audit.corrupt_entries;
    report.wrong_results += audit.wrong;
    for (const std::string& problem : audit.problems) {
      report.violations.push_back(absl::StrCat("round ", round, ": ", problem));
    }
    if (audit.corrupt_blobs + audit.corrupt_entries + audit.unreadable_ranges > 0) {
      report.violations.push_back(
          absl::StrCat("round ", round, ": kilnd found damage after a kill: ", audit.corrupt_blobs,
                       " corrupt blobs, ", audit.corrupt_entries, " corrupt entries, ",
                       audit.unreadable_ranges, " unreadable ranges"));
    }
    if (options.common.verbose) {
      std::cerr << absl::StrFormat(
          "round %d: killed %s after %d ms; clients stopped in %s; %d listed, %d verified in %s\n",
          round, what, wait_ms, absl::FormatDuration(joined), audit.listed, audit.verified,
          absl::FormatDuration(audited));
    }
  }
  report.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return report;
}

}  // namespace kiln::stress
