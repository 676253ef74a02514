#include "client/cpu_check.h"

#include "gtest/gtest.h"

namespace kiln {
namespace {

kiln::v1::ArtifactMetadata ArtifactFor(kiln::v1::Target target) {
  kiln::v1::ArtifactMetadata metadata;
  metadata.set_key("0123456789abcdef");
  metadata.set_target(target);
  return metadata;
}

const std::set<std::string> kHaswell = {"avx", "avx2",  "bmi",   "bmi2",   "f16c",
                                        "fma", "lzcnt", "movbe", "popcnt", "sse4.2"};

TEST(CpuCheckTest, EachTargetNeedsItsLevelsFeatures) {
  EXPECT_TRUE(RequiredCpuFeatures(ArtifactFor(kiln::v1::TARGET_NATIVE)).empty());
  EXPECT_EQ(RequiredCpuFeatures(ArtifactFor(kiln::v1::TARGET_X86_64_V3)),
            (std::vector<std::string>{"avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe"}));
  EXPECT_EQ(RequiredCpuFeatures(ArtifactFor(kiln::v1::TARGET_X86_64_V4)),
            (std::vector<std::string>{"avx2", "avx512bw", "avx512cd", "avx512dq", "avx512f",
                                      "avx512vl", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe"}));
}

TEST(CpuCheckTest, AnAvx2CpuRunsV3AndRefusesV4NamingTheTargetAndFeatures) {
  EXPECT_TRUE(CheckCpuCanRun(ArtifactFor(kiln::v1::TARGET_X86_64_V3), kHaswell).ok());
  const absl::Status v4 = CheckCpuCanRun(ArtifactFor(kiln::v1::TARGET_X86_64_V4), kHaswell);
  EXPECT_EQ(v4.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(v4.message(),
            "artifact 0123456789ab was compiled for target x86-64-v4, and this CPU lacks "
            "avx512bw, avx512cd, avx512dq, avx512f, avx512vl; compile it for a target this CPU "
            "has (--target=x86-64-v3, or native here)");
}

TEST(CpuCheckTest, AnOldCpuRefusesV3) {
  const absl::Status v3 =
      CheckCpuCanRun(ArtifactFor(kiln::v1::TARGET_X86_64_V3), {"avx", "popcnt", "sse4.2"});
  EXPECT_EQ(v3.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(v3.message().find("target x86-64-v3, and this CPU lacks avx2, bmi, bmi2, f16c, fma, "
                              "lzcnt, movbe;"),
            absl::string_view::npos)
      << v3.message();
}

// Native code may use anything its build host had: the toolchain's known
// "+" features; "-" features and ones this check cannot test are ignored.
TEST(CpuCheckTest, NativeNeedsTheBuildHostsFeatures) {
  kiln::v1::ArtifactMetadata metadata = ArtifactFor(kiln::v1::TARGET_NATIVE);
  metadata.mutable_toolchain()->set_cpu("znver5");
  metadata.mutable_toolchain()->set_cpu_feature_list("+avx2,+avx512f,-amx-tile,+prfchw,+movbe");
  EXPECT_EQ(RequiredCpuFeatures(metadata), (std::vector<std::string>{"avx2", "avx512f", "movbe"}));
  const absl::Status refused = CheckCpuCanRun(metadata, kHaswell);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("target native (znver5), and this CPU lacks avx512f;"),
            absl::string_view::npos)
      << refused.message();
  std::set<std::string> with_avx512 = kHaswell;
  with_avx512.insert("avx512f");
  EXPECT_TRUE(CheckCpuCanRun(metadata, with_avx512).ok());
}

TEST(CpuCheckTest, ThisMachineHasWhatItsOwnFeaturesSay) {
  for (const std::string& feature : HostCpuFeatures()) {
    EXPECT_NE(std::find(CpuFeatureNames().begin(), CpuFeatureNames().end(), feature),
              CpuFeatureNames().end());
  }
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_TRUE(CheckCpuCanRun(ArtifactFor(kiln::v1::TARGET_X86_64_V4), HostCpuFeatures()).ok());
  }
}

}  // namespace
}  // namespace kiln
