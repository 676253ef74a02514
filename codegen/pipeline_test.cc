#include "codegen/pipeline.h"

#include <google/protobuf/util/json_util.h>

#include "common/files.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

kiln::v1::Graph LoadExample(const std::string& name) {
  auto json = ReadFile("examples/" + name + ".json");
  EXPECT_TRUE(json.ok()) << json.status();
  kiln::v1::Graph graph;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &graph).ok());
  return graph;
}

std::string Stage(const GeneratedCode& code, const std::string& name) {
  for (const auto& [stage, text] : code.stages) {
    if (stage == name) return text;
  }
  return "";
}

GeneratedCode Generate(const kiln::v1::Graph& graph) {
  auto prepared = PrepareGraph(graph);
  EXPECT_TRUE(prepared.ok()) << prepared.status();
  CodegenInputs inputs;
  inputs.graph = *prepared;
  auto code = GenerateCode(inputs, /*keep_stages=*/true);
  EXPECT_TRUE(code.ok()) << code.status();
  return *code;
}

TEST(PipelineTest, FFusesAddReluAndComputesMmInPlaceInTheOutput) {
  const GeneratedCode code = Generate(LoadExample("f"));
  EXPECT_EQ(Stage(code, "kernels"),
            "kernel 0: extern mm -> %2 float32[64, 64]\n"
            "    reads %0 at (i0, i1) -> (i0, i1); %0 at (i0, i1) -> (i1, i0)\n"
            "kernel 1: pointwise %4 float32[64, 64], fused with %3\n"
            "    reads %2 at (i0, i1) -> (i0, i1)\n");
  EXPECT_EQ(Stage(code, "buffer plan"),
            "input 0: 16384 bytes, holds %0\n"
            "output 0: 16384 bytes, holds %2, %4\n"
            "scratch arena: 0 bytes\n"
            "note: %4 is computed in place over %2 (dead after kernel 1) in output 0\n");
  // x @ x.T is a symmetric rank-k update on x, straight into the output.
  EXPECT_NE(code.source.find("rt->syrk_f32(rt->context, 64, 64, b0 + 0, 64, 1, b1, 64);"),
            std::string::npos)
      << code.source;
  EXPECT_NE(code.source.find("const float v1 = (v0 + 0x1p+0f);"), std::string::npos);
  EXPECT_NE(code.source.find("const float v2 = (v1 < 0x0p+0f ? 0x0p+0f : v1);"), std::string::npos);
  EXPECT_EQ(code.source.find("#include <"), std::string::npos) << "must be freestanding";
  EXPECT_EQ(code.signature.scratch_bytes(), 0);
}

TEST(PipelineTest, KeepProductKeepsTheObservableProductApart) {
  const GeneratedCode code = Generate(LoadExample("keep_product"));
  EXPECT_EQ(Stage(code, "buffer plan"),
            "input 0: 16384 bytes, holds %0\n"
            "output 0: 16384 bytes, holds %2\n"
            "output 1: 16384 bytes, holds %4\n"
            "scratch arena: 0 bytes\n");
}

TEST(PipelineTest, SourceIsDeterministicAndIgnoresNamesAndIds) {
  kiln::v1::Graph graph = LoadExample("f");
  const std::string first = Generate(graph).source;
  graph.set_name("f");  // the name stays in a comment; renumber and rename the rest
  for (auto& node : *graph.mutable_nodes()) node.set_name("renamed_" + node.name());
  EXPECT_EQ(Generate(graph).source, first);
}

TEST(PipelineTest, ErrorsNameTheNode) {
  kiln::v1::Graph unknown = LoadExample("f");
  unknown.mutable_nodes(2)->set_op("aten.frobnicate.default");
  EXPECT_EQ(PrepareGraph(unknown).status(),
            absl::UnimplementedError("node 2 'add' (aten.frobnicate.default): op "
                                     "'aten.frobnicate.default' is not supported (see docs/OPS.md)"));

  kiln::v1::Graph malformed = LoadExample("f");
  malformed.mutable_nodes(2)->set_op("add");
  EXPECT_EQ(PrepareGraph(malformed).status(),
            absl::InvalidArgumentError("node 2 'add' (add): 'add' is not an ATen op name "
                                       "(expected aten.<op>.<overload>)"));

  kiln::v1::Graph arity = LoadExample("f");
  arity.mutable_nodes(1)->mutable_inputs()->RemoveLast();
  EXPECT_EQ(PrepareGraph(arity).status(),
            absl::InvalidArgumentError(
                "node 1 'mm' (aten.mm.default): expects 2 tensor inputs, got 1"));

  kiln::v1::Graph shape = LoadExample("f");
  shape.mutable_nodes(3)->mutable_output_types(0)->mutable_sizes(0)->set_constant(32);
  EXPECT_EQ(PrepareGraph(shape).status(),
            absl::InvalidArgumentError("node 3 'relu' (aten.relu.default): result 0 is declared "
                                       "float32[32, 64] but its inputs imply float32[64, 64]"));

  kiln::v1::Graph cycle = LoadExample("f");
  cycle.mutable_nodes(1)->set_inputs(1, 4);
  EXPECT_EQ(PrepareGraph(cycle).status(),
            absl::InvalidArgumentError(
                "node 1 'mm' (aten.mm.default) uses value 4 before node 3 'relu' "
                "(aten.relu.default) defines it (a cycle, or nodes not in topological order)"));

  kiln::v1::Graph dangling = LoadExample("f");
  dangling.mutable_nodes(1)->set_inputs(1, 99);
  EXPECT_EQ(PrepareGraph(dangling).status(),
            absl::InvalidArgumentError(
                "node 1 'mm' (aten.mm.default) uses value 99, which no input or node defines"));
}

}  // namespace
}  // namespace kiln
