// The fleet tier end to end: real kilnds with separate cache directories
// sharing a real redis-server (tests/redis_fixture.h), driven by real
// client processes (`kiln run`).
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cache/remote/redis_client.h"
#include "cache/remote/signing.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/artifact.pb.h"
#include "tests/daemon_fixture.h"
#include "tests/redis_fixture.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start({});
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
    absl::StatusOr<std::string> dir = MakeTempDirectory("/tmp/kfleetXXXXXX");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    ASSERT_TRUE(WriteKeys("writer").ok());
    ASSERT_TRUE(WriteKeys("stranger").ok());
  }
  void TearDown() override { (void)RemoveRecursively(dir_); }

  // DIR/NAME.pem (private, 0600) and DIR/NAME.pub.
  absl::Status WriteKeys(const std::string& name) {
    ASSIGN_OR_RETURN(KeyPairPem pair, GenerateSigningKeyPair());
    RETURN_IF_ERROR(WriteFileAtomically(Key(name), pair.private_key, 0600));
    return WriteFileAtomically(PublicKey(name), pair.public_key, 0644);
  }
  std::string Key(const std::string& name) const { return dir_ + "/" + name + ".pem"; }
  std::string PublicKey(const std::string& name) const { return dir_ + "/" + name + ".pub"; }

  // --remote flags: a machine that publishes (signs with `key`), or only
  // reads (trusts `key`'s public half).
  std::vector<std::string> Publisher(const std::string& key = "writer") const {
    return {"--remote=" + redis_->url(), "--remote_signing_key=" + Key(key)};
  }
  std::vector<std::string> Reader(const std::string& key = "writer") const {
    return {"--remote=" + redis_->url(), "--remote_trusted_keys=" + PublicKey(key)};
  }

  // `kiln run examples/f.json --check` in a fresh process against `daemon`;
  // a salt makes it another key.
  static void RunF(const DaemonFixture& daemon, const std::string& salt = "") {
    absl::StatusOr<ProcessResult> run = daemon.RunTool(
        {kKilnCliPath, "run", "examples/f.json", "--check", "--salt=" + salt, "--start=false"});
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->exit_code, 0) << run->output;
  }

  static kiln::v1::StatsResponse Stats(const DaemonFixture& daemon) {
    auto client = daemon.Connect();
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return {};
    auto stats = (*client)->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *stats : kiln::v1::StatsResponse();
  }

  // Waits (bounded) until `done` holds of the daemon's stats.
  template <typename Predicate>
  static kiln::v1::StatsResponse WaitForStats(const DaemonFixture& daemon, Predicate done) {
    kiln::v1::StatsResponse stats;
    for (int i = 0; i < 300; ++i) {
      stats = Stats(daemon);
      if (done(stats)) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return stats;
  }
  static kiln::v1::StatsResponse WaitForPublishes(const DaemonFixture& daemon, int64_t n) {
    return WaitForStats(daemon, [n](const auto& stats) { return stats.remote().publishes() >= n; });
  }

  // Entry keys in Redis under the default namespace.
  std::vector<std::string> RemoteKeys(const std::string& kind) const {
    absl::StatusOr<std::string> keys = redis_->Cli({"--raw", "KEYS", "kiln:" + kind + ":*"});
    EXPECT_TRUE(keys.ok()) << keys.status();
    std::vector<std::string> lines;
    for (absl::string_view line : absl::StrSplit(keys.value_or(""), '\n', absl::SkipEmpty())) {
      lines.emplace_back(line);
    }
    return lines;
  }

  // The daemon's peak resident memory so far (VmHWM).
  static int64_t PeakRssBytes(const DaemonFixture& daemon) {
    const std::string status =
        ReadFile(absl::StrCat("/proc/", daemon.pid(), "/status")).value_or("");
    for (absl::string_view line : absl::StrSplit(status, '\n')) {
      int64_t kilobytes = 0;
      if (absl::ConsumePrefix(&line, "VmHWM:") &&
          absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(line), " kB"),
                           &kilobytes)) {
        return kilobytes << 10;
      }
    }
    ADD_FAILURE() << "no VmHWM in " << status;
    return 0;
  }

  std::unique_ptr<RedisServer> redis_;
  std::string dir_;
};

TEST_F(FleetTest, AFreshProcessOnAnotherMachineHitsWhatOneMachineCompiled) {
  DaemonFixture a, b;
  ASSERT_TRUE(a.Start(Publisher()).ok());
  ASSERT_TRUE(b.Start(Reader()).ok());

  RunF(a);
  kiln::v1::StatsResponse on_a = WaitForPublishes(a, 1);
  EXPECT_EQ(on_a.compiles(), 1);
  EXPECT_EQ(on_a.remote().misses(), 1);
  EXPECT_EQ(on_a.remote().publishes(), 1);
  EXPECT_GT(on_a.remote().bytes_written(), 1000);
  EXPECT_EQ(RemoteKeys("a").size(), 1u);
  EXPECT_TRUE(RemoteKeys("l").empty()) << "the lease is released once the entry is written";

  RunF(b);
  kiln::v1::StatsResponse on_b = Stats(b);
  EXPECT_EQ(on_b.compiles(), 0);
  EXPECT_EQ(on_b.remote().hits(), 1);
  EXPECT_EQ(on_b.entries(), 1) << "the fetched entry is stored locally";
  EXPECT_TRUE(on_b.remote().read_only());
  EXPECT_EQ(on_b.remote().publishes(), 0);

  // The next fresh process on B hits locally: Redis is not asked again.
  RunF(b);
  on_b = Stats(b);
  EXPECT_EQ(on_b.compiles(), 0);
  EXPECT_EQ(on_b.remote().hits(), 1);

  // kiln stats shows the tier.
  absl::StatusOr<ProcessResult> shown = b.RunTool({kKilnCliPath, "stats", "--start=false"});
  ASSERT_TRUE(shown.ok()) << shown.status();
  EXPECT_THAT(shown->output, HasSubstr("remote    " + redis_->url() + ", reachable, read-only"));
  EXPECT_THAT(shown->output, HasSubstr("1 hits"));
}

TEST_F(FleetTest, EightDaemonsRacingOnOneGraphCompileItOnce) {
  constexpr int kDaemons = 8;
  std::vector<std::unique_ptr<DaemonFixture>> daemons;
  for (int i = 0; i < kDaemons; ++i) {
    daemons.push_back(std::make_unique<DaemonFixture>());
    // The compile is slowed so that every request arrives while it runs.
    std::vector<std::string> flags = Publisher();
    flags.push_back("--testonly_compile_delay=1s");
    ASSERT_TRUE(daemons.back()->Start(flags).ok());
  }
  std::vector<std::thread> clients;
  for (int i = 0; i < kDaemons; ++i) {
    clients.emplace_back([&, i] { RunF(*daemons[i]); });
  }
  for (std::thread& client : clients) client.join();

  int64_t compiles = 0, hits = 0, waits = 0;
  for (const auto& daemon : daemons) {
    const kiln::v1::StatsResponse stats = Stats(*daemon);
    compiles += stats.compiles();
    hits += stats.remote().hits();
    waits += stats.remote().lease_waits();
  }
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(hits, kDaemons - 1);
  EXPECT_EQ(waits, kDaemons - 1);
}

TEST_F(FleetTest, WhenTheLeaseHolderDiesMidCompileAnotherMachineTakesOver) {
  DaemonFixture a, b;
  std::vector<std::string> slow = Publisher();
  slow.insert(slow.end(), {"--testonly_compile_delay=60s", "--remote_lease_ttl=1s"});
  ASSERT_TRUE(a.Start(slow).ok());
  std::vector<std::string> flags = Publisher();
  flags.push_back("--remote_lease_ttl=1s");
  ASSERT_TRUE(b.Start(flags).ok());

  std::thread on_a([&] {
    // A dies mid-compile: its client gets an error, which is not this test's concern.
    (void)a.RunTool({kKilnCliPath, "run", "examples/f.json", "--start=false"});
  });
  for (int i = 0; i < 200 && RemoteKeys("l").empty(); ++i) absl::SleepFor(absl::Milliseconds(50));
  ASSERT_EQ(RemoteKeys("l").size(), 1u) << "A holds the lease while it compiles";

  std::thread on_b([&] { RunF(b); });
  const kiln::v1::StatsResponse waiting =
      WaitForStats(b, [](const auto& stats) { return stats.remote().lease_waits() >= 1; });
  ASSERT_EQ(waiting.remote().lease_waits(), 1) << "B waits for A's compile";
  a.Kill(SIGKILL);
  on_b.join();
  on_a.join();

  const kiln::v1::StatsResponse on_b_stats = WaitForPublishes(b, 1);
  EXPECT_EQ(on_b_stats.compiles(), 1);
  EXPECT_EQ(on_b_stats.remote().lease_takeovers(), 1);
  EXPECT_EQ(on_b_stats.remote().publishes(), 1);
}

TEST_F(FleetTest, AMissWaitingOnAnotherMachineHoldsNoCompileThread) {
  DaemonFixture a, b;
  std::vector<std::string> slow = Publisher();
  slow.insert(slow.end(), {"--testonly_compile_delay=60s", "--remote_lease_ttl=1s"});
  ASSERT_TRUE(a.Start(slow).ok());
  std::vector<std::string> flags = Publisher();
  flags.insert(flags.end(), {"--compile_jobs=1", "--remote_lease_ttl=1s"});
  ASSERT_TRUE(b.Start(flags).ok());

  std::thread on_a(
      [&] { (void)a.RunTool({kKilnCliPath, "run", "examples/f.json", "--start=false"}); });
  for (int i = 0; i < 200 && RemoteKeys("l").empty(); ++i) absl::SleepFor(absl::Milliseconds(50));
  ASSERT_EQ(RemoteKeys("l").size(), 1u);
  std::atomic<bool> f_done{false};
  std::thread waiting([&] {
    RunF(b);
    f_done = true;
  });
  WaitForStats(b, [](const auto& stats) { return stats.remote().lease_waits() >= 1; });

  // B's only compile thread is free: another graph compiles while f waits.
  absl::StatusOr<ProcessResult> other =
      b.RunTool({kKilnCliPath, "run", "examples/tail.json", "--repeat=1", "--start=false"});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->exit_code, 0) << other->output;
  EXPECT_FALSE(f_done) << "f was still waiting for A";
  EXPECT_EQ(Stats(b).compiles(), 1);

  a.Kill(SIGKILL);  // then B takes f over
  waiting.join();
  on_a.join();
  EXPECT_EQ(Stats(b).compiles(), 2);
  EXPECT_EQ(Stats(b).remote().lease_takeovers(), 1);
}

// Leases planted by someone who can write to Redis: as many as kilnd has
// fleet threads, that look held (a TTL, renewed by no one), hold none of
// them while B's misses wait on them; and without a TTL they are taken
// over.
TEST_F(FleetTest, PlantedLeasesStarveNoOtherGraphAndWithoutATtlAreTakenOver) {
  constexpr int kPlanted = 8;
  DaemonFixture a, b;
  ASSERT_TRUE(a.Start(Publisher()).ok());
  for (int i = 0; i < kPlanted; ++i) RunF(a, absl::StrCat(i));
  WaitForPublishes(a, kPlanted);
  const std::vector<std::string> entries = RemoteKeys("a");
  ASSERT_EQ(entries.size(), size_t{kPlanted});
  std::vector<std::string> leases;
  for (const std::string& entry : entries) {
    ASSERT_EQ(redis_->Cli({"DEL", entry}).value_or(""), "1");
    leases.push_back("kiln:l:" + entry.substr(std::string("kiln:a:").size()));
    ASSERT_EQ(redis_->Cli({"SET", leases.back(), "planted", "PX", "600000"}).value_or(""), "OK");
  }

  std::vector<std::string> flags = Publisher();
  flags.push_back("--remote_max_lease_wait=60s");
  ASSERT_TRUE(b.Start(flags).ok());
  std::atomic<int> planted_done{0};
  std::vector<std::thread> planted;
  for (int i = 0; i < kPlanted; ++i) {
    planted.emplace_back([&, i] {
      RunF(b, absl::StrCat(i));
      ++planted_done;
    });
  }
  const kiln::v1::StatsResponse waiting =
      WaitForStats(b, [](const auto& stats) { return stats.remote().lease_waits() >= kPlanted; });
  EXPECT_EQ(waiting.remote().lease_waits(), kPlanted);

  // f has no planted lease and must not wait for those.
  const absl::Time start = absl::Now();
  RunF(b);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "half the lease wait";
  EXPECT_EQ(planted_done, 0);
  EXPECT_EQ(Stats(b).compiles(), 1);

  // Leases without a TTL would never lapse: the waiters take them over.
  for (const std::string& lease : leases) {
    EXPECT_EQ(redis_->Cli({"PERSIST", lease}).value_or(""), "1");
  }
  for (std::thread& thread : planted) thread.join();
  const kiln::v1::StatsResponse on_b = WaitForPublishes(b, 1 + kPlanted);
  EXPECT_EQ(on_b.compiles(), 1 + kPlanted);
  EXPECT_EQ(on_b.remote().lease_takeovers(), kPlanted);
  EXPECT_EQ(on_b.remote().publishes(), 1 + kPlanted);
  EXPECT_TRUE(RemoteKeys("l").empty()) << "released once published";
}

// A value larger than --remote_max_entry_bytes is refused without being
// read: kilnd's memory does not grow with it.
TEST_F(FleetTest, AnOversizedEntryIsRefusedUnreadAndCompiledOver) {
  DaemonFixture a, b;
  ASSERT_TRUE(a.Start(Publisher()).ok());
  RunF(a);
  WaitForPublishes(a, 1);
  ASSERT_EQ(RemoteKeys("a").size(), 1u);
  const std::string entry_key = RemoteKeys("a")[0];
  RedisClient::Options options;
  options.seeds = *ParseRedisUrl(redis_->url());
  options.timeout = absl::Seconds(30);
  std::unique_ptr<RedisClient> redis = *RedisClient::Create(options);
  constexpr int64_t kValueBytes = int64_t{64} << 20;
  ASSERT_TRUE(redis->Command({"SET", entry_key, std::string(kValueBytes, 'x')}).ok());

  ASSERT_TRUE(b.Start(Publisher()).ok());
  RunF(b);
  const kiln::v1::StatsResponse on_b = WaitForPublishes(b, 1);
  EXPECT_EQ(on_b.remote().refused(), 1);
  EXPECT_EQ(on_b.remote().bytes_read(), 0);
  EXPECT_EQ(on_b.compiles(), 1);
  EXPECT_LT(redis->Command({"STRLEN", entry_key})->integer, 1 << 20) << "B's publish overwrote it";
  // B did what A did, and refused the value besides.
  EXPECT_LT(PeakRssBytes(b), PeakRssBytes(a) + (32 << 20));
  EXPECT_THAT(b.Log(), HasSubstr("refused the fleet tier's entry for " +
                                 entry_key.substr(std::string("kiln:a:").size()) + ": it is " +
                                 std::to_string(kValueBytes) +
                                 " bytes, over the cap of 16777216 (--remote_max_entry_bytes)"));
}

// Forged entries and junk just under --remote_max_entry_bytes, missed at
// once on eight keys: kilnd's memory grows by a bound set by the cap (large
// values are fetched one at a time), not by the number of misses.
TEST_F(FleetTest, ConcurrentFetchesAtTheCapStayWithinABoundOfIt) {
  constexpr int kForged = 8;
  constexpr int64_t kCap = int64_t{8} << 20;
  // Under ASan, freed memory would wait in its quarantine (256 MiB).
  const char* asan_options = getenv("ASAN_OPTIONS");
  const EnvChanges env = {
      {"ASAN_OPTIONS", absl::StrCat(asan_options ? asan_options : "", ":quarantine_size_mb=0")}};
  DaemonFixture a(env), b(env);
  ASSERT_TRUE(a.Start(Publisher()).ok());
  for (int i = 0; i < kForged; ++i) RunF(a, absl::StrCat(i));
  WaitForPublishes(a, kForged);
  RedisClient::Options options;
  options.seeds = *ParseRedisUrl(redis_->url());
  options.timeout = absl::Seconds(30);
  std::unique_ptr<RedisClient> redis = *RedisClient::Create(options);
  // Half well-formed and signed by no trusted key, half junk.
  const std::vector<std::string> entries = RemoteKeys("a");
  for (size_t i = 0; i < entries.size(); ++i) {
    kiln::v1::RemoteEntry forged;
    forged.set_metadata("metadata");
    forged.set_object(std::string(kCap - 4096, 'x'));
    forged.set_key_id("stranger");
    forged.set_signature("signature");
    const std::string value = i % 2 == 0 ? forged.SerializeAsString() : forged.object();
    ASSERT_TRUE(redis->Command({"SET", entries[i], value}).ok());
  }

  std::vector<std::string> flags = Publisher();
  // Redis sends the eight values one after another.
  flags.insert(flags.end(),
               {absl::StrCat("--remote_max_entry_bytes=", kCap), "--remote_timeout=5s"});
  ASSERT_TRUE(b.Start(flags).ok());
  std::vector<std::thread> misses;
  for (int i = 0; i < kForged; ++i) misses.emplace_back([&, i] { RunF(b, absl::StrCat(i)); });
  for (std::thread& thread : misses) thread.join();
  const kiln::v1::StatsResponse on_b = Stats(b);
  EXPECT_EQ(on_b.remote().refused(), kForged);
  EXPECT_EQ(on_b.compiles(), kForged);
  EXPECT_LT(PeakRssBytes(b), PeakRssBytes(a) + 16 * kCap);
}

TEST_F(FleetTest, WithRedisDownOrSlowEachMachineCompilesLocally) {
  DaemonFixture a;
  std::vector<std::string> flags = Publisher();
  flags.push_back("--remote_timeout=200ms");
  ASSERT_TRUE(a.Start(flags).ok());
  redis_->Kill(SIGKILL);  // kilnd's connection breaks under it

  RunF(a);
  kiln::v1::StatsResponse stats = Stats(a);
  EXPECT_EQ(stats.compiles(), 1);
  EXPECT_FALSE(stats.remote().available());
  EXPECT_GE(stats.remote().errors(), 1);
  absl::StatusOr<ProcessResult> shown = a.RunTool({kKilnCliPath, "stats", "--start=false"});
  ASSERT_TRUE(shown.ok()) << shown.status();
  EXPECT_THAT(shown->output, HasSubstr("UNREACHABLE (compiling locally)"));

  // Back (after kilnd's reconnect backoff), it serves as before.
  ASSERT_TRUE(redis_->Restart().ok());
  absl::SleepFor(absl::Seconds(1));
  absl::StatusOr<ProcessResult> other = a.RunTool(
      {kKilnCliPath, "run", "tests/workloads/softmax.json", "--repeat=1", "--start=false"});
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_EQ(other->exit_code, 0) << other->output;
  stats = WaitForPublishes(a, 1);
  EXPECT_TRUE(stats.remote().available());
  EXPECT_EQ(stats.remote().publishes(), 1);

  // Slow: a command that outlasts --remote_timeout is a local compile too,
  // done while Redis still sleeps (an order, not a time: loaded machines
  // compile slowly, but not for the seconds Redis sleeps).
  absl::Time woke;
  std::thread sleeper([&] {
    (void)redis_->Cli({"DEBUG", "SLEEP", "8"});
    woke = absl::Now();
  });
  absl::SleepFor(absl::Milliseconds(300));
  absl::StatusOr<ProcessResult> slow =
      a.RunTool({kKilnCliPath, "run", "examples/tail.json", "--repeat=1", "--start=false"});
  const absl::Time done = absl::Now();
  sleeper.join();
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_EQ(slow->exit_code, 0) << slow->output;
  EXPECT_LT(done, woke) << "a slow Redis held the compile until it woke";
  EXPECT_EQ(Stats(a).compiles(), 3);
}

TEST_F(FleetTest, RedisKilledMidFetchIsALocalCompile) {
  DaemonFixture a;
  std::vector<std::string> flags = Publisher();
  // The fetch waits for Redis, then Redis dies.
  flags.insert(flags.end(), {"--remote_timeout=10s", "--remote_lease_ttl=30s"});
  ASSERT_TRUE(a.Start(flags).ok());
  std::thread sleeper([&] { (void)redis_->Cli({"DEBUG", "SLEEP", "30"}); });
  absl::SleepFor(absl::Milliseconds(300));  // Redis is busy: kilnd's GET will hang
  std::thread client([&] { RunF(a); });
  WaitForStats(a, [](const auto& stats) { return stats.misses() >= 1; });
  absl::SleepFor(absl::Milliseconds(300));
  redis_->Kill(SIGKILL);
  client.join();
  sleeper.join();
  const kiln::v1::StatsResponse stats = Stats(a);
  EXPECT_EQ(stats.compiles(), 1);
  EXPECT_GE(stats.remote().errors(), 1);
  EXPECT_EQ(stats.remote().hits(), 0);
}

TEST_F(FleetTest, ADamagedOrForeignSignedRemoteEntryIsRefusedRecompiledAndOverwritten) {
  DaemonFixture a, b, c;
  ASSERT_TRUE(a.Start(Publisher()).ok());
  RunF(a);
  WaitForPublishes(a, 1);
  ASSERT_EQ(RemoteKeys("a").size(), 1u);
  const std::string entry_key = RemoteKeys("a")[0];

  // Flip one byte of the object inside the value.
  RedisClient::Options options;
  options.seeds = *ParseRedisUrl(redis_->url());
  std::unique_ptr<RedisClient> redis = *RedisClient::Create(options);
  absl::StatusOr<RedisReply> value = redis->Command({"GET", entry_key});
  ASSERT_TRUE(value.ok()) << value.status();
  std::string damaged = value->str;
  damaged[damaged.size() / 2] ^= 0x01;
  ASSERT_TRUE(redis->Command({"SET", entry_key, damaged}).ok());

  ASSERT_TRUE(b.Start(Publisher()).ok());
  RunF(b);
  kiln::v1::StatsResponse on_b = WaitForPublishes(b, 1);
  EXPECT_EQ(on_b.remote().refused(), 1);
  EXPECT_EQ(on_b.compiles(), 1);
  EXPECT_NE(redis->Command({"GET", entry_key})->str, damaged) << "B's publish overwrote it";

  // A machine that trusts the writer's key hits B's entry; one that trusts
  // only another key refuses it.
  DaemonFixture trusting;
  ASSERT_TRUE(trusting.Start(Reader("writer")).ok());
  RunF(trusting);
  EXPECT_EQ(Stats(trusting).remote().hits(), 1);
  EXPECT_EQ(Stats(trusting).compiles(), 0);

  ASSERT_TRUE(c.Start(Reader("stranger")).ok());
  RunF(c);
  const kiln::v1::StatsResponse on_c = Stats(c);
  EXPECT_EQ(on_c.remote().refused(), 1);
  EXPECT_EQ(on_c.remote().hits(), 0);
  EXPECT_EQ(on_c.compiles(), 1);
}

// The remote key is the local key, which covers the toolchain and the CPU
// kilnd compiles for: a machine whose CPU differs never loads another's
// native code, while a portable target (x86-64-v3) is shared.
TEST_F(FleetTest, MachinesWithAnotherCpuShareOnlyPortableTargets) {
  DaemonFixture a, b;
  ASSERT_TRUE(a.Start(Publisher()).ok());
  // B believes it runs on another CPU: its remembered toolchain probe says so.
  ASSERT_TRUE(b.Start(Publisher()).ok());
  b.Kill(SIGTERM);
  const std::string memo_path = b.cache_dir() + "/toolchains";
  kiln::v1::ToolchainMemo memo;
  ASSERT_TRUE(memo.ParseFromString(*ReadFile(memo_path)));
  for (auto& entry : *memo.mutable_toolchains()) {
    if (entry.target() == kiln::v1::TARGET_NATIVE) entry.mutable_toolchain()->set_cpu("znver9");
  }
  ASSERT_TRUE(WriteFileAtomically(memo_path, memo.SerializeAsString(), 0600).ok());
  ASSERT_TRUE(b.Start(Publisher()).ok());

  RunF(a);
  WaitForPublishes(a, 1);
  RunF(b);
  kiln::v1::StatsResponse on_b = WaitForPublishes(b, 1);
  EXPECT_EQ(on_b.remote().hits(), 0);
  EXPECT_EQ(on_b.compiles(), 1);
  EXPECT_EQ(RemoteKeys("a").size(), 2u) << "one native entry per CPU";

  for (const DaemonFixture* daemon : {&a, &b}) {
    absl::StatusOr<ProcessResult> run = daemon->RunTool(
        {kKilnCliPath, "run", "examples/f.json", "--target=x86-64-v3", "--check", "--start=false"});
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->exit_code, 0) << run->output;
    WaitForPublishes(a, 2);
  }
  on_b = Stats(b);
  EXPECT_EQ(on_b.remote().hits(), 1) << "B hit A's x86-64-v3 entry";
  EXPECT_EQ(on_b.compiles(), 1);
}

// A fleet on a three-master Redis Cluster: entries spread over the masters
// by hash slot, and survive one master restarting (with its data).
TEST(FleetClusterTest, EntriesSpreadOverTheMastersAndSurviveOneRestarting) {
  absl::StatusOr<std::unique_ptr<RedisCluster>> cluster = RedisCluster::Start(3);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<std::string> dir = MakeTempDirectory("/tmp/kfleetXXXXXX");
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<KeyPairPem> keys = GenerateSigningKeyPair();
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_TRUE(WriteFileAtomically(*dir + "/k.pem", keys->private_key, 0600).ok());
  const std::vector<std::string> flags = {"--remote=" + (*cluster)->url(),
                                          "--remote_signing_key=" + *dir + "/k.pem"};
  // 24 buckets of one graph: 24 entries.
  const std::string plan = *dir + "/plan.json";
  char graph[4096];
  ASSERT_NE(realpath("examples/tail_dynamic.json", graph), nullptr);
  ASSERT_TRUE(WriteFileAtomically(plan,
                                  absl::StrCat(R"({"graphs": [{"graph": ")", graph,
                                               R"(", "symbols": [{"symbol": "s0", )",
                                               R"("multiples": {"of": 8, "up_to": 192}}]}]})"),
                                  0644)
                  .ok());
  auto warm = [&](const DaemonFixture& daemon) {
    absl::StatusOr<ProcessResult> run =
        daemon.RunTool({kKilnCliPath, "warmup", plan, "--start=false"});
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->exit_code, 0) << run->output;
  };

  DaemonFixture a;
  ASSERT_TRUE(a.Start(flags).ok());
  warm(a);
  kiln::v1::StatsResponse on_a;
  for (int i = 0; i < 200 && on_a.remote().publishes() < 24; ++i) {
    on_a = *(*a.Connect())->Stats();
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(on_a.compiles(), 24);
  EXPECT_EQ(on_a.remote().publishes(), 24);
  int64_t stored = 0;
  for (int i = 0; i < (*cluster)->size(); ++i) {
    absl::StatusOr<std::string> keys_here = (*cluster)->node(i).Cli({"DBSIZE"});
    ASSERT_TRUE(keys_here.ok()) << keys_here.status();
    int64_t n = 0;
    ASSERT_TRUE(absl::SimpleAtoi(*keys_here, &n)) << *keys_here;
    EXPECT_GT(n, 0) << "master " << i << " holds none of the 24 entries";
    stored += n;
  }
  EXPECT_EQ(stored, 24);

  (*cluster)->node(1).Kill(SIGKILL);
  ASSERT_TRUE((*cluster)->node(1).Restart().ok());
  ASSERT_TRUE((*cluster)->WaitUntilOk().ok());

  DaemonFixture b;
  ASSERT_TRUE(b.Start(flags).ok());
  warm(b);
  const kiln::v1::StatsResponse on_b = *(*b.Connect())->Stats();
  EXPECT_EQ(on_b.compiles(), 0);
  EXPECT_EQ(on_b.remote().hits(), 24);
  (void)RemoveRecursively(*dir);
}

TEST_F(FleetTest, ARedisPasswordComesFromAFileOnlyItsOwnerCanRead) {
  RedisServer::Options options;
  options.password = "s3cret";
  absl::StatusOr<std::unique_ptr<RedisServer>> locked = RedisServer::Start(options);
  ASSERT_TRUE(locked.ok()) << locked.status();
  const std::string password = dir_ + "/redis-password";
  ASSERT_TRUE(WriteFileAtomically(password, "s3cret\n", 0600).ok());
  std::vector<std::string> flags = {"--remote=" + (*locked)->url(),
                                    "--remote_signing_key=" + Key("writer"),
                                    "--remote_password_file=" + password};
  DaemonFixture a;
  ASSERT_TRUE(a.Start(flags).ok());
  RunF(a);
  const kiln::v1::StatsResponse on_a = WaitForPublishes(a, 1);
  EXPECT_EQ(on_a.remote().publishes(), 1);
  EXPECT_EQ(on_a.remote().errors(), 0);

  // A wrong password: every command is refused, so kilnd compiles alone.
  ASSERT_TRUE(WriteFileAtomically(password, "wrong", 0600).ok());
  DaemonFixture b;
  ASSERT_TRUE(b.Start(flags).ok());
  RunF(b);
  const kiln::v1::StatsResponse on_b = Stats(b);
  EXPECT_EQ(on_b.compiles(), 1);
  EXPECT_GE(on_b.remote().errors(), 1);
  EXPECT_FALSE(on_b.remote().available());

  // A password file others can read is refused at start, naming the fix.
  ASSERT_EQ(chmod(password.c_str(), 0644), 0);
  DaemonFixture c;
  const absl::Status refused = c.Start(flags);
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.message(), HasSubstr("chmod 600"));
}

}  // namespace
}  // namespace kiln
