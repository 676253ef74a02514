// kiln status, kiln stop, kiln ls (sorting, filtering, limits, paging) and
// the systemd unit, against a real kilnd.
#include <fcntl.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "cache/rocksdb_store.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/subprocess.h"
#include "common/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon_fixture.h"
#include "tools/kiln/human_units.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

TEST(StatusTest, SaysWhenNoKilndRunsAndNeverStartsOne) {
  DaemonFixture daemon;
  auto status = daemon.RunTool({kKilnCliPath, "status"});
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->exit_code, 3) << status->output;
  EXPECT_EQ(status->output,
            absl::StrCat("kiln status: no kilnd on ", daemon.socket_path(),
                         "; any compile starts one, or start it with `kilnd "
                         "--socket=",
                         daemon.socket_path(), "` or as a service (docs/OPERATIONS.md)\n"));
  auto stop = daemon.RunTool({kKilnCliPath, "stop"});
  ASSERT_TRUE(stop.ok());
  EXPECT_EQ(stop->exit_code, 3) << stop->output;
  EXPECT_THAT(stop->output, HasSubstr("kiln stop: no kilnd on " + daemon.socket_path()));
  // --start is not status's flag: refused, and still nothing on the socket.
  auto start = daemon.RunTool({kKilnCliPath, "status", "--json", "--start=true"});
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->exit_code, 2);
  EXPECT_THAT(start->output, HasSubstr("kiln status: --start is a flag of kiln compile"));
  auto again = daemon.RunTool({kKilnCliPath, "status", "--json"});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->exit_code, 3);
  EXPECT_THAT(again->output, HasSubstr("\"running\": false"));
  EXPECT_FALSE(daemon.Connect().ok());
}

TEST(StatusTest, DescribesTheRunningKilndThenStopStopsIt) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.Start().ok());
  const pid_t pid = daemon.pid();
  auto status = daemon.RunTool({kKilnCliPath, "status"});
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->exit_code, 0) << status->output;
  const std::vector<std::string> lines = absl::StrSplit(status->output, '\n');
  ASSERT_GE(lines.size(), 6u) << status->output;
  EXPECT_EQ(lines[0], absl::StrCat("kilnd ", kKilnVersion, " running (pid ", pid, ")"));
  EXPECT_EQ(lines[1], "  socket   " + daemon.socket_path());
  EXPECT_EQ(lines[2], "  cache    " + daemon.cache_dir());
  EXPECT_THAT(lines[3], ::testing::MatchesRegex("  uptime   [0-9]+s"));
  EXPECT_EQ(lines[4], "  store    0 entries, 0 B");

  auto json = daemon.RunTool({kKilnCliPath, "status", "--json"});
  ASSERT_TRUE(json.ok());
  ASSERT_EQ(json->exit_code, 0) << json->output;
  google::protobuf::Struct fields;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json->output, &fields).ok())
      << json->output;
  EXPECT_TRUE(fields.fields().at("running").bool_value());
  EXPECT_EQ(fields.fields().at("version").string_value(), kKilnVersion);
  EXPECT_EQ(fields.fields().at("pid").number_value(), pid);
  EXPECT_EQ(fields.fields().at("socket").string_value(), daemon.socket_path());
  EXPECT_EQ(fields.fields().at("cache_dir").string_value(), daemon.cache_dir());
  EXPECT_EQ(fields.fields().at("entries").number_value(), 0);

  auto stop = daemon.RunTool({kKilnCliPath, "stop", "--wait=20s"});
  ASSERT_TRUE(stop.ok());
  ASSERT_EQ(stop->exit_code, 0) << stop->output;
  EXPECT_EQ(stop->output, absl::StrCat("stopped kilnd (pid ", pid, ")\n"));
  EXPECT_EQ(daemon.WaitForExit(), 0);  // drained and exited cleanly
  auto after = daemon.RunTool({kKilnCliPath, "status"});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->exit_code, 3) << after->output;
}

struct Fake {
  char key_digit;
  std::string graph;
  int64_t bytes;
  int created_s;   // after kBase
  int used_s = 0;  // a later use after kBase, or 0
  bool pinned = false;
};

const std::vector<Fake> kFakes = {
    {'1', "mlp", 1500, 1},
    {'2', "attention", 3 << 20, 2, /*used_s=*/10},
    {'3', "mlp_big", 10, 3, 0, /*pinned=*/true},
    {'4', "embed", 2048, 4},
    {'5', "mlp", 100, 5},
};

// Five entries written straight into the store before kilnd starts.
class ListTest : public ::testing::Test {
 protected:
  static inline const absl::Time kBase = absl::FromUnixSeconds(1767225600);  // 2026-01-01

  void SetUp() override {
    ASSERT_TRUE(MakeDirectories(daemon_.cache_dir(), 0700).ok());
    auto store = RocksDbStore::Open(daemon_.cache_dir() + "/db");
    ASSERT_TRUE(store.ok()) << store.status();
    for (const Fake& fake : kFakes) {
      const std::string blob(fake.bytes, fake.key_digit);
      kiln::v1::ArtifactMetadata metadata;
      metadata.set_key(std::string(64, fake.key_digit));
      metadata.set_graph_name(fake.graph);
      metadata.set_digest(Sha256Hex(blob));
      metadata.set_object_bytes(fake.bytes);
      metadata.set_created_unix_ms(absl::ToUnixMillis(kBase + absl::Seconds(fake.created_s)));
      metadata.mutable_timings()->set_total_ms(12.5);
      ASSERT_TRUE((*store)->Put(metadata, blob).ok());
      if (fake.used_s > 0) {
        ASSERT_TRUE((*store)->RecordUse(metadata.key(), kBase + absl::Seconds(fake.used_s)).ok());
      }
      if (fake.pinned) {
        ASSERT_TRUE((*store)->SetPinned(metadata.key(), true).ok());
      }
    }
    store->reset();
    ASSERT_TRUE(daemon_.Start().ok());
    // kilnd reads the local index's uses in the background, at nice 19: on
    // a busy machine that may take seconds. Every listing below is whole.
    auto client = daemon_.Connect();
    ASSERT_TRUE(client.ok()) << client.status();
    for (const absl::Time deadline = absl::Now() + absl::Seconds(60);;) {
      kiln::v1::ListResponse page;
      ASSERT_TRUE((*client)->ListPage(kiln::v1::ListRequest(), page).ok());
      if (!page.local_uses_unread()) break;
      ASSERT_LT(absl::Now(), deadline) << "kilnd never read the local index's uses";
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  // The table row `kiln ls` prints for the fake with this key digit.
  static std::string Row(char key_digit) {
    for (const Fake& fake : kFakes) {
      if (fake.key_digit != key_digit) continue;
      return absl::StrFormat(
          "%-16s  %-20s  %10s  %7.1f ms  %-19s  %-19s  %s", std::string(16, key_digit), fake.graph,
          HumanBytes(fake.bytes), 12.5,
          HumanTime(kBase + absl::Seconds(fake.used_s > 0 ? fake.used_s : fake.created_s)),
          HumanTime(kBase + absl::Seconds(fake.created_s)), fake.pinned ? "pinned" : "");
    }
    return "no such fake";
  }

  // The whole table for these keys, in this order.
  static std::string Table(const std::string& key_digits) {
    std::string table =
        absl::StrFormat("%-16s  %-20s  %10s  %10s  %-19s  %-19s  %s\n", "KEY", "GRAPH", "SIZE",
                        "COMPILE", "LAST USE", "CREATED", "PINNED");
    for (char digit : key_digits) absl::StrAppend(&table, Row(digit), "\n");
    return table;
  }

  std::string Ls(std::vector<std::string> flags) {
    std::vector<std::string> argv = {kKilnCliPath, "ls", "--start=false"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto result = daemon_.RunTool(argv);
    if (!result.ok()) return result.status().ToString();
    if (result->exit_code != 0)
      return absl::StrCat("exit ", result->exit_code, ": ", result->output);
    return result->output;
  }

  DaemonFixture daemon_;
};

TEST_F(ListTest, SortsByLastUseByDefaultWithHumanSizesAndPins) {
  EXPECT_EQ(Ls({}), Table("25431"));  // not a terminal: every entry
  EXPECT_EQ(Ls({"--reverse"}), Table("13452"));
  EXPECT_EQ(Ls({"--sort=size"}), Table("24153"));
  EXPECT_EQ(Ls({"--sort=created"}), Table("54321"));
  EXPECT_EQ(Ls({"--sort=name"}), Table("24153"));  // attention, embed, mlp (1, 5), mlp_big
  EXPECT_EQ(Ls({"--sort=name", "--reverse"}), Table("31542"));
  EXPECT_EQ(Ls({"--sort=key"}), Table("12345"));
  EXPECT_EQ(Ls({"--sort=key", "--reverse"}), Table("54321"));
  EXPECT_EQ(Row('2').substr(40, 10), "   3.0 MiB");
  EXPECT_EQ(Row('1').substr(40, 10), "   1.5 KiB");
}

TEST_F(ListTest, FiltersAndLimits) {
  EXPECT_EQ(Ls({"--graph=mlp"}), Table("531"));
  EXPECT_EQ(Ls({"--graph=mlp", "--sort=size"}), Table("153"));
  EXPECT_EQ(Ls({"--graph=nothing"}), Table(""));
  const std::string note =
      "kiln ls: showing the first 2 entries; --limit=N shows more, "
      "--limit=0 all\n";
  // stdout and stderr are interleaved: the note (stderr, unbuffered) may
  // come first.
  for (const auto& [flags, keys] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--limit=2"}, "25"},
           {{"--limit=2", "--sort=size", "--reverse"}, "35"},
           {{"--limit=2", "--sort=created"}, "54"},
           {{"--limit=2", "--sort=key"}, "12"},
           {{"--limit=2", "--graph=mlp"}, "53"}}) {
    const std::string output = Ls(flags);
    EXPECT_THAT(output, HasSubstr(note)) << absl::StrJoin(flags, " ");
    EXPECT_EQ(absl::StrReplaceAll(output, {{note, ""}}), Table(keys)) << absl::StrJoin(flags, " ");
  }
  EXPECT_EQ(Ls({"--limit=3", "--graph=mlp"}), Table("531"));  // all there are: no note
  EXPECT_EQ(Ls({"--limit=0"}), Table("25431"));
  EXPECT_EQ(Ls({"--sort=bogus"}),
            "exit 1: kiln ls: --sort=bogus is not one of last_use, size, created, name, key\n");
  EXPECT_EQ(Ls({"--limit=-2"}), "exit 1: kiln ls: --limit=-2 is negative; 0 lists every entry\n");
}

TEST_F(ListTest, JsonKeepsTheFullRecordsWithTheirUse) {
  const std::string json = Ls({"--json", "--limit=2", "--sort=size", "--reverse"});
  kiln::v1::ListResponse list;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &list).ok()) << json;
  ASSERT_EQ(list.entries_size(), 2);
  ASSERT_EQ(list.uses_size(), 2);
  EXPECT_EQ(list.entries(0).key(), std::string(64, '3'));
  EXPECT_EQ(list.entries(0).graph_name(), "mlp_big");
  EXPECT_EQ(list.entries(0).digest(), Sha256Hex(std::string(10, '3')));
  EXPECT_TRUE(list.uses(0).pinned());
  EXPECT_EQ(list.entries(1).key(), std::string(64, '5'));
  EXPECT_FALSE(list.uses(1).pinned());
  EXPECT_EQ(list.uses(1).last_use_unix_ms(), absl::ToUnixMillis(kBase + absl::Seconds(5)));
  EXPECT_TRUE(list.next_page_token().empty());
}

TEST_F(ListTest, TheListRpcPagesAndTheClientPagesThroughAll) {
  auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  // Every page of `request`, keys by their first digit, pages split by |.
  auto pages = [&](kiln::v1::ListRequest request) {
    std::string out;
    for (int calls = 0; calls < 10; ++calls) {
      kiln::v1::ListResponse page;
      if (absl::Status listed = (*client)->ListPage(request, page); !listed.ok()) {
        return listed.ToString();
      }
      for (const auto& entry : page.entries()) out += entry.key()[0];
      if (page.next_page_token().empty()) return out;
      out += "|";
      request.set_page_token(page.next_page_token());
    }
    return out + "...";
  };
  kiln::v1::ListRequest request;
  request.set_page_size(2);
  EXPECT_EQ(pages(request), "12|34|5");
  request.set_order(kiln::v1::ListRequest::ORDER_LAST_USE);
  EXPECT_EQ(pages(request), "25|43|1");
  request.set_order(kiln::v1::ListRequest::ORDER_SIZE);
  request.set_graph_substring("mlp");
  EXPECT_EQ(pages(request), "15|3");
  request.set_page_token("garbage");
  kiln::v1::ListResponse page;
  EXPECT_EQ((*client)->ListPage(request, page),
            absl::InvalidArgumentError("page_token 'garbage' is not one this order returned: "
                                       "pass the next_page_token of the previous page, with the "
                                       "same order"));
  auto all = (*client)->List();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->entries_size(), 5);
  ASSERT_EQ(all->uses_size(), 5);
  EXPECT_EQ(all->entries(4).key(), std::string(64, '5'));
  EXPECT_TRUE(all->uses(2).pinned());
}

// The unit's ExecStart, with systemd's specifiers for this test's
// directories, starts a kilnd that `kiln status` and `kiln stop` find.
TEST(SystemdUnitTest, ExecStartNamesFlagsKilndAcceptsAndServes) {
  std::ifstream unit("tools/systemd/kilnd.service");
  ASSERT_TRUE(unit.good());
  std::string exec_start, line;
  while (std::getline(unit, line)) {
    if (absl::StartsWith(line, "ExecStart=")) exec_start = line.substr(strlen("ExecStart="));
  }
  std::vector<std::string> argv = absl::StrSplit(exec_start, ' ', absl::SkipEmpty());
  ASSERT_GE(argv.size(), 2u) << exec_start;
  EXPECT_EQ(argv[0], "%h/.local/bin/kilnd");

  auto help = RunProcess({kKilndPath, "--help"}, absl::Seconds(30));
  ASSERT_TRUE(help.ok());
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string name = std::vector<std::string>(absl::StrSplit(argv[i], '='))[0];
    EXPECT_THAT(help->output, HasSubstr("    " + name + " (")) << "kilnd has no flag " << name;
  }

  DaemonFixture fixture;  // for its directories
  const std::string home = fixture.root() + "/h", runtime = fixture.root() + "/r";
  ASSERT_TRUE(MakeDirectories(home, 0700).ok());
  ASSERT_TRUE(MakeDirectories(runtime, 0700).ok());
  argv[0] = kKilndPath;
  for (std::string& arg : argv) arg = absl::StrReplaceAll(arg, {{"%h", home}, {"%t", runtime}});
  const std::string socket = runtime + "/kiln/kilnd.sock";
  const int log = open((fixture.root() + "/unit.log").c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(log, 0);
  SpawnOptions spawn;
  spawn.redirects = {{log, 1}, {log, 2}};
  spawn.clear_signal_mask = true;
  auto pid = SpawnProcess(argv, spawn);
  close(log);
  ASSERT_TRUE(pid.ok()) << pid.status();
  struct KillOnFailure {  // a failed assertion must not leave kilnd behind
    pid_t pid;
    ~KillOnFailure() {
      if (pid > 0 && kill(pid, SIGKILL) == 0) waitpid(pid, nullptr, 0);
    }
  } guard{*pid};
  const RunOptions run = {absl::Seconds(60), {{"KILN_SOCKET", socket}}};
  // kiln status is the wait: it answers 3 until kilnd listens.
  absl::StatusOr<ProcessResult> status;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  do {
    status = RunProcess({kKilnCliPath, "status"}, run);
    ASSERT_TRUE(status.ok());
  } while (status->exit_code == 3 && absl::Now() < deadline);
  EXPECT_EQ(status->exit_code, 0) << status->output;
  EXPECT_THAT(status->output, HasSubstr("  cache    " + home + "/.cache/kiln\n"));
  auto stop = RunProcess({kKilnCliPath, "stop"}, run);
  ASSERT_TRUE(stop.ok());
  EXPECT_EQ(stop->output, absl::StrCat("stopped kilnd (pid ", *pid, ")\n"));
  int wait_status = 0;
  ASSERT_EQ(waitpid(*pid, &wait_status, 0), *pid);
  guard.pid = 0;
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) << wait_status;
}

}  // namespace
}  // namespace kiln
