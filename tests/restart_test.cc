// Restarts and upgrades of kilnd, as its clients see them: a daemon that
// drains after SIGTERM hands over to the one a client starts, and requests
// in flight get their answers; one that stops answering is named, with
// what to do, once the call's deadline passes.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "common/subprocess.h"
#include "common/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/graph_file.h"
#include "tests/daemon_fixture.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

class RestartTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Daemons the clients started are nobody's children: stop them here.
    for (pid_t pid : started_) kill(pid, SIGKILL);
  }

  // A client that starts kilnd itself when none answers, as a serving
  // worker's does.
  std::unique_ptr<Client> AutoStartingClient() {
    ClientOptions options;
    options.socket_path = daemon_.socket_path();
    options.cache_dir = daemon_.cache_dir();
    options.daemon_path = kKilndPath;
    return Client::Open(options);
  }

  void RememberDaemonOf(Client& client) {
    auto hello = client.daemon();
    if (hello.ok() && hello->pid() != daemon_.pid()) started_.push_back(hello->pid());
  }

  kiln::v1::CompileRequest Request(const std::string& salt) {
    auto graph = ReadGraphFile("examples/f.json");
    EXPECT_TRUE(graph.ok());
    kiln::v1::CompileRequest request;
    *request.mutable_graph() = *graph;
    request.mutable_options()->set_salt(salt);
    return request;
  }

  DaemonFixture daemon_;
  std::vector<pid_t> started_;
};

TEST_F(RestartTest, QueuedCompilesDuringADrainAreAnsweredByTheNextDaemon) {
  ASSERT_TRUE(daemon_.Start({"--compile_jobs=1"}).ok());
  const pid_t old_pid = daemon_.pid();
  std::unique_ptr<Client> client = AutoStartingClient();
  ASSERT_TRUE(client->daemon().ok());

  // One compile runs, the others queue behind it; then SIGTERM.
  constexpr int kCompiles = 4;
  std::vector<absl::StatusOr<kiln::v1::CompileResponse>> results(kCompiles,
                                                                 absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kCompiles; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = client->Compile(Request(absl::StrCat("drain", i))); });
  }
  absl::SleepFor(absl::Milliseconds(20));
  kill(old_pid, SIGTERM);
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(daemon_.WaitForExit(), 0);

  for (int i = 0; i < kCompiles; ++i) {
    EXPECT_TRUE(results[i].ok()) << i << ": " << results[i].status();
  }
  RememberDaemonOf(*client);
  auto hello = client->daemon();
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_NE(hello->pid(), old_pid) << "the next kilnd answers";
  EXPECT_TRUE(hello->auto_started());
}

TEST_F(RestartTest, ACompileThatOutlivesTheDrainIsStoredAndAnsweredOnRetry) {
  // A drain of zero: the running call is cancelled at once, its compile
  // goes on, is stored, and the client's retry (against the kilnd it
  // starts, which waits for the old one's lock) is a hit.
  ASSERT_TRUE(daemon_.Start({"--drain_timeout=0s"}).ok());
  const pid_t old_pid = daemon_.pid();
  std::unique_ptr<Client> client = AutoStartingClient();
  ASSERT_TRUE(client->daemon().ok());
  absl::StatusOr<kiln::v1::CompileResponse> result = absl::UnknownError("not run");
  std::thread compile([&] { result = client->Compile(Request("outlives")); });
  absl::SleepFor(absl::Milliseconds(5));
  kill(old_pid, SIGTERM);
  compile.join();
  EXPECT_EQ(daemon_.WaitForExit(), 0);

  ASSERT_TRUE(result.ok()) << result.status();
  RememberDaemonOf(*client);
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  if (result->cache_hit()) {
    EXPECT_EQ(stats->compiles(), 0) << "the old daemon's compile was stored";
  }
  EXPECT_NE(client->daemon()->pid(), old_pid);
}

TEST_F(RestartTest, AnAutoStartedDaemonOfAnotherVersionIsDrainedAndReplaced) {
  // Stands in for the kilnd an older client started: daemonized, so it
  // says it was auto-started.
  const int log = open((daemon_.root() + "/old.log").c_str(), O_WRONLY | O_CREAT, 0600);
  auto old = SpawnProcess({kKilndPath, "--daemonize", "--socket=" + daemon_.socket_path(),
                           "--cache_dir=" + daemon_.cache_dir(), "--testonly_protocol_version=1"},
                          {{log, STDOUT_FILENO}, {log, STDERR_FILENO}});
  close(log);
  ASSERT_TRUE(old.ok()) << old.status();
  int status;
  ASSERT_EQ(waitpid(*old, &status, 0), *old);  // --daemonize: the parent exits at once
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ClientOptions options;
  options.socket_path = daemon_.socket_path();
  options.cache_dir = daemon_.cache_dir();
  options.daemon_path = kKilndPath;
  options.auto_start = false;
  absl::StatusOr<std::unique_ptr<Client>> refused = absl::UnknownError("not run");
  for (int i = 0; i < 2000 && !refused.ok() &&
                  refused.status().code() != absl::StatusCode::kFailedPrecondition;
       ++i) {
    refused = Client::Connect(options);
    absl::SleepFor(absl::Milliseconds(5));
  }
  // Without auto-start the client may not replace it, and says what to do.
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("speaks protocol 1 with ABI"));
  EXPECT_THAT(refused.status().message(), HasSubstr("Stop that kilnd (kill "));

  std::unique_ptr<Client> client = AutoStartingClient();
  auto hello = client->daemon();
  ASSERT_TRUE(hello.ok()) << hello.status();
  RememberDaemonOf(*client);
  EXPECT_EQ(hello->protocol_version(), kProtocolVersion);
  auto compiled = client->Compile(Request("upgraded"));
  EXPECT_TRUE(compiled.ok()) << compiled.status();
}

// Waits up to `timeout` for `daemon` to exit by itself; whether it did.
bool ExitsWithin(DaemonFixture& daemon, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (daemon.Alive()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return true;
}

TEST_F(RestartTest, AKilndWhoseCacheDirectoryIsRemovedExitsAndTheNextClientStartsAFreshOne) {
  ASSERT_TRUE(daemon_.Start().ok());
  const pid_t old_pid = daemon_.pid();
  std::unique_ptr<Client> client = AutoStartingClient();
  ASSERT_TRUE(client->Compile(Request("before")).ok());

  std::filesystem::remove_all(daemon_.cache_dir());  // a user's `rm -rf ~/.cache/kiln`
  ASSERT_TRUE(ExitsWithin(daemon_, absl::Seconds(10)))
      << "kilnd goes on serving from a removed cache directory";
  EXPECT_EQ(daemon_.exit_status(), 1);
  EXPECT_THAT(daemon_.Log(),
              HasSubstr("cache directory " + daemon_.cache_dir() + " was removed or replaced"));

  auto compiled = client->Compile(Request("after"));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  RememberDaemonOf(*client);
  EXPECT_NE(client->daemon()->pid(), old_pid);
  auto again = client->Compile(Request("after"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cache_hit()) << "the fresh kilnd stores into a fresh cache directory";
  EXPECT_TRUE(std::filesystem::is_directory(daemon_.cache_dir() + "/db"));
}

TEST_F(RestartTest, AKilndWhoseSocketIsRemovedExitsAndTheNextOneTakesItsLock) {
  ASSERT_TRUE(daemon_.Start().ok());
  const pid_t old_pid = daemon_.pid();
  ASSERT_EQ(unlink(daemon_.socket_path().c_str()), 0);  // a cleaner of /tmp
  ASSERT_TRUE(ExitsWithin(daemon_, absl::Seconds(10)))
      << "kilnd, unreachable, goes on holding the lock a new kilnd waits for";
  EXPECT_EQ(daemon_.exit_status(), 1);
  EXPECT_THAT(daemon_.Log(),
              HasSubstr("socket " + daemon_.socket_path() + " was removed or replaced"));

  std::unique_ptr<Client> client = AutoStartingClient();
  auto compiled = client->Compile(Request("after the socket went"));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  RememberDaemonOf(*client);
  EXPECT_NE(client->daemon()->pid(), old_pid);
}

TEST_F(RestartTest, ADaemonStartedByHandIsNeverReplaced) {
  ASSERT_TRUE(daemon_.Start({"--testonly_protocol_version=1"}).ok());
  std::unique_ptr<Client> client = AutoStartingClient();
  auto hello = client->daemon();
  EXPECT_EQ(hello.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(hello.status().message(), HasSubstr("Stop that kilnd (kill "));
  EXPECT_EQ(kill(daemon_.pid(), 0), 0) << "still running";
}

TEST_F(RestartTest, AKilndThatStopsAnsweringIsNamedWithWhatToDo) {
  ASSERT_TRUE(daemon_.Start().ok());
  ClientOptions options;
  options.socket_path = daemon_.socket_path();
  options.auto_start = false;
  options.rpc_timeout = absl::Seconds(1);
  options.unanswered_memory = absl::Seconds(2);
  std::unique_ptr<Client> client = Client::Open(options);
  ASSERT_TRUE(client->daemon().ok());
  ASSERT_EQ(kill(daemon_.pid(), SIGSTOP), 0);
  const std::string named =
      absl::StrCat("kilnd (pid ", daemon_.pid(), ") on ", daemon_.socket_path(), ": ");
  const std::string advice =
      absl::StrCat(". It is stopped, hung or overloaded (`ps -o stat,pcpu -p ", daemon_.pid(),
                   "` tells which); `kill ", daemon_.pid(), "` lets the next client start another");

  const auto compiled = client->Compile(Request("stopped"));
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(IsUnanswered(compiled.status()));
  EXPECT_EQ(compiled.status().message(),
            absl::StrCat(named, "kilnd did not answer Compile within 1s", advice));
  // A fresh client's handshake goes unanswered too, and it starts no kilnd.
  const auto hello = Client::Open(options)->daemon();
  EXPECT_TRUE(IsUnanswered(hello.status()));
  EXPECT_EQ(hello.status().message(),
            absl::StrCat(named, "kilnd did not answer Hello within 1s", advice));

  ASSERT_EQ(kill(daemon_.pid(), SIGCONT), 0);
  // For unanswered_memory, calls get the answer they would wait for.
  const auto remembered = client->Compile(Request("stopped"));
  EXPECT_TRUE(IsUnanswered(remembered.status()));
  EXPECT_EQ(remembered.status().message(), compiled.status().message());
  absl::SleepFor(absl::Seconds(2));
  EXPECT_TRUE(client->Compile(Request("stopped")).ok()) << "then it is asked again, and answers";
}

TEST_F(RestartTest, ACompilePastItsTimeoutIsAnsweredNotUnanswered) {
  ASSERT_TRUE(daemon_.Start({"--compile_timeout=1ms"}).ok());
  const auto client = daemon_.Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  const auto compiled = (*client)->Compile(Request("slow"));
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kDeadlineExceeded) << compiled.status();
  EXPECT_FALSE(IsUnanswered(compiled.status()));
  EXPECT_THAT(compiled.status().message(), HasSubstr("within 1ms"));
}

}  // namespace
}  // namespace kiln
