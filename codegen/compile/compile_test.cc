#include <dlfcn.h>

#include "codegen/compile/subprocess_compiler.h"
#include "codegen/compile/toolchain.h"
#include "common/files.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(ToolchainTest, DetectsCompilerTargetAndBuildIds) {
  auto toolchain = DetectToolchain();
  ASSERT_TRUE(toolchain.ok()) << toolchain.status();
  EXPECT_NE(toolchain->compiler_version().find("clang version 19"), std::string::npos);
  EXPECT_EQ(toolchain->target_triple(), "x86_64-pc-linux-gnu");
  EXPECT_FALSE(toolchain->cpu().empty());
  EXPECT_GT(toolchain->cpu_features_size(), 10);
  ASSERT_EQ(toolchain->build_ids_size(), 4);
  EXPECT_EQ(toolchain->build_ids(0).find("=?"), std::string::npos) << toolchain->build_ids(0);
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
      "int hidden_helper() { return 1; }\n");
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
  auto object = compiler.Compile("this is not C++;");
  EXPECT_EQ(object.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(object.status().message().find("error:"), std::string::npos) << object.status();
  RemoveRecursively(*dir).IgnoreError();
}

}  // namespace
}  // namespace kiln
