// Bit flips in every kind of file under the cache directory (campaigns.h).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"
#include "tools/stress/campaigns.h"
#include "tools/stress/workload.h"

namespace kiln::stress {
namespace {

// Regular files below `dir` (recursively) whose path relative to `dir`
// passes `keep`.
void ListFiles(const std::string& dir, const std::string& relative,
               const std::function<bool(const std::string&)>& keep,
               std::vector<std::string>& files) {
  DIR* listing = opendir((dir + "/" + relative).c_str());
  if (listing == nullptr) return;
  while (const dirent* entry = readdir(listing)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = relative.empty() ? name : relative + "/" + name;
    struct stat info;
    if (lstat((dir + "/" + path).c_str(), &info) != 0) continue;
    if (S_ISDIR(info.st_mode)) {
      ListFiles(dir, path, keep, files);
    } else if (S_ISREG(info.st_mode) && keep(path)) {
      files.push_back(path);
    }
  }
  closedir(listing);
  std::sort(files.begin(), files.end());
}

// Which files of a cache directory make up each kind.
std::function<bool(const std::string&)> KindFilter(const std::string& kind) {
  auto in_db = [](const std::string& path, const std::string& prefix, const std::string& suffix) {
    if (!absl::StartsWith(path, "db/")) return false;
    const std::string name = path.substr(3);
    return name.find('/') == std::string::npos && absl::StartsWith(name, prefix) &&
           absl::EndsWith(name, suffix);
  };
  if (kind == "object")
    return [](const std::string& p) {
      return absl::StartsWith(p, "objects/") && absl::EndsWith(p, ".so");
    };
  if (kind == "sst") return [=](const std::string& p) { return in_db(p, "", ".sst"); };
  if (kind == "wal") return [=](const std::string& p) { return in_db(p, "", ".log"); };
  if (kind == "manifest") return [=](const std::string& p) { return in_db(p, "MANIFEST-", ""); };
  if (kind == "current") return [=](const std::string& p) { return in_db(p, "CURRENT", ""); };
  if (kind == "options") return [=](const std::string& p) { return in_db(p, "OPTIONS-", ""); };
  if (kind == "identity") return [=](const std::string& p) { return in_db(p, "IDENTITY", ""); };
  if (kind == "index") return [](const std::string& p) { return absl::StartsWith(p, "index/"); };
  if (kind == "descriptor") return [](const std::string& p) { return p == "descriptor"; };
  return [](const std::string&) { return false; };
}

// XORs `count` random bytes of `path` with random non-zero masks, in place
// (read-only objects made writable for it, then restored).
absl::Status FlipBytes(const std::string& path, int count, std::mt19937& random) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || info.st_size == 0) {
    return absl::NotFoundError(absl::StrCat("nothing to flip in ", path));
  }
  chmod(path.c_str(), (info.st_mode | S_IWUSR) & 07777);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  absl::Status status = absl::OkStatus();
  if (fd < 0) {
    status = absl::InternalError(absl::StrCat("cannot open ", path));
  } else {
    for (int i = 0; i < count; ++i) {
      const off_t at = std::uniform_int_distribution<off_t>(0, info.st_size - 1)(random);
      unsigned char byte;
      if (pread(fd, &byte, 1, at) != 1) continue;
      byte ^= static_cast<unsigned char>(std::uniform_int_distribution<int>(1, 255)(random));
      if (pwrite(fd, &byte, 1, at) != 1)
        status = absl::InternalError(absl::StrCat("cannot write ", path));
    }
    close(fd);
  }
  chmod(path.c_str(), info.st_mode & 07777);
  return status;
}

bool HasWarningsOrErrors(const std::string& log) {
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StartsWith(line, "E") || absl::StartsWith(line, "W")) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> FileKinds() {
  return {"object",  "sst",      "wal",   "manifest",  "current",
          "options", "identity", "index", "descriptor"};
}

std::string BitFlipsReport::Json() const {
  std::vector<std::string> kinds_json, quoted;
  for (const auto& [kind, f] : kinds) {
    kinds_json.push_back(absl::StrFormat(
        "%s: {\"trials\": %d, \"absent\": %d, \"detected\": %d, \"harmless\": %d, \"wrong\": %d, "
        "\"crash\": %d, \"unhealed\": %d, \"graphs\": %d, \"kept\": %d}",
        JsonString(kind), f.trials, f.absent, f.detected, f.harmless, f.wrong, f.crash, f.unhealed,
        f.graphs, f.kept));
  }
  for (const std::string& violation : violations) quoted.push_back(JsonString(violation));
  return absl::StrFormat(
      "{\"campaign\": \"bit_flips\", \"kinds\": {%s}, \"seconds\": %.1f, \"violations\": [%s]}",
      absl::StrJoin(kinds_json, ", "), seconds, absl::StrJoin(quoted, ", "));
}

std::string BitFlipsReport::Text() const {
  std::string text = absl::StrFormat("bit_flips in %.1f s\n  %-11s %6s %8s %8s %5s %5s %8s %11s\n",
                                     seconds, "kind", "trials", "detected", "harmless", "wrong",
                                     "crash", "unhealed", "hits kept");
  for (const auto& [kind, f] : kinds) {
    absl::StrAppendFormat(&text, "  %-11s %6d %8d %8d %5d %5d %8d %5d / %-5d%s\n", kind, f.trials,
                          f.detected, f.harmless, f.wrong, f.crash, f.unhealed, f.kept, f.graphs,
                          f.absent > 0 ? absl::StrCat(" (", f.absent, " with no such file)") : "");
  }
  for (const std::string& violation : violations)
    absl::StrAppend(&text, "  VIOLATION ", violation, "\n");
  return text;
}

absl::StatusOr<BitFlipsReport> RunBitFlips(const BitFlipsOptions& options) {
  const absl::Time start = absl::Now();
  BitFlipsReport report;
  std::mt19937 random(options.common.seed);
  auto examples = ExampleWorkloads(options.common.examples_dir);
  if (!examples.ok()) return examples.status();
  std::vector<Workload> flushed = *examples, logged;
  for (int i = 0; i < options.generated_graphs; ++i) {
    flushed.push_back(GeneratedWorkload(random, absl::StrCat("flip", i)));
  }
  for (int i = 0; i < 2; ++i) logged.push_back(GeneratedWorkload(random, absl::StrCat("wal", i)));
  std::vector<Workload> all = flushed;
  all.insert(all.end(), logged.begin(), logged.end());

  // The populated cache every trial starts from: the first graphs in table
  // files (a restart flushes the log it replays), the last ones in the log.
  auto pristine = DaemonProcess::Create(CampaignDaemon(options.common));
  if (!pristine.ok()) return pristine.status();
  for (const std::vector<Workload>* batch : {&flushed, &logged}) {
    if (absl::Status started = (*pristine)->Start(); !started.ok()) return started;
    auto client = (*pristine)->Connect();
    if (!client.ok()) return client.status();
    for (const Workload& workload : *batch) {
      const RunResult run = RunAndCheck(client->get(), workload, 1);
      if (run.verdict != Verdict::kCorrect) {
        return absl::InternalError(absl::StrCat("cannot populate the cache with ", workload.name,
                                                ": ", run.error.ToString(), run.detail));
      }
    }
    (*pristine)->Kill(SIGTERM);
  }
  const std::string pristine_cache = (*pristine)->cache_dir();

  const std::vector<std::string> kinds = options.kinds.empty() ? FileKinds() : options.kinds;
  for (const std::string& kind : kinds) {
    KindFigures& figures = report.kinds[kind];
    for (int trial = 0; trial < options.flips_per_kind; ++trial) {
      const std::string label = absl::StrCat(kind, " trial ", trial + 1);
      auto daemon = DaemonProcess::Create(CampaignDaemon(options.common));
      if (!daemon.ok()) return daemon.status();
      DaemonProcess& kilnd = **daemon;
      auto copied = RunProcess({"cp", "-a", pristine_cache, kilnd.cache_dir()}, absl::Minutes(1));
      if (!copied.ok() || copied->exit_code != 0) {
        return absl::InternalError(absl::StrCat(
            "cannot copy the cache: ", copied.ok() ? copied->output : copied.status().ToString()));
      }
      std::vector<std::string> files;
      ListFiles(kilnd.cache_dir(), "", KindFilter(kind), files);
      if (files.empty()) {
        ++figures.absent;
        continue;
      }
      ++figures.trials;
      const std::string file =
          files[std::uniform_int_distribution<size_t>(0, files.size() - 1)(random)];
      const int bytes = std::uniform_int_distribution<int>(1, options.max_bytes_per_flip)(random);
      if (absl::Status flipped = FlipBytes(kilnd.cache_dir() + "/" + file, bytes, random);
          !flipped.ok()) {
        return flipped;
      }

      bool wrong = false, crash = false, unhealed = false, detected = false;
      auto violation = [&](bool& flag, const std::string& what) {
        flag = true;
        report.violations.push_back(
            absl::StrCat(label, " (", bytes, " bytes of ", file, "): ", what));
      };
      // Pass 1: correct, or a clear error and then correct.
      if (absl::Status started = kilnd.Start(); !started.ok()) {
        violation(crash, absl::StrCat("kilnd does not start: ", started.ToString()));
      } else {
        auto client = kilnd.Connect();
        for (const Workload& workload : all) {
          if (!client.ok()) break;
          RunResult run = RunAndCheck(client->get(), workload, trial % 2);
          if (run.verdict == Verdict::kError) {
            detected = true;
            run = RunAndCheck(client->get(), workload, trial % 2);
          }
          if (run.verdict == Verdict::kWrong) violation(wrong, absl::StrCat("WRONG ", run.detail));
          if (run.verdict == Verdict::kError) {
            violation(unhealed,
                      absl::StrCat(workload.name, " fails twice: ", run.error.ToString()));
          }
          ++figures.graphs;
          if (run.cache_hit) ++figures.kept;
          if (!run.cache_hit) detected = true;  // lost, and compiled again
        }
        if (auto stats = client.ok() ? (*client)->Stats() : client.status(); stats.ok()) {
          detected |= stats->compiles() > 0 || stats->corrupt_blobs() > 0 ||
                      stats->corrupt_entries() > 0 || stats->unreadable_ranges() > 0;
        }
        if (!kilnd.Alive())
          violation(crash, absl::StrCat("kilnd died, status ", kilnd.exit_status()));
        detected |= HasWarningsOrErrors(kilnd.LogSince(0));
        // A restart brings no damage back: every graph a hit, correct.
        if (kilnd.Alive()) {
          const int status = kilnd.Kill(SIGTERM);
          if (status != 0)
            violation(crash, absl::StrCat("kilnd exited with ", status, " on SIGTERM"));
        }
        if (absl::Status restarted = kilnd.Start(); !restarted.ok()) {
          violation(crash, absl::StrCat("kilnd does not restart: ", restarted.ToString()));
        } else if (auto again = kilnd.Connect(); again.ok()) {
          for (const Workload& workload : all) {
            const RunResult run = RunAndCheck(again->get(), workload, 1);
            if (run.verdict == Verdict::kWrong)
              violation(wrong, absl::StrCat("WRONG ", run.detail));
            if (run.verdict == Verdict::kError) {
              violation(unhealed, absl::StrCat("after a restart ", workload.name, ": ",
                                               run.error.ToString()));
            }
          }
          auto stats = (*again)->Stats();
          if (stats.ok() && (stats->compiles() > 0 || stats->unreadable_ranges() > 0)) {
            violation(unhealed, absl::StrCat("after a restart: ", stats->compiles(), " compiles, ",
                                             stats->unreadable_ranges(), " unreadable ranges"));
          }
          if (!kilnd.Alive()) violation(crash, "kilnd died after the restart");
        }
      }
      figures.wrong += wrong;
      figures.crash += crash;
      figures.unhealed += unhealed;
      if (!wrong && !crash && !unhealed) ++(detected ? figures.detected : figures.harmless);
      if (options.common.verbose) {
        std::cerr << absl::StrFormat("%s: %d bytes of %s: %s\n", label, bytes, file,
                                     wrong      ? "WRONG"
                                     : crash    ? "CRASH"
                                     : unhealed ? "UNHEALED"
                                     : detected ? "detected"
                                                : "harmless");
      }
    }
  }
  report.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return report;
}

}  // namespace kiln::stress
