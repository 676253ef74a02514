// Cache bundles end to end: `kiln export` from one kilnd, `kiln import`
// into another with an empty cache directory, and a fresh process there.
#include "cache/bundle.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon_fixture.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

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

  auto run = target_.RunTool({kKilnCliPath, "run", "examples/f.json", "--check", "--start=false"});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->exit_code, 0) << run->output;
  EXPECT_THAT(run->output, HasSubstr("(cache hit, local index)"));
  EXPECT_THAT(run->output, HasSubstr("check    output 0 matches the reference"));
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

}  // namespace
}  // namespace kiln
