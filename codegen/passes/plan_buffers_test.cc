// Outputs that are inputs (docs/ARCHITECTURE.md): the planner's proof, each
// condition held and broken, and what the emitter and signature make of it.
#include "codegen/passes/plan_buffers.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "codegen/pipeline.h"
#include "codegen/prepare.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

constexpr char kRows[] = R"({"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 8}]})";

// A graph over c and x, both float32[4, 8] unless `c_type` says otherwise,
// with `nodes` (values from 2 on), `outputs`, and output 0 aliasing input 0.
kiln::v1::Graph AliasGraph(const std::string& nodes, const std::string& outputs,
                           const std::string& c_type = kRows) {
  const std::string json = absl::StrCat(
      R"({"name": "alias", "inputs": [{"value": 0, "name": "c", "type": )", c_type,
      R"(}, {"value": 1, "name": "x", "type": )", kRows, R"(}], "nodes": [)", nodes,
      R"(], "outputs": [)", outputs, R"(], "outputAliases": [{"output": 0, "input": 0}]})");
  kiln::v1::Graph graph;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &graph).ok()) << json;
  return graph;
}

std::string Node(const std::string& op, const std::string& inputs, int output,
                 const std::string& args = "", const std::string& type = kRows) {
  return absl::StrCat(R"({"op": ")", op, R"(", "inputs": [)", inputs, R"(], "outputs": [)", output,
                      R"(], "args": [)", args, R"(], "outputTypes": [)", type, "]}");
}

const char kTwice[] = R"({"name": "other", "floatValue": 2.0})";

GeneratedCode Generate(const kiln::v1::Graph& graph) {
  absl::StatusOr<ir::Graph> prepared = PrepareGraph(graph);
  EXPECT_TRUE(prepared.ok()) << prepared.status();
  CodegenInputs inputs;
  inputs.graph = *prepared;
  absl::StatusOr<GeneratedCode> code = GenerateCode(inputs, /*keep_stages=*/true);
  EXPECT_TRUE(code.ok()) << code.status();
  return *code;
}

std::string BufferPlan(const GeneratedCode& code) {
  for (const auto& [stage, text] : code.stages) {
    if (stage == "buffer plan") return text;
  }
  return "";
}

TEST(PlanBuffersAliasTest, APointwiseLastReaderAtIdentityWritesInTheInput) {
  const GeneratedCode code = Generate(AliasGraph(Node("aten.add.Tensor", "0, 1", 2), "2"));
  EXPECT_EQ(BufferPlan(code),
            "input 1: 128 bytes, holds %1\n"
            "output 0 (input 0's storage): 128 bytes, holds %0, %2\n"
            "scratch arena: 0 bytes\n"
            "note: output 0 is written in input 0's storage\n");
  ASSERT_EQ(code.signature.output_aliases_size(), 1);
  EXPECT_EQ(code.signature.output_aliases(0).output(), 0);
  EXPECT_EQ(code.signature.output_aliases(0).input(), 0);
}

TEST(PlanBuffersAliasTest, AnOutputWrittenByACopyKeepsItsOwnStorage) {
  const GeneratedCode code = Generate(AliasGraph(Node("aten.add.Tensor", "0, 1", 2), "1, 2"));
  EXPECT_NE(BufferPlan(code).find("note: output 0 is not input 0's storage: output 0 is not "
                                  "computed by a pointwise or scatter kernel of its own\n"),
            std::string::npos)
      << BufferPlan(code);
  EXPECT_EQ(code.signature.output_aliases_size(), 0);
}

TEST(PlanBuffersAliasTest, AnInputOfAnotherShapeKeepsItsOwnStorage) {
  const GeneratedCode code =
      Generate(AliasGraph(Node("aten.add.Tensor", "0, 1", 2), "2",
                          R"({"dtype": "FLOAT32", "sizes": [{"constant": 1}, {"constant": 8}]})"));
  EXPECT_NE(BufferPlan(code).find("note: output 0 is not input 0's storage: input 0 is not a "
                                  "contiguous tensor of output 0's dtype and sizes\n"),
            std::string::npos)
      << BufferPlan(code);
  EXPECT_EQ(code.signature.output_aliases_size(), 0);
}

TEST(PlanBuffersAliasTest, AStridedInputKeepsItsOwnStorage) {
  const GeneratedCode code =
      Generate(AliasGraph(Node("aten.add.Tensor", "0, 1", 2), "2",
                          R"({"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 8}],
          "strides": [{"constant": 1}, {"constant": 4}]})"));
  EXPECT_NE(BufferPlan(code).find("note: output 0 is not input 0's storage: input 0 is not a "
                                  "contiguous tensor of output 0's dtype and sizes\n"),
            std::string::npos)
      << BufferPlan(code);
}

TEST(PlanBuffersAliasTest, AnInputReadAfterTheWriterKeepsItsOwnStorage) {
  const GeneratedCode code =
      Generate(AliasGraph(absl::StrCat(Node("aten.add.Tensor", "0, 1", 2), ", ",
                                       Node("aten.sum.dim_IntList", "0", 3,
                                            R"({"name": "dim", "intList": {"values": ["0"]}})",
                                            R"({"dtype": "FLOAT32", "sizes": [{"constant": 8}]})")),
                          "2, 3"));
  EXPECT_NE(BufferPlan(code).find("note: output 0 is not input 0's storage: input 0 is read "
                                  "after the kernel that writes output 0 (kernel 1)\n"),
            std::string::npos)
      << BufferPlan(code);
  EXPECT_EQ(code.signature.output_aliases_size(), 0);
}

TEST(PlanBuffersAliasTest, AnInputReadAtAnotherElementKeepsItsOwnStorage) {
  const std::string square = R"({"dtype": "FLOAT32", "sizes": [{"constant": 8}, {"constant": 8}]})";
  const GeneratedCode code = Generate(AliasGraph(
      absl::StrCat(Node("aten.t.default", "0", 2, "",
                        R"({"dtype": "FLOAT32", "sizes": [{"constant": 8}, {"constant": 8}],
                            "strides": [{"constant": 1}, {"constant": 8}]})"),
                   ", ", Node("aten.add.Tensor", "0, 2", 3, "", square)),
      "3", square));
  EXPECT_NE(BufferPlan(code).find("note: output 0 is not input 0's storage: kernel 0 reads "
                                  "input 0 at another element than the one it writes\n"),
            std::string::npos)
      << BufferPlan(code);
}

TEST(PlanBuffersAliasTest, AnInputReadByAnotherKernelOfTheGroupKeepsItsOwnStorage) {
  // m = c * 2, read twice, is a kernel of its own, before c + m (output 0)
  // and in its group: a second reader of c.
  const GeneratedCode code = Generate(AliasGraph(
      absl::StrCat(Node("aten.mul.Tensor", "0", 2, kTwice), ", ",
                   Node("aten.add.Tensor", "0, 2", 3), ", ", Node("aten.mul.Tensor", "2, 1", 4)),
      "3, 4"));
  EXPECT_NE(BufferPlan(code).find("note: output 0 is not input 0's storage: kernel 0, of the same "
                                  "group as kernel 1, reads input 0\n"),
            std::string::npos)
      << BufferPlan(code);
}

// A cache c [4, 8] written at positions pos [n] with rows k [n, 8] by
// index_copy along dim 0 (x[pos] = k), returned as c's new value.
kiln::v1::Graph CacheWrite(int rows, const std::string& source_input = "2") {
  const std::string k = absl::StrCat(R"({"dtype": "FLOAT32", "sizes": [{"constant": )", rows,
                                     R"(}, {"constant": 8}]})");
  const std::string json = absl::StrCat(
      R"({"name": "cache_write", "inputs": [{"value": 0, "name": "c", "type": )", kRows,
      R"(}, {"value": 1, "name": "pos", "type": {"dtype": "INT64", "sizes": [{"constant": )", rows,
      R"(}]}}, {"value": 2, "name": "k", "type": )", k, R"(}], "nodes": [)",
      Node("aten.index_copy.default", absl::StrCat("0, 1, ", source_input), 3,
           R"({"name": "dim", "intValue": "0"})"),
      R"(], "outputs": [3], "outputAliases": [{"output": 0, "input": 0}]})");
  kiln::v1::Graph graph;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &graph).ok()) << json;
  return graph;
}

TEST(PlanBuffersAliasTest, AnIndexedWriteWritesOnlyItsRowsInTheInput) {
  const GeneratedCode code = Generate(CacheWrite(1));
  EXPECT_EQ(BufferPlan(code),
            "input 1: 8 bytes, holds %1\n"
            "input 2: 32 bytes, holds %2\n"
            "output 0 (input 0's storage): 128 bytes, holds %0, %3\n"
            "scratch arena: 0 bytes\n"
            "note: output 0 is written in input 0's storage\n");
  // Every index checked first; then no loop over c's 4 rows, only k's one.
  EXPECT_NE(code.source.find("static kiln_int32 kiln_group_0(const kiln_runtime* rt, const "
                             "kiln_int64* symbols, float* __restrict__ p0, const long long* "
                             "__restrict__ p1, const float* __restrict__ p2) {\n"
                             "  (void)rt;\n  (void)symbols;\n"
                             "  {\n"
                             "    const kiln_int64 i0 = 0;\n"
                             "    for (kiln_int64 i1 = 0; i1 < 8; ++i1) {\n"
                             "      long long v0 = p1[i0];\n"
                             "      if ((v0 < 0) | (v0 >= 4)) {\n"
                             "        rt->index_error(rt->context, \"index_copy\", 0, v0, 4);\n"
                             "        return KILN_RUN_INDEX_ERROR;\n"
                             "      }\n"
                             "    }\n"
                             "  }\n"
                             "  {\n"
                             "    const kiln_int64 i0 = 0;\n"
                             "    for (kiln_int64 i1 = 0; i1 < 8; ++i1) {\n"
                             "      long long v1 = p1[i0];\n"
                             "      float v2 = p2[i0 * 8 + i1];\n"
                             "      if ((v1 >= 0) & (v1 < 4)) {\n"
                             "        p0[i1 + v1 * 8] = v2;\n"
                             "      }\n"
                             "    }\n"
                             "  }\n"
                             "  return 0;\n"
                             "}\n"),
            std::string::npos)
      << code.source;
  EXPECT_EQ(code.source.find("i0 < 4;"), std::string::npos) << code.source;
  EXPECT_NE(code.source.find("    const kiln_int32 status = kiln_group_0(rt, symbols, b3, b1, "
                             "b2);\n    if (status != 0) return status;\n"),
            std::string::npos)
      << code.source;
}

TEST(PlanBuffersAliasTest, AnIndexedWriteWhosePointsReadTheInputKeepsItsOwnStorage) {
  // c.index_copy(0, pos, c): the rows written are read from c itself.
  const GeneratedCode code = Generate(CacheWrite(4, "0"));
  EXPECT_NE(BufferPlan(code).find("note: output 0 is not input 0's storage: kernel 0 reads "
                                  "input 0 at the points it writes\n"),
            std::string::npos)
      << BufferPlan(code);
  EXPECT_EQ(code.signature.output_aliases_size(), 0);
}

TEST(EmitAliasTest, TheAliasedInputIsWrittenThroughOneNonConstPointer) {
  const GeneratedCode code = Generate(AliasGraph(Node("aten.add.Tensor", "0, 1", 2), "2"));
  EXPECT_NE(code.source.find("  float* const b2 = (float*)(inputs[0]);\n"), std::string::npos)
      << code.source;
  EXPECT_NE(code.source.find("  const float* const b1 = (const float*)(inputs[1]);\n"),
            std::string::npos)
      << code.source;
  EXPECT_EQ(code.source.find("outputs[0]"), std::string::npos) << code.source;

  kiln::v1::Graph graph = AliasGraph(Node("aten.add.Tensor", "0, 1", 2), "2");
  graph.clear_output_aliases();  // then the input is const and the output its own
  const GeneratedCode apart = Generate(graph);
  EXPECT_NE(apart.source.find("  const float* const b0 = (const float*)(inputs[0]);\n"),
            std::string::npos)
      << apart.source;
  EXPECT_NE(apart.source.find("outputs[0]"), std::string::npos) << apart.source;
}

TEST(ImportAliasTest, AnAliasOutOfRangeOrTwiceIsInvalid) {
  kiln::v1::Graph graph = AliasGraph(Node("aten.add.Tensor", "0, 1", 2), "2");
  graph.mutable_output_aliases(0)->set_input(2);
  EXPECT_EQ(PrepareGraph(graph).status(),
            absl::InvalidArgumentError("output_aliases[0].input is 2; the graph has 2 inputs"));
  graph.mutable_output_aliases(0)->set_input(0);
  graph.mutable_output_aliases(0)->set_output(1);
  EXPECT_EQ(PrepareGraph(graph).status(),
            absl::InvalidArgumentError("output_aliases[0].output is 1; the graph has 1 outputs"));
  graph.mutable_output_aliases(0)->set_output(0);
  *graph.add_output_aliases() = graph.output_aliases(0);
  graph.mutable_output_aliases(1)->set_input(1);
  EXPECT_EQ(PrepareGraph(graph).status(),
            absl::InvalidArgumentError("output_aliases[1] names output 0 or input 1 a second time; "
                                       "each output and input may alias once"));
}

}  // namespace
}  // namespace kiln
