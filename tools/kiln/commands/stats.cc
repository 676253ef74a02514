// kiln stats: kilnd's counters and store totals, as text, JSON or the
// Prometheus text kilnd serves on /metrics.
#include <iostream>
#include <map>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/prometheus.h"
#include "tools/kiln/commands/command.h"

ABSL_FLAG(std::string, format, "text",
          "text, json (as --json) or prometheus (the text kilnd serves on /metrics).");

namespace kiln {
namespace {

absl::Status Stats(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln stats"));
  std::string format = absl::GetFlag(FLAGS_format);
  if (format != "text" && format != "json" && format != "prometheus") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format=", format, " is not one of text, json, prometheus"));
  }
  if (absl::GetFlag(FLAGS_json)) {
    if (format == "prometheus") {
      return absl::InvalidArgumentError("--json and --format=prometheus conflict: pass one");
    }
    format = "json";
  }
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  ASSIGN_OR_RETURN(auto stats, client->Stats());
  if (format == "json") {
    std::cout << ToJson(stats) << "\n";
    return absl::OkStatus();
  }
  if (format == "prometheus") {
    std::cout << PrometheusText(stats);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const kiln::v1::HelloResponse daemon, client->daemon());
  // Failed requests by kind, the kinds that occurred, A to Z.
  const std::map<std::string, int64_t> failures_by_kind(stats.failures_by_kind().begin(),
                                                        stats.failures_by_kind().end());
  int64_t failed_requests = 0;
  std::vector<std::string> kinds;
  for (const auto& [kind, count] : failures_by_kind) {
    failed_requests += count;
    if (count > 0) kinds.push_back(absl::StrCat(kind, " ", count));
  }
  std::cout << absl::StrFormat(
      "kilnd %s (pid %d) on %s, up %.1f s\n"
      "hits      %d answered by kilnd, %d from clients' local index (as they report them)\n"
      "misses    %d (%d waited on a running compile)\n"
      "compiles  %d (%d failed), %.1f ms compiling in all\n"
      "failed    %d compile requests%s%s\n"
      "failures  %d remembered, %d retries answered from memory (`kiln evict KEY` forgets one)\n"
      "store     %d entries, %d blobs, %d bytes\n"
      "damage    %d corrupt blobs and %d corrupt entries quarantined (each compiles again)\n",
      daemon.daemon_version(), daemon.pid(), client->socket_path(), stats.uptime_ms() / 1000.0,
      stats.hits(), stats.local_index_hits(), stats.misses(), stats.coalesced(), stats.compiles(),
      stats.compile_failures(), stats.compile_ms_total(), failed_requests,
      kinds.empty() ? "" : ": ", absl::StrJoin(kinds, ", "), stats.remembered_failures(),
      stats.failures_replayed(), stats.entries(), stats.blobs(), stats.bytes_stored(),
      stats.corrupt_blobs(), stats.corrupt_entries());
  if (stats.unreadable_ranges() > 0) {
    std::cout << absl::StrFormat(
        "          %d damaged stretches of the store could not be counted: the store counts\n"
        "          above are lower bounds (see kilnd.log)\n",
        stats.unreadable_ranges());
  }
  if (stats.has_remote()) {
    const kiln::v1::RemoteStats& remote = stats.remote();
    std::cout << absl::StrFormat(
        "remote    %s, %s%s\n"
        "          %d hits (%d bytes), %d misses, %d waited on another machine's compile (%d "
        "took it over)\n"
        "          %d published (%d bytes), %d not; %d errors, %d entries refused (bad "
        "signature or digest)\n",
        remote.url(), remote.available() ? "reachable" : "UNREACHABLE (compiling locally)",
        remote.read_only() ? ", read-only (no signing key)" : "", remote.hits(),
        remote.bytes_read(), remote.misses(), remote.lease_waits(), remote.lease_takeovers(),
        remote.publishes(), remote.bytes_written(), remote.publishes_dropped(), remote.errors(),
        remote.refused());
  }
  return absl::OkStatus();
}

}  // namespace

const Command kStatsCommand = {"stats",
                               "",
                               "daemon counters and store totals",
                               {{"format"}, {"json"}, kSocketFlag, kCacheDirFlag, kStartFlag},
                               "kiln stats --format=prometheus",
                               Stats};

}  // namespace kiln
