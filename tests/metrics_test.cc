// /metrics end to end: a real kilnd serves Prometheus text over HTTP on a
// Unix socket beside its own (and on 127.0.0.1 only when asked), scraped
// with curl; the text parses, and its numbers are the Stats RPC's and
// `kiln stats --format=prometheus`'s.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "proto/graph_file.h"
#include "tests/daemon_fixture.h"

namespace kiln {
namespace {

// Sample ("name" or "name{labels}") -> value.
using Samples = std::map<std::string, double>;

// Parses the text exposition format strictly enough for kilnd's output:
// every line is a # HELP, a # TYPE, or `name{labels} value`; every family
// has one HELP and one TYPE before its samples; a counter's name ends in
// _total; the only labels are a histogram bucket's `le`, kiln_hits_total's
// `path` and kiln_failures_total's `kind`, one per sample, each with a
// value from its fixed set.
absl::StatusOr<Samples> ParsePrometheus(const std::string& text) {
  static const std::regex kSample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*")*\})? (\S+))");
  static const std::regex kHelp(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S.*)");
  static const std::regex kType(
      R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
  if (!absl::EndsWith(text, "\n")) return absl::InvalidArgumentError("no final newline");
  std::set<std::string> helped;
  std::map<std::string, std::string> types;
  Samples samples;
  for (absl::string_view line : absl::StrSplit(absl::StripSuffix(text, "\n"), '\n')) {
    const std::string row(line);
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(why, ": '", row, "'"));
    };
    std::smatch match;
    if (std::regex_match(row, match, kHelp)) {
      if (!helped.insert(match[1]).second) return bad("a second HELP");
      continue;
    }
    if (std::regex_match(row, match, kType)) {
      if (!types.emplace(match[1], match[2]).second) return bad("a second TYPE");
      if (match[2] == "counter" && !absl::EndsWith(match[1].str(), "_total")) {
        return bad("a counter not named *_total");
      }
      continue;
    }
    if (absl::StartsWith(row, "#")) return bad("a comment that is neither HELP nor TYPE");
    if (!std::regex_match(row, match, kSample)) return bad("not `name{labels} value`");
    std::string family = match[1];
    const std::string labels = match[2];
    for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
      const std::string base(absl::StripSuffix(family, suffix));
      if (base != family && types.count(base) && types[base] == "histogram") family = base;
    }
    if (!helped.count(family) || !types.count(family)) return bad("no HELP and TYPE before it");
    static const std::regex kPath(R"re(\{path="(daemon|local_index)"\})re");
    static const std::regex kKind(
        R"re(\{kind="(invalid_graph|unsupported|resource_limit|timeout|compiler_error|unavailable|internal)"\})re");
    const bool label_allowed =
        labels.empty() ||
        (types[family] == "histogram" && absl::StartsWith(labels, "{le=\"") &&
         labels.find(',') == std::string::npos) ||
        (family == "kiln_hits_total" && std::regex_match(labels, kPath)) ||
        (family == "kiln_failures_total" && std::regex_match(labels, kKind));
    if (!label_allowed)
      return bad("a label other than le, path or kind, or a value outside its set");
    double value;
    const std::string text_value = match[4];
    if (text_value == "+Inf") {
      value = HUGE_VAL;
    } else if (!absl::SimpleAtod(text_value, &value)) {
      return bad("a value that is not a number");
    }
    if (!samples.emplace(match[1].str() + labels, value).second) return bad("a repeated sample");
  }
  for (const auto& [family, type] : types) {
    if (!helped.count(family)) return absl::InvalidArgumentError(family + " has no HELP");
  }
  return samples;
}

absl::StatusOr<std::string> Curl(const std::vector<std::string>& arguments) {
  std::vector<std::string> argv = {"curl", "--silent", "--show-error", "--fail"};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  ASSIGN_OR_RETURN(ProcessResult result, RunProcess(argv, absl::Seconds(30)));
  if (result.exit_code != 0) {
    return absl::InternalError(absl::StrCat("curl exited ", result.exit_code, ": ", result.output));
  }
  return result.output;
}

std::string MetricsSocket(const DaemonFixture& daemon) {
  return std::string(absl::StripSuffix(daemon.socket_path(), ".sock")) + ".metrics.sock";
}

// A TCP port of 127.0.0.1 that nothing listens on right now.
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  close(fd);
  return ntohs(address.sin_port);
}

// Local addresses ("0100007F:1F90": 127.0.0.1, hex, host byte order) of the
// TCP sockets listening on `port`, from /proc/net/tcp and tcp6.
std::vector<std::string> ListeningAddresses(int port) {
  std::vector<std::string> addresses;
  const std::string suffix = absl::StrFormat(":%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream file(table);
    std::string line;
    while (std::getline(file, line)) {
      const std::vector<absl::string_view> columns =
          absl::StrSplit(line, ' ', absl::SkipWhitespace());
      // sl local_address rem_address st ...; st 0A is LISTEN
      if (columns.size() > 3 && absl::EndsWith(columns[1], suffix) && columns[3] == "0A") {
        addresses.emplace_back(columns[1]);
      }
    }
  }
  return addresses;
}

TEST(MetricsTest, ScrapedOverTheUnixSocketMatchesStats) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.Start().ok());
  const std::string path = MetricsSocket(daemon);
  struct stat info;
  ASSERT_EQ(stat(path.c_str(), &info), 0) << path;
  EXPECT_TRUE(S_ISSOCK(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0600);

  auto client = daemon.Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  auto graph = ReadGraphFile("examples/f.json");
  ASSERT_TRUE(graph.ok()) << graph.status();
  graph->set_name("metrics_test_secret_graph");  // must not show in the text
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = *graph;
  auto compiled = (*client)->Compile(request);
  ASSERT_TRUE(compiled.ok()) << compiled.status();

  auto text = Curl({"--unix-socket", path, "http://localhost/metrics"});
  ASSERT_TRUE(text.ok()) << text.status();
  auto samples = ParsePrometheus(*text);
  ASSERT_TRUE(samples.ok()) << samples.status() << "\n" << *text;
  auto stats = (*client)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();

  Samples& scraped = *samples;
  EXPECT_EQ(scraped["kiln_hits_total{path=\"daemon\"}"], stats->hits());
  EXPECT_EQ(scraped["kiln_hits_total{path=\"local_index\"}"], 0);
  EXPECT_EQ(scraped["kiln_misses_total"], stats->misses());
  EXPECT_EQ(scraped["kiln_misses_total"], 1);
  EXPECT_EQ(scraped["kiln_coalesced_total"], stats->coalesced());
  EXPECT_EQ(scraped["kiln_compiles_total"], stats->compiles());
  EXPECT_EQ(scraped["kiln_compiles_total"], 1);
  EXPECT_EQ(scraped["kiln_compile_failures_total"], stats->compile_failures());
  EXPECT_EQ(scraped["kiln_failures_replayed_total"], stats->failures_replayed());
  EXPECT_EQ(scraped["kiln_compile_queue_length"], 0);
  EXPECT_EQ(scraped["kiln_store_entries"], stats->entries());
  EXPECT_EQ(scraped["kiln_store_entries"], 1);
  EXPECT_EQ(scraped["kiln_store_bytes"], stats->bytes_stored());
  EXPECT_EQ(scraped["kiln_compile_duration_seconds_count"], 1);
  EXPECT_EQ(scraped["kiln_compile_duration_seconds_bucket{le=\"+Inf\"}"], 1);
  EXPECT_DOUBLE_EQ(scraped["kiln_compile_duration_seconds_sum"], stats->compile_ms_total() / 1000);
  EXPECT_GT(scraped["kiln_compile_duration_seconds_sum"], 0);
  // No key or graph name anywhere, labels included.
  EXPECT_FALSE(absl::StrContains(*text, compiled->artifact().key().substr(0, 12)));
  EXPECT_FALSE(absl::StrContains(*text, graph->name()));

  // The CLI prints the same text from the same StatsResponse (uptime aside).
  auto cli = daemon.RunTool({kKilnCliPath, "stats", "--format=prometheus", "--start=false"});
  ASSERT_TRUE(cli.ok()) << cli.status();
  ASSERT_EQ(cli->exit_code, 0) << cli->output;
  auto printed = ParsePrometheus(cli->output);
  ASSERT_TRUE(printed.ok()) << printed.status() << "\n" << cli->output;
  scraped.erase("kiln_uptime_seconds");
  printed->erase("kiln_uptime_seconds");
  EXPECT_EQ(*printed, scraped);

  // Only /metrics, only GET and HEAD.
  ProcessResult other =
      *RunProcess({"curl", "--silent", "--output", "/dev/null", "--write-out", "%{http_code}",
                   "--unix-socket", path, "http://localhost/other"},
                  absl::Seconds(30));
  EXPECT_EQ(other.output, "404");
  ProcessResult post =
      *RunProcess({"curl", "--silent", "--output", "/dev/null", "--write-out", "%{http_code}",
                   "--data", "x", "--unix-socket", path, "http://localhost/metrics"},
                  absl::Seconds(30));
  EXPECT_EQ(post.output, "405");
}

// Hits by path: a fresh process that finds the artifact in the local index
// never calls kilnd for it, and reports the hit when it exits; a Compile
// RPC that finds it stored is kilnd's own. Failures by kind: an op Kiln
// lacks and a malformed graph. The scrape, the Stats RPC and both forms of
// `kiln stats` agree.
TEST(MetricsTest, HitsByPathAndFailuresByKind) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.Start().ok());
  auto client = daemon.Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  auto graph = ReadGraphFile("examples/f.json");
  ASSERT_TRUE(graph.ok()) << graph.status();
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = *graph;
  ASSERT_TRUE((*client)->Compile(request).ok());  // a miss: compiled
  auto again = (*client)->Compile(request);       // a hit kilnd answers
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cache_hit());

  // A fresh process: its only hit is in the local index.
  auto run =
      daemon.RunTool({kKilnCliPath, "run", "examples/f.json", "--repeat=3", "--start=false"});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->exit_code, 0) << run->output;
  EXPECT_TRUE(absl::StrContains(run->output, "(cache hit, local index)")) << run->output;

  kiln::v1::Graph unsupported = *graph;
  unsupported.mutable_nodes(3)->set_op("aten.frobnicate.default");
  *request.mutable_graph() = unsupported;
  EXPECT_EQ((*client)->Compile(request).status().code(), absl::StatusCode::kUnimplemented);
  kiln::v1::Graph malformed = *graph;
  malformed.mutable_nodes(1)->set_inputs(1, 4);  // a cycle
  *request.mutable_graph() = malformed;
  EXPECT_EQ((*client)->Compile(request).status().code(), absl::StatusCode::kInvalidArgument);
  // A Lookup that finds nothing is a miss, not a failure.
  *request.mutable_graph() = *graph;
  request.mutable_options()->set_salt("not stored");
  EXPECT_EQ((*client)->Lookup(request).status().code(), absl::StatusCode::kNotFound);

  auto text = Curl({"--unix-socket", MetricsSocket(daemon), "http://localhost/metrics"});
  ASSERT_TRUE(text.ok()) << text.status();
  auto samples = ParsePrometheus(*text);
  ASSERT_TRUE(samples.ok()) << samples.status() << "\n" << *text;
  Samples& scraped = *samples;
  EXPECT_EQ(scraped["kiln_hits_total{path=\"daemon\"}"], 1) << *text;
  EXPECT_EQ(scraped["kiln_hits_total{path=\"local_index\"}"], 1) << *text;
  EXPECT_EQ(scraped["kiln_misses_total"], 2) << *text;  // the first compile and the Lookup
  const Samples failures = {
      {"kiln_failures_total{kind=\"compiler_error\"}", 0},
      {"kiln_failures_total{kind=\"internal\"}", 0},
      {"kiln_failures_total{kind=\"invalid_graph\"}", 1},
      {"kiln_failures_total{kind=\"resource_limit\"}", 0},
      {"kiln_failures_total{kind=\"timeout\"}", 0},
      {"kiln_failures_total{kind=\"unavailable\"}", 0},
      {"kiln_failures_total{kind=\"unsupported\"}", 1},
  };
  for (const auto& [sample, value] : failures) {
    EXPECT_EQ(scraped.count(sample), 1u) << sample << " missing:\n" << *text;
    EXPECT_EQ(scraped[sample], value) << sample;
  }
  // Neither failure reached the pipeline: both were refused before the key.
  EXPECT_EQ(scraped["kiln_compile_failures_total"], 0);

  auto stats = (*client)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->hits(), 1);
  EXPECT_EQ(stats->local_index_hits(), 1);
  EXPECT_EQ(stats->failures_by_kind().at("unsupported"), 1);
  EXPECT_EQ(stats->failures_by_kind().at("invalid_graph"), 1);
  EXPECT_EQ(stats->failures_by_kind().size(), 7u);

  auto prometheus = daemon.RunTool({kKilnCliPath, "stats", "--format=prometheus", "--start=false"});
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  ASSERT_EQ(prometheus->exit_code, 0) << prometheus->output;
  auto printed = ParsePrometheus(prometheus->output);
  ASSERT_TRUE(printed.ok()) << printed.status() << "\n" << prometheus->output;
  scraped.erase("kiln_uptime_seconds");
  printed->erase("kiln_uptime_seconds");
  EXPECT_EQ(*printed, scraped);

  auto summary = daemon.RunTool({kKilnCliPath, "stats", "--start=false"});
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->exit_code, 0) << summary->output;
  EXPECT_TRUE(absl::StrContains(
      summary->output,
      "\nhits      1 answered by kilnd, 1 from clients' local index (as they report them)\n"))
      << summary->output;
  EXPECT_TRUE(absl::StrContains(summary->output,
                                "\nfailed    2 compile requests: invalid_graph 1, unsupported 1\n"))
      << summary->output;
}

TEST(MetricsTest, StaleSocketIsReplacedAndRemovedAtExit) {
  DaemonFixture daemon;
  ASSERT_TRUE(MakeDirectories(Dirname(daemon.socket_path()), 0700).ok());
  const std::string path = MetricsSocket(daemon);
  ASSERT_TRUE(WriteFileAtomically(path, "stale", 0600).ok());
  ASSERT_TRUE(daemon.Start().ok());
  auto text = Curl({"--unix-socket", path, "http://localhost/metrics"});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(ParsePrometheus(*text).ok());

  daemon.Kill(SIGTERM);  // and reaped: kilnd has exited
  struct stat info;
  EXPECT_NE(stat(path.c_str(), &info), 0) << path << " outlived kilnd";
}

TEST(MetricsTest, AMetricsSocketKilndCannotMakeStopsIt) {
  DaemonFixture daemon;
  const absl::Status started =
      daemon.Start({"--metrics_socket=" + daemon.root() + "/" + std::string(120, 'm')});
  EXPECT_FALSE(started.ok());
  EXPECT_TRUE(absl::StrContains(started.message(), "is longer than 107 bytes")) << started;
}

TEST(MetricsTest, PortServesOnLoopbackOnlyAndNoneDisablesTheSocket) {
  DaemonFixture daemon;
  const int port = FreeLoopbackPort();
  ASSERT_TRUE(daemon.Start({absl::StrCat("--metrics_port=", port), "--metrics_socket=none"}).ok());
  auto text = Curl({absl::StrCat("http://127.0.0.1:", port, "/metrics")});
  ASSERT_TRUE(text.ok()) << text.status();
  auto samples = ParsePrometheus(*text);
  ASSERT_TRUE(samples.ok()) << samples.status() << "\n" << *text;
  EXPECT_EQ((*samples)["kiln_compiles_total"], 0);
  EXPECT_EQ(ListeningAddresses(port),
            std::vector<std::string>{absl::StrFormat("0100007F:%04X", port)});

  struct stat info;
  EXPECT_NE(stat(MetricsSocket(daemon).c_str(), &info), 0) << "--metrics_socket=none made one";
}

}  // namespace
}  // namespace kiln
