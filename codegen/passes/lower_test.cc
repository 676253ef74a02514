// Lower: a view is an index map onto its source, a pointwise op an
// expression over loads, a product an extern call.
#include "codegen/passes/lower.h"

#include "codegen/passes/decompose.h"
#include "codegen/pipeline_testing.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(LowerTest, AViewIsAMapAndAnAddAnExpressionOverLoads) {
  const ir::Graph graph = Prepare(R"({"name": "lower", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 2}, {"constant": 3}]}},
      {"value": 1, "name": "y", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 3}, {"constant": 2}]}}],
    "nodes": [
      {"name": "t", "op": "aten.t.default", "inputs": [1], "outputs": [2],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 2}, {"constant": 3}],
                        "strides": [{"constant": 1}, {"constant": 2}]}]},
      {"name": "add", "op": "aten.add.Tensor", "inputs": [0, 2], "outputs": [3],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 2}, {"constant": 3}]}]},
      {"name": "mm", "op": "aten.mm.default", "inputs": [3, 1], "outputs": [4],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 2}, {"constant": 2}]}]}],
    "outputs": [4]})");
  absl::StatusOr<ir::Graph> core = Decompose(graph);
  ASSERT_TRUE(core.ok()) << core.status();
  absl::StatusOr<ir::LoopProgram> program = Lower(*core);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(ir::ToString(*program, *core),
            "%0 : float32[2, 3] = input\n"
            "%1 : float32[3, 2] = input\n"
            "%2 : float32[2, 3]{strides 1, 2} = view %1 (i0, i1) -> (i1, i0)\n"
            "%3 : float32[2, 3] = pointwise add(load(%0, (i0, i1) -> (i0, i1)), load(%2, (i0, i1) "
            "-> (i0, i1)))\n"
            "%4 : float32[2, 2] = extern mm(%3, %1)\n");
}

}  // namespace
}  // namespace kiln
