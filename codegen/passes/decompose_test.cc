// Decompose: composites become the core ops the op table lowers.
#include "codegen/passes/decompose.h"

#include "codegen/pipeline_testing.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(DecomposeTest, AddmmBecomesAProductAndABroadcastAdd) {
  const ir::Graph graph = Prepare(R"({"name": "addmm", "inputs": [
      {"value": 0, "name": "b", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 3}]}},
      {"value": 1, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 2}, {"constant": 4}]}},
      {"value": 2, "name": "w", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 3}]}}],
    "nodes": [{"name": "addmm", "op": "aten.addmm.default", "inputs": [0, 1, 2], "outputs": [3],
               "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 2}, {"constant": 3}]}]}],
    "outputs": [3]})");
  absl::StatusOr<ir::Graph> decomposed = Decompose(graph);
  ASSERT_TRUE(decomposed.ok()) << decomposed.status();
  EXPECT_EQ(ir::ToString(*decomposed),
            "%0 = input 0 : float32[3]  # b\n"
            "%1 = input 1 : float32[2, 4]  # x\n"
            "%2 = input 2 : float32[4, 3]  # w\n"
            "%3 : float32[2, 3] = kiln.mm.default(%1, %2)  # addmm/mm/mm\n"
            "%4 : float32[2, 3] = aten.add.Tensor(%0, %3, alpha=1, other=None)  # addmm/add\n"
            "return (%4)\n");
}

}  // namespace
}  // namespace kiln
