// Which attention masks become a bound read from the position tensor, seen
// in the core graph and the generated call.
#include "codegen/passes/attention_lengths.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "codegen/pipeline_testing.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// A decoding step's attention over 16 keys with the mask
// where(compare(a, b), 0, -inf), a and b being arange(16) ("arange") and
// the position ("position", $position_type: a JSON type), as
// F.scaled_dot_product_attention traces a boolean mask.
kiln::v1::Graph MaskedStep(const std::string& compare, const std::string& a, const std::string& b,
                           const std::string& position_type = R"({"dtype": "INT64",
                               "sizes": [{"constant": 1}]})") {
  const std::string json = absl::Substitute(
      R"({"name": "step", "inputs": [
      {"value": 0, "name": "q", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 1}, {"constant": 2}, {"constant": 1}, {"constant": 8}]}},
      {"value": 1, "name": "position", "type": $3},
      {"value": 2, "name": "k", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 1}, {"constant": 2}, {"constant": 16}, {"constant": 8}]}},
      {"value": 3, "name": "v", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 1}, {"constant": 2}, {"constant": 16}, {"constant": 8}]}}],
    "nodes": [
      {"name": "arange", "op": "aten.arange.default", "inputs": [], "outputs": [4],
       "args": [{"name": "end", "intValue": "16"}],
       "outputTypes": [{"dtype": "INT64", "sizes": [{"constant": 16}]}]},
      {"name": "compare", "op": "$0", "inputs": [$1, $2], "outputs": [5],
       "outputTypes": [{"dtype": "BOOL", "sizes": [{"constant": 16}]}]},
      {"name": "view", "op": "aten.view.default", "inputs": [5], "outputs": [6],
       "args": [{"name": "size", "intList": {"values": ["1", "1", "1", "-1"]}}],
       "outputTypes": [{"dtype": "BOOL", "sizes": [{"constant": 1}, {"constant": 1}, {"constant": 1}, {"constant": 16}]}]},
      {"name": "zero", "op": "aten.scalar_tensor.default", "inputs": [], "outputs": [7],
       "args": [{"name": "s", "floatValue": 0}, {"name": "dtype", "dtypeValue": "FLOAT32"}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": []}]},
      {"name": "minus_infinity", "op": "aten.scalar_tensor.default", "inputs": [], "outputs": [8],
       "args": [{"name": "s", "floatValue": "-Infinity"}, {"name": "dtype", "dtypeValue": "FLOAT32"}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": []}]},
      {"name": "where", "op": "aten.where.self", "inputs": [6, 7, 8], "outputs": [9],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 1}, {"constant": 1}, {"constant": 1}, {"constant": 16}]}]},
      {"name": "attention", "op": "aten._scaled_dot_product_flash_attention_for_cpu.default",
       "inputs": [0, 2, 3, 9], "outputs": [10, 11],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 1}, {"constant": 2}, {"constant": 1}, {"constant": 8}]},
                       {"dtype": "FLOAT32", "sizes": [{"constant": 1}, {"constant": 2}, {"constant": 1}]}]}],
    "outputs": [10]})",
      compare, a == "arange" ? 4 : 1, b == "arange" ? 4 : 1, position_type);
  return ParseGraph(json);
}

// The core graph and whether the attention reads the position, not a mask.
bool ReadsThePosition(const GeneratedCode& code) {
  const std::string core = Stage(code, "core graph");
  return core.find("kiln.attention_to_length.default") != std::string::npos &&
         core.find("aten.where") == std::string::npos &&
         core.find("aten.arange") == std::string::npos;
}

TEST(AttentionLengthsTest, APrefixMaskOfAPositionBecomesItsBound) {
  const GeneratedCode code = Generate(MaskedStep("aten.le.Tensor", "arange", "position"));
  const std::string core = Stage(code, "core graph");
  EXPECT_TRUE(ReadsThePosition(code)) << core;
  EXPECT_NE(
      core.find(
          "= kiln.attention_to_length.default(%0, %2, %3, %1, block=0, blocks=0, inclusive=True"),
      std::string::npos)
      << core;
  // The call reads the position, one per batch row, and no mask.
  const std::string source = Stage(code, "C++");
  EXPECT_NE(source.find("(const kiln_int64*)b1 + 0, 0, 1,\n      0, 0, 0, 0, 0, 0, 0};"),
            std::string::npos)
      << source;
}

TEST(AttentionLengthsTest, EachComparisonGivesItsBound) {
  const struct {
    const char* compare;
    const char* a;
    const char* b;
    const char* inclusive;
  } cases[] = {{"aten.lt.Tensor", "arange", "position", "False"},
               {"aten.ge.Tensor", "position", "arange", "True"},
               {"aten.gt.Tensor", "position", "arange", "False"}};
  for (const auto& c : cases) {
    const std::string core = Stage(Generate(MaskedStep(c.compare, c.a, c.b)), "core graph");
    EXPECT_NE(core.find(absl::StrCat("inclusive=", c.inclusive)), std::string::npos)
        << c.compare << "\n"
        << core;
    EXPECT_EQ(core.find("aten.where"), std::string::npos) << c.compare << "\n" << core;
  }
}

TEST(AttentionLengthsTest, OtherMasksStayMasks) {
  // A suffix (keys at or after the position), and a float position (its
  // bound is not an integer).
  for (const kiln::v1::Graph& graph :
       {MaskedStep("aten.ge.Tensor", "arange", "position"),
        MaskedStep("aten.le.Tensor", "arange", "position",
                   R"({"dtype": "FLOAT32", "sizes": [{"constant": 1}]})")}) {
    const std::string core = Stage(Generate(graph), "core graph");
    EXPECT_EQ(core.find("kiln.attention_to_length"), std::string::npos) << core;
    EXPECT_NE(core.find("aten.where.self"), std::string::npos) << core;
  }
}

}  // namespace
}  // namespace kiln
