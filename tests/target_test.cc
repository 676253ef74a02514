// Code-generation targets end to end: one graph compiled for native,
// x86-64-v3 and x86-64-v4 by a real kilnd, each run and checked, each under
// its own key, each artifact holding its own vector registers: ymm for v3,
// zmm for v4, and for native whichever this CPU has. An AVX2-only CPU
// compiles the x86-64-v4 artifact and refuses to run it, naming avx512f.
#include <regex>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cpu_check.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon_fixture.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

constexpr char kObjdump[] = "/usr/lib/llvm-19/bin/llvm-objdump";

struct Case {
  const char* graph;
  std::vector<const char*> check;  // how `kiln run` compares the outputs
};

const Case kCases[] = {
    {"examples/f.json", {"--check"}},
    {"tests/workloads/softmax.json", {"--reference=tests/workloads/softmax.ref.json"}},
};

class TargetTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.Start().ok()); }

  // `kiln ARGS... --start=false` (`explain`, which never talks to kilnd,
  // takes no --start); its output, after asserting it succeeded.
  std::string Kiln(std::vector<std::string> args) {
    if (args[0] != "explain") args.push_back("--start=false");
    args.insert(args.begin(), kKilnCliPath);
    auto result = daemon_.RunTool(args);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return "";
    EXPECT_EQ(result->exit_code, 0) << result->output;
    return result->output;
  }

  DaemonFixture daemon_;
};

// The line of `text` that starts with `label`, without the label.
std::string Field(const std::string& text, const std::string& label) {
  std::smatch match;
  const std::regex line("(?:^|\n)" + label + " *([^\n]*)");
  return std::regex_search(text, match, line) ? match[1].str() : "";
}

TEST_F(TargetTest, EachTargetCompilesRunsAndHasItsOwnKeyAndRegisters) {
  const bool avx512 = HostCpuFeatures().count("avx512f") > 0;
  for (const Case& test_case : kCases) {
    SCOPED_TRACE(test_case.graph);
    std::set<std::string> keys;
    for (const char* target : {"native", "x86-64-v3", "x86-64-v4"}) {
      SCOPED_TRACE(target);
      const std::string flag = absl::StrCat("--target=", target);
      std::vector<std::string> run = {"run", test_case.graph, flag, "--repeat=2"};
      run.insert(run.end(), test_case.check.begin(), test_case.check.end());
      const bool wide =
          std::string(target) == "x86-64-v4" || (std::string(target) == "native" && avx512);
      if (wide && !avx512) {
        run.insert(run.begin(), kKilnCliPath);
        run.push_back("--start=false");
        auto refused = daemon_.RunTool(run);
        ASSERT_TRUE(refused.ok()) << refused.status();
        EXPECT_NE(refused->exit_code, 0);
        EXPECT_THAT(refused->output, HasSubstr("this CPU lacks avx512"));
      } else {
        const std::string ran = Kiln(run);
        EXPECT_THAT(ran, HasSubstr("(compiled)"));
        EXPECT_THAT(ran, testing::AnyOf(HasSubstr("check    output 0 matches the reference"),
                                        HasSubstr("outputs match eager PyTorch")));
      }

      // A hit now, reporting the artifact's key, target and object.
      const std::string compiled = Kiln({"compile", test_case.graph, flag});
      const std::string key = Field(compiled, "hit");
      ASSERT_EQ(key.size(), 64u) << compiled;
      EXPECT_TRUE(keys.insert(key).second) << "another target has key " << key;
      EXPECT_THAT(Field(compiled, "  target"), HasSubstr(target));
      const std::string object =
          Field(compiled, "  object").substr(0, Field(compiled, "  object").find(' '));

      auto disassembly =
          RunProcess({kObjdump, "-d", "--no-show-raw-insn", object}, absl::Minutes(1));
      ASSERT_TRUE(disassembly.ok() && disassembly->exit_code == 0) << object;
      const std::string& code = disassembly->output;
      if (wide) {
        EXPECT_THAT(code, HasSubstr("%zmm")) << "512-bit vectors";
      } else {
        EXPECT_THAT(code, HasSubstr("%ymm")) << "256-bit vectors";
        EXPECT_THAT(code, testing::Not(HasSubstr("%zmm"))) << "must run on AVX2-only CPUs";
      }
      // `kiln explain --asm` shows what the compiler makes for the target.
      const std::string explained = Kiln({"explain", "--asm", flag, test_case.graph});
      const std::string assembly = explained.substr(explained.find("== assembly =="));
      EXPECT_EQ(assembly.find("%zmm") != std::string::npos, wide);
    }
    EXPECT_EQ(keys.size(), 3u);
  }
}

TEST_F(TargetTest, AnUnknownTargetIsRefusedNamingTheKnownOnes) {
  auto result = daemon_.RunTool(
      {kKilnCliPath, "compile", "examples/f.json", "--target=skylake", "--start=false"});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 1);
  EXPECT_THAT(result->output,
              HasSubstr("kiln compile: unknown target 'skylake'; use native, x86-64-v3 or "
                        "x86-64-v4"));
}

}  // namespace
}  // namespace kiln
