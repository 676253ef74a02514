// SplitComplex: complex values become their real pairs; real graphs pass through.
#include "codegen/passes/split_complex.h"

#include "codegen/pipeline_testing.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

std::string Split(const std::string& dtype) {
  const std::string type =
      R"({"dtype": ")" + dtype + R"(", "sizes": [{"constant": 2}, {"constant": 3}]})";
  const ir::Graph graph =
      Prepare(R"({"name": "mul", "inputs": [{"value": 0, "name": "a", "type": )" + type +
              R"(}, {"value": 1, "name": "b", "type": )" + type +
              R"(}], "nodes": [{"name": "mul", "op": "aten.mul.Tensor",
        "inputs": [0, 1], "outputs": [2], "outputTypes": [)" +
              type + R"(]}], "outputs": [2]})");
  absl::StatusOr<ir::Graph> split = SplitComplex(graph);
  EXPECT_TRUE(split.ok()) << split.status();
  return split.ok() ? ir::ToString(*split) : "";
}

TEST(SplitComplexTest, AComplexProductBecomesRealOpsOverPairs) {
  // (a + bi)(c + di) = (ac - bd) + (ad + bc)i, over the pairs' last dim.
  EXPECT_EQ(
      Split("COMPLEX64"),
      "%0 = input 0 : float32[2, 3, 2]  # a\n"
      "%1 = input 1 : float32[2, 3, 2]  # b\n"
      "%2 : float32[2, 3]{strides 6, 2} = aten.select.int(%0, dim=-1, index=0)  # mul/select\n"
      "%3 : float32[2, 3]{strides 6, 2} = aten.select.int(%0, dim=-1, index=1)  # mul/select\n"
      "%4 : float32[2, 3]{strides 6, 2} = aten.select.int(%1, dim=-1, index=0)  # mul/select\n"
      "%5 : float32[2, 3]{strides 6, 2} = aten.select.int(%1, dim=-1, index=1)  # mul/select\n"
      "%6 : float32[2, 3] = aten.mul.Tensor(%2, %4, other=None)  # mul/mul\n"
      "%7 : float32[2, 3] = aten.mul.Tensor(%3, %5, other=None)  # mul/mul\n"
      "%8 : float32[2, 3] = aten.sub.Tensor(%6, %7, alpha=1, other=None)  # mul/sub\n"
      "%9 : float32[2, 3] = aten.mul.Tensor(%2, %5, other=None)  # mul/mul\n"
      "%10 : float32[2, 3] = aten.mul.Tensor(%3, %4, other=None)  # mul/mul\n"
      "%11 : float32[2, 3] = aten.add.Tensor(%9, %10, alpha=1, other=None)  # mul/add\n"
      "%12 : float32[2, 3, 2] = aten.stack.default(%8, %11, dim=-1)  # mul/stack\n"
      "return (%12)\n");
}

TEST(SplitComplexTest, ARealGraphComesBackUnchanged) {
  EXPECT_EQ(Split("FLOAT32"),
            "%0 = input 0 : float32[2, 3]  # a\n"
            "%1 = input 1 : float32[2, 3]  # b\n"
            "%2 : float32[2, 3] = aten.mul.Tensor(%0, %1, other=None)  # mul\n"
            "return (%2)\n");
}

}  // namespace
}  // namespace kiln
