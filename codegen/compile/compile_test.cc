#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>

#include "codegen/compile/subprocess_compiler.h"
#include "codegen/compile/toolchain.h"
#include "common/files.h"
#include "common/testing/tiny_filesystem.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(ToolchainTest, DetectsCompilerTargetAndBuildIds) {
  auto toolchain = DetectToolchain();
  ASSERT_TRUE(toolchain.ok()) << toolchain.status();
  EXPECT_NE(toolchain->compiler_version().find("clang version 19"), std::string::npos);
  EXPECT_EQ(toolchain->target_triple(), "x86_64-pc-linux-gnu");
  EXPECT_FALSE(toolchain->cpu().empty());
  EXPECT_GT(
      std::count(toolchain->cpu_feature_list().begin(), toolchain->cpu_feature_list().end(), ','),
      10)
      << toolchain->cpu_feature_list();
  EXPECT_EQ(toolchain->cpu_features_size(), 0) << "features are written as one string";
  ASSERT_EQ(toolchain->build_ids_size(), 4);
  EXPECT_EQ(toolchain->build_ids(0).find("=?"), std::string::npos) << toolchain->build_ids(0);
}

// A portable target's fingerprint is the level's, not this host's CPU: two
// hosts with the same compiler key it alike.
TEST(ToolchainTest, PortableTargetsNameTheirLevelNotTheHostsCpu) {
  auto toolchains = DetectToolchains();
  ASSERT_TRUE(toolchains.ok()) << toolchains.status();
  ASSERT_EQ(toolchains->size(), 3u);
  const kiln::v1::Toolchain& native = toolchains->at(kiln::v1::TARGET_NATIVE);
  const kiln::v1::Toolchain& v3 = toolchains->at(kiln::v1::TARGET_X86_64_V3);
  const kiln::v1::Toolchain& v4 = toolchains->at(kiln::v1::TARGET_X86_64_V4);
  EXPECT_NE(native.cpu().rfind("x86-64", 0), 0u) << native.cpu();
  EXPECT_EQ(v3.cpu(), "x86-64-v3");
  EXPECT_EQ(v4.cpu(), "x86-64-v4");
  EXPECT_EQ(v3.cpu_feature_list(), "") << "no host feature leaks into a portable fingerprint";
  EXPECT_EQ(v4.cpu_feature_list(), "");
  for (const kiln::v1::Toolchain* toolchain : {&v3, &v4}) {
    EXPECT_EQ(toolchain->compiler_version(), native.compiler_version());
    EXPECT_EQ(toolchain->build_ids_size(), native.build_ids_size());
  }
  auto flags = [](const kiln::v1::Toolchain& toolchain) {
    return std::vector<std::string>(toolchain.flags().begin(), toolchain.flags().end());
  };
  EXPECT_EQ(flags(native), CodegenFlags(kiln::v1::TARGET_NATIVE));
  EXPECT_EQ(flags(v3), CodegenFlags(kiln::v1::TARGET_X86_64_V3));
  EXPECT_EQ(CodegenFlags(kiln::v1::TARGET_X86_64_V3)[3], "-march=x86-64-v3");
  EXPECT_EQ(CodegenFlags(kiln::v1::TARGET_X86_64_V4)[3], "-march=x86-64-v4");
  EXPECT_EQ(CodegenFlags(kiln::v1::TARGET_X86_64_V4)[4], "-mprefer-vector-width=512");
  EXPECT_EQ(CodegenFlags(kiln::v1::TARGET_X86_64_V3)[4], "-fPIC") << "256-bit vectors";
}

TEST(ToolchainTest, NativeFlagsAreThoseOfBeforeTargets) {
  // Native keys (and so every entry stored before targets) depend on these.
  EXPECT_EQ(
      CodegenFlags(),
      (std::vector<std::string>{
          "-std=c++17", "-O3", "-fno-unroll-loops", "-march=native", "-mprefer-vector-width=512",
          "-fPIC", "-fvisibility=hidden", "-fno-math-errno", "-ffreestanding", "-ffp-contract=off",
          "-fno-exceptions", "-fno-rtti", "-fno-asynchronous-unwind-tables", "-nostdlib", "-shared",
          "-fuse-ld=lld", "-Wno-unused-command-line-argument"}));
}

TEST(TargetTest, NamesParseBackAndUnknownOnesAreRefused) {
  for (kiln::v1::Target target : AllTargets()) {
    auto parsed = ParseTarget(TargetName(target));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, target);
  }
  EXPECT_EQ(ParseTarget("skylake").status().message(),
            "unknown target 'skylake'; use native, x86-64-v3 or x86-64-v4");
  EXPECT_FALSE(IsKnownTarget(3));
  EXPECT_EQ(TargetName(static_cast<kiln::v1::Target>(3)), "target 3");
}

// The memo answers while its fingerprint matches (a marker planted in it
// comes back); another fingerprint or a damaged memo means probing again.
TEST(ToolchainTest, ProbesAreRememberedUntilTheirFingerprintChanges) {
  auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(dir.ok());
  const std::string memo_path = *dir + "/toolchains";
  auto probed = DetectToolchainsRemembered(memo_path);
  ASSERT_TRUE(probed.ok()) << probed.status();
  ASSERT_EQ(probed->size(), 3u);
  auto read_memo = [&] {
    kiln::v1::ToolchainMemo memo;
    auto bytes = ReadFile(memo_path);
    EXPECT_TRUE(bytes.ok() && memo.ParseFromString(*bytes));
    return memo;
  };
  kiln::v1::ToolchainMemo memo = read_memo();
  ASSERT_EQ(memo.toolchains_size(), 3);
  const std::string fingerprint = memo.fingerprint();
  for (auto& entry : *memo.mutable_toolchains()) {
    entry.mutable_toolchain()->set_compiler_version("remembered");
  }
  ASSERT_TRUE(WriteFileAtomically(memo_path, memo.SerializeAsString(), 0600).ok());
  auto remembered = DetectToolchainsRemembered(memo_path);
  ASSERT_TRUE(remembered.ok()) << remembered.status();
  EXPECT_EQ(remembered->at(kiln::v1::TARGET_X86_64_V4).compiler_version(), "remembered");

  memo.set_fingerprint("another compiler or CPU");
  ASSERT_TRUE(WriteFileAtomically(memo_path, memo.SerializeAsString(), 0600).ok());
  auto reprobed = DetectToolchainsRemembered(memo_path);
  ASSERT_TRUE(reprobed.ok()) << reprobed.status();
  EXPECT_EQ(reprobed->at(kiln::v1::TARGET_NATIVE).compiler_version(),
            probed->at(kiln::v1::TARGET_NATIVE).compiler_version());
  EXPECT_EQ(read_memo().fingerprint(), fingerprint);

  ASSERT_TRUE(WriteFileAtomically(memo_path, "not a memo", 0600).ok());
  auto after_damage = DetectToolchainsRemembered(memo_path);
  ASSERT_TRUE(after_damage.ok()) << after_damage.status();
  EXPECT_EQ(after_damage->at(kiln::v1::TARGET_NATIVE).cpu(),
            probed->at(kiln::v1::TARGET_NATIVE).cpu());
  RemoveRecursively(*dir).IgnoreError();
}

TEST(ToolchainTest, BuildIdOfANonElfFileIsAnError) {
  auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(WriteFileAtomically(*dir + "/x", "not elf", 0600).ok());
  EXPECT_EQ(ElfBuildId(*dir + "/x").status().code(), absl::StatusCode::kInvalidArgument);
  RemoveRecursively(*dir).IgnoreError();
}

TEST(SubprocessCompilerTest, CompilesALoadableFreestandingObject) {
  auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(dir.ok());
  SubprocessCompiler compiler(*dir, absl::Seconds(60));
  auto object = compiler.Compile(
      "extern \"C\" __attribute__((visibility(\"default\"))) int kiln_answer() { return 42; }\n"
      "int hidden_helper() { return 1; }\n",
      kiln::v1::TARGET_NATIVE);
  ASSERT_TRUE(object.ok()) << object.status();
  ASSERT_TRUE(WriteFileAtomically(*dir + "/a.so", object->shared_object, 0500).ok());
  void* handle = dlopen((*dir + "/a.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto answer = reinterpret_cast<int (*)()>(dlsym(handle, "kiln_answer"));
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(answer(), 42);
  EXPECT_EQ(dlsym(handle, "_Z13hidden_helperv"), nullptr) << "-fvisibility=hidden";
  dlclose(handle);
  RemoveRecursively(*dir).IgnoreError();
}

TEST(SubprocessCompilerTest, InvalidSourceIsAnInternalErrorWithDiagnostics) {
  auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(dir.ok());
  SubprocessCompiler compiler(*dir, absl::Seconds(60));
  auto object = compiler.Compile("this is not C++;", kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(object.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(object.status().message().find("error:"), std::string::npos) << object.status();
  RemoveRecursively(*dir).IgnoreError();
}

constexpr char kAnswerSource[] =
    "extern \"C\" __attribute__((visibility(\"default\"))) int kiln_answer() { return 42; }\n";

class SubprocessCompilerLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
  }
  void TearDown() override {
    filesystem_.reset();
    RemoveRecursively(dir_).IgnoreError();
  }

  // A 64 KiB file system at dir_/tiny with `free_bytes` left; empty when
  // this process may not mount one (then the test skips).
  std::string TinyDirectory(size_t free_bytes) {
    const std::string tiny = dir_ + "/tiny";
    EXPECT_TRUE(MakeDirectories(tiny, 0700).ok());
    auto filesystem = TinyFilesystem::Mount(tiny, 64 << 10);
    if (!filesystem.ok()) {
      skip_reason_ = std::string(filesystem.status().message());
      return "";
    }
    filesystem_ = *std::move(filesystem);
    EXPECT_TRUE(filesystem_->FillLeaving(free_bytes).ok());
    return tiny;
  }

  std::string dir_;
  std::string skip_reason_;
  std::unique_ptr<TinyFilesystem> filesystem_;
};

TEST_F(SubprocessCompilerLimitsTest, FullDiskForTheSourceIsResourceExhausted) {
  const std::string tiny = TinyDirectory(0);
  if (tiny.empty()) GTEST_SKIP() << "needs root to mount a tmpfs: " << skip_reason_;
  SubprocessCompiler compiler(tiny, absl::Seconds(60));
  auto object = compiler.Compile(kAnswerSource, kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(object.status().code(), absl::StatusCode::kResourceExhausted) << object.status();
  EXPECT_EQ(object.status().message(), "no space left on device in " + tiny);
  ASSERT_TRUE(filesystem_->Empty().ok());
  EXPECT_TRUE(compiler.Compile(kAnswerSource, kiln::v1::TARGET_NATIVE).ok())
      << "space freed, compiles work again";
}

// Room for the source and the object, not for the .so: lld, run by the
// driver, dies of SIGBUS on its mapped output.
TEST_F(SubprocessCompilerLimitsTest, FullDiskForTheLibraryIsResourceExhausted) {
  const std::string tiny = TinyDirectory(8192);
  if (tiny.empty()) GTEST_SKIP() << "needs root to mount a tmpfs: " << skip_reason_;
  SubprocessCompiler compiler(tiny, absl::Seconds(60));
  auto object = compiler.Compile(kAnswerSource, kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(object.status().code(), absl::StatusCode::kResourceExhausted) << object.status();
  EXPECT_EQ(object.status().message(), "no space left on device in " + tiny);
}

TEST_F(SubprocessCompilerLimitsTest, MemoryLimitAppliesToClangAndIsNamed) {
  // Too little address space for clang++ to even map its libraries.
  SubprocessCompiler compiler(dir_, absl::Seconds(60), kDefaultClang, uint64_t{64} << 20);
  auto object = compiler.Compile(kAnswerSource, kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(object.status().code(), absl::StatusCode::kResourceExhausted) << object.status();
  EXPECT_EQ(object.status().message(),
            "compile exceeded the compiler's memory limit of 64 MiB (RLIMIT_AS)");
  SubprocessCompiler roomy(dir_, absl::Seconds(60), kDefaultClang, uint64_t{4} << 30);
  EXPECT_TRUE(roomy.Compile(kAnswerSource, kiln::v1::TARGET_NATIVE).ok())
      << "a kernel fits the default limit";
}

TEST_F(SubprocessCompilerLimitsTest, RemovesDirectoriesOfDeadCompilesAtStart) {
  ASSERT_TRUE(MakeDirectories(dir_ + "/compileAbC123", 0700).ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/compileAbC123/kernel.cc", "x", 0600).ok());
  ASSERT_TRUE(MakeDirectories(dir_ + "/kiln-workerXyZ", 0700).ok());
  SubprocessCompiler compiler(dir_, absl::Seconds(60));
  EXPECT_NE(access((dir_ + "/compileAbC123").c_str(), F_OK), 0);
  EXPECT_EQ(access((dir_ + "/kiln-workerXyZ").c_str(), F_OK), 0) << "a WorkerCompiler's";
}

}  // namespace
}  // namespace kiln
