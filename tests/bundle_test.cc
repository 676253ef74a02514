// Cache bundles end to end: `kiln export` from one kilnd, `kiln import`
// into another with an empty cache directory, and a fresh process there;
// and the bounds on what kilnd reads from bundles and requests.
#include "cache/bundle.h"

#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon_fixture.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

std::string LittleEndian(uint64_t value, int bytes) {
  std::string out(bytes, '\0');
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

// The peak resident memory of process `pid` (VmHWM), in bytes; -1 when
// it cannot be read.
int64_t PeakResidentBytes(pid_t pid) {
  const absl::StatusOr<std::string> status = ReadFile(absl::StrCat("/proc/", pid, "/status"));
  if (!status.ok()) return -1;
  const size_t at = status->find("VmHWM:");
  int64_t kilobytes = 0;
  if (at == std::string::npos ||
      !absl::SimpleAtoi(status->substr(at + 6, status->find(" kB", at) - at - 6), &kilobytes)) {
    return -1;
  }
  return kilobytes << 10;
}

// Waits up to `patience` for `daemon` to exit by itself.
bool ExitsWithin(DaemonFixture& daemon, absl::Duration patience) {
  const absl::Time deadline = absl::Now() + patience;
  while (daemon.Alive()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return true;
}

class BundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(source_.Start().ok());
    ASSERT_TRUE(target_.Start().ok());
    bundle_ = source_.root() + "/warm.kb";
  }

  static kiln::v1::StatsResponse Stats(const DaemonFixture& daemon) {
    auto client = daemon.Connect();
    EXPECT_TRUE(client.ok()) << client.status();
    auto stats = (*client)->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return *stats;
  }

  // Compiles examples/f.json in the source kilnd and exports it.
  void CompileAndExport() {
    auto run =
        source_.RunTool({kKilnCliPath, "run", "examples/f.json", "--repeat=1", "--start=false"});
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->exit_code, 0) << run->output;
    auto exported = source_.RunTool(
        {kKilnCliPath, "export", "--graph", "examples/f.json", "-o", bundle_, "--start=false"});
    ASSERT_TRUE(exported.ok()) << exported.status();
    ASSERT_EQ(exported->exit_code, 0) << exported->output;
    EXPECT_THAT(exported->output, HasSubstr("exported 1 entries"));
  }

  absl::StatusOr<ProcessResult> Import(const std::string& path, bool force = false) {
    std::vector<std::string> argv = {kKilnCliPath, "import", path, "--start=false"};
    if (force) argv.push_back("--force");
    return target_.RunTool(argv);
  }

  DaemonFixture source_, target_;
  std::string bundle_;
};

TEST_F(BundleTest, ImportedIntoAnEmptyCacheAFreshProcessHitsWithoutCompiling) {
  CompileAndExport();
  auto imported = Import(bundle_);
  ASSERT_TRUE(imported.ok()) << imported.status();
  ASSERT_EQ(imported->exit_code, 0) << imported->output;
  EXPECT_THAT(imported->output, HasSubstr("imported 1 entries"));

  // The first request asks kilnd (a bundle carries no request aliases);
  // the next process finds it in the local index.
  auto run = target_.RunTool({kKilnCliPath, "run", "examples/f.json", "--check", "--start=false"});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->exit_code, 0) << run->output;
  EXPECT_THAT(run->output, HasSubstr("(cache hit)"));
  EXPECT_THAT(run->output, HasSubstr("check    output 0 matches the reference"));
  run = target_.RunTool({kKilnCliPath, "run", "examples/f.json", "--check", "--start=false"});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->exit_code, 0) << run->output;
  EXPECT_THAT(run->output, HasSubstr("(cache hit, local index)"));
  const kiln::v1::StatsResponse stats = Stats(target_);
  EXPECT_EQ(stats.compiles(), 0);
  EXPECT_EQ(stats.entries(), 1);

  // Importing it again changes nothing; the whole cache exports the same.
  imported = Import(bundle_);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->exit_code, 0) << imported->output;
  EXPECT_EQ(Stats(target_).entries(), 1);
  auto everything =
      target_.RunTool({kKilnCliPath, "export", "-o", target_.root() + "/all.kb", "--start=false"});
  ASSERT_TRUE(everything.ok()) << everything.status();
  EXPECT_EQ(everything->exit_code, 0) << everything->output;
  auto entries = ReadBundle(target_.root() + "/all.kb");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].metadata.key(), (*ReadBundle(bundle_))[0].metadata.key());
}

TEST_F(BundleTest, AGraphNotStoredIsAnErrorNamingIt) {
  auto exported = source_.RunTool(
      {kKilnCliPath, "export", "--graph", "examples/tail.json", "-o", bundle_, "--start=false"});
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->exit_code, 1);
  EXPECT_THAT(exported->output, HasSubstr("kiln export: examples/tail.json is not in the cache"));
  EXPECT_EQ(ReadFile(bundle_).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(BundleTest, APlanExportsItsBuckets) {
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  const std::string plan = source_.root() + "/plan.json";
  ASSERT_TRUE(WriteFileAtomically(
                  plan,
                  absl::StrCat("{\"graphs\": [{\"graph\": \"", cwd,
                               "/examples/tail_dynamic.json\", \"serve\": \"SERVE_SYMBOLIC\", "
                               "\"symbols\": [{\"symbol\": \"s0\", \"sizes\": [100, 200]}]}]}"),
                  0600)
                  .ok());
  auto warmed = source_.RunTool({kKilnCliPath, "warmup", plan, "--start=false"});
  ASSERT_TRUE(warmed.ok()) << warmed.status();
  ASSERT_EQ(warmed->exit_code, 0) << warmed->output;
  auto exported =
      source_.RunTool({kKilnCliPath, "export", "--plan", plan, "-o", bundle_, "--start=false"});
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_EQ(exported->exit_code, 0) << exported->output;
  EXPECT_THAT(exported->output, HasSubstr("exported 1 entries"));
}

TEST_F(BundleTest, AFlippedByteIsRefusedAndChangesNothing) {
  CompileAndExport();
  std::string bytes = *ReadFile(bundle_);
  bytes[bytes.size() - 40] ^= 0x01;  // in the last blob, before the 32-byte checksum
  const std::string flipped = source_.root() + "/flipped.kb";
  ASSERT_TRUE(WriteFileAtomically(flipped, bytes, 0600).ok());
  const std::string key = (*ReadBundle(bundle_))[0].metadata.key();

  auto imported = Import(flipped);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->exit_code, 1);
  EXPECT_THAT(imported->output,
              HasSubstr(absl::StrCat("kiln import: ", flipped, ": entry 0 (key ", key.substr(0, 12),
                                     "…): blob does not match its digest")));
  EXPECT_EQ(Stats(target_).entries(), 0);
}

TEST_F(BundleTest, AnotherToolchainIsRefusedWithTheReasonAndForceTakesIt) {
  CompileAndExport();
  auto entries = ReadBundle(bundle_);
  ASSERT_TRUE(entries.ok()) << entries.status();
  kiln::v1::ArtifactMetadata& metadata = (*entries)[0].metadata;
  metadata.mutable_key_components()->set_toolchain(Sha256Hex("another toolchain"));
  metadata.mutable_toolchain()->set_compiler_version("clang 1.0");
  metadata.mutable_toolchain()->set_cpu("elsewhere");
  const std::string other = source_.root() + "/other.kb";
  ASSERT_TRUE(WriteBundle(other, *entries).ok());

  auto refused = Import(other);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->exit_code, 1);
  EXPECT_THAT(refused->output,
              HasSubstr(absl::StrCat("entry 0 (key ", metadata.key().substr(0, 12), ", graph ",
                                     metadata.graph_name(),
                                     "): another toolchain or CPU (clang 1.0, cpu elsewhere)")));
  EXPECT_THAT(refused->output, HasSubstr("could never be a hit here"));
  EXPECT_THAT(refused->output, HasSubstr("--force imports them anyway"));
  EXPECT_EQ(Stats(target_).entries(), 0);

  auto forced = Import(other, /*force=*/true);
  ASSERT_TRUE(forced.ok()) << forced.status();
  ASSERT_EQ(forced->exit_code, 0) << forced->output;
  EXPECT_THAT(forced->output, HasSubstr("another toolchain or CPU (clang 1.0, cpu elsewhere)"));
  EXPECT_THAT(forced->output, HasSubstr("imported 1 entries"));
  EXPECT_EQ(Stats(target_).entries(), 1);
}

TEST(BundleBoundsTest, A64GiBBlobIsRefusedNamingTheLimitAndKilndStillGoesIdle) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.Start({"--idle_timeout=2s"}).ok());
  // One entry whose blob length says 64 GiB, in a file extended (sparse)
  // to hold that many bytes: a length that fits the file.
  kiln::v1::ArtifactMetadata metadata;
  metadata.set_key(Sha256Hex("key"));
  metadata.set_digest(Sha256Hex("blob"));
  const std::string serialized = metadata.SerializeAsString();
  constexpr uint64_t kDeclared = uint64_t{64} << 30;
  const std::string head =
      absl::StrCat("KILNBNDL", LittleEndian(1, 4), LittleEndian(1, 8),
                   LittleEndian(serialized.size(), 4), serialized, LittleEndian(kDeclared, 8));
  const std::string sparse = daemon.root() + "/sparse.kb";
  ASSERT_TRUE(WriteFileAtomically(sparse, head, 0600).ok());
  ASSERT_EQ(truncate(sparse.c_str(), head.size() + kDeclared + 32), 0);
  const int64_t peak_before = PeakResidentBytes(daemon.pid());
  ASSERT_GT(peak_before, 0);

  auto imported = daemon.RunTool({kKilnCliPath, "import", sparse, "--start=false"});
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->exit_code, 1);
  EXPECT_THAT(imported->output,
              HasSubstr(absl::StrCat("kiln import: ", sparse, ": entry 0 (key ",
                                     metadata.key().substr(0, 12),
                                     "…): its blob declares 68719476736 bytes, past the limit of "
                                     "134217728 (kilnd --max_artifact_bytes)")));
  EXPECT_LT(PeakResidentBytes(daemon.pid()) - peak_before, int64_t{128} << 20);
  // Nothing is left counted in flight: the idle timeout ends it.
  EXPECT_TRUE(ExitsWithin(daemon, absl::Seconds(15))) << "kilnd did not go idle";
  EXPECT_EQ(daemon.exit_status(), 0);
}

TEST_F(BundleTest, ACompileIsAnsweredWhileAnImportRuns) {
  CompileAndExport();
  DaemonFixture slow;
  ASSERT_TRUE(slow.Start({"--testonly_import_delay=10s", "--log_level=info"}).ok());
  std::atomic<bool> import_done{false};
  absl::StatusOr<ProcessResult> imported;
  std::thread importer([&] {
    imported = slow.RunTool({kKilnCliPath, "import", bundle_, "--start=false"});
    import_done = true;
  });
  for (int i = 0; i < 200 && slow.Log().find("importing " + bundle_) == std::string::npos; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_THAT(slow.Log(), HasSubstr("importing " + bundle_));

  auto run =
      slow.RunTool({kKilnCliPath, "run", "examples/tail.json", "--repeat=1", "--start=false"});
  const bool import_done_before_compile = import_done;
  importer.join();
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0) << run->output;
  EXPECT_FALSE(import_done_before_compile) << "the compile waited for the import";
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->exit_code, 0) << imported->output;
  EXPECT_THAT(imported->output, HasSubstr("imported 1 entries"));
}

TEST_F(BundleTest, AnEvictRunsOnTheAdminPoolAndIsRefusedWhenItsQueueIsFull) {
  CompileAndExport();
  DaemonFixture slow;
  ASSERT_TRUE(slow.Start({"--testonly_import_delay=10s", "--admin_threads=1", "--admin_queue=1",
                          "--log_level=info"})
                  .ok());
  // One import holds the admin thread, a second waits in its queue.
  std::vector<std::thread> importers;
  auto import = [&] {
    slow.RunTool({kKilnCliPath, "import", bundle_, "--start=false"}).IgnoreError();
  };
  importers.emplace_back(import);
  for (int i = 0; i < 200 && slow.Log().find("importing " + bundle_) == std::string::npos; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_THAT(slow.Log(), HasSubstr("importing " + bundle_));
  importers.emplace_back(import);
  absl::SleepFor(absl::Seconds(2));

  auto client = slow.Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->Evict("abcdef").status(),
            absl::ResourceExhaustedError(
                "evict: kilnd's admin queue is full (1 calls waiting, --admin_queue); try again "
                "when they finish"));
  for (std::thread& importer : importers) importer.join();
  EXPECT_EQ((*client)->Evict("abcdef").status(), absl::NotFoundError("no entry with key abcdef"));
}

TEST(RequestBoundsTest, ARequestPastTheLimitIsRefusedNamingTheSizes) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.Start({"--max_request_bytes=2048"}).ok());
  // examples/f.json named with 4,000 more bytes: a request above 2 KiB.
  std::string graph = *ReadFile("examples/f.json");
  graph.replace(graph.find("\"name\": \"f\""), 11,
                absl::StrCat("\"name\": \"f", std::string(4000, 'x'), "\""));
  const std::string path = daemon.root() + "/long_name.json";
  ASSERT_TRUE(WriteFileAtomically(path, graph, 0600).ok());

  auto run = daemon.RunTool({kKilnCliPath, "run", path, "--repeat=1", "--start=false"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 1) << run->output;
  EXPECT_THAT(run->output, HasSubstr("Received message larger than max ("));
  EXPECT_THAT(run->output, HasSubstr(" vs. 2048)"));
  EXPECT_TRUE(daemon.Alive());
}

}  // namespace
}  // namespace kiln
