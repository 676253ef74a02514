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
                                  "computed by a pointwise kernel of its own\n"),
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
