// Schedule: a pointwise chain is one kernel; a value read twice is realized.
#include "codegen/passes/schedule.h"

#include "codegen/passes/lower.h"
#include "codegen/pipeline_testing.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

constexpr char kGraph[] = R"({"name": "chain", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 8}]}}],
    "nodes": [
      {"name": "exp", "op": "aten.exp.default", "inputs": [0], "outputs": [1],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 8}]}]},
      {"name": "relu", "op": "aten.relu.default", "inputs": [1], "outputs": [2],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 8}]}]},
      {"name": "neg", "op": "aten.neg.default", "inputs": [2], "outputs": [3],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 8}]}]},
      {"name": "sum", "op": "aten.sum.dim_IntList", "inputs": [2], "outputs": [4],
       "args": [{"name": "dim", "intList": {"values": ["1"]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}]}]}],
    "outputs": [3, 4]})";

TEST(ScheduleTest, AChainFusesAndAValueReadTwiceIsRealized) {
  const ir::Graph graph = Prepare(kGraph);
  absl::StatusOr<ir::LoopProgram> program = Lower(graph);
  ASSERT_TRUE(program.ok()) << program.status();
  absl::StatusOr<Schedule> schedule = ScheduleProgram(graph, *program);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_EQ(ToString(*schedule, graph, *program),
            "group of kernels 0-2, row by row over 1 outer dim:\n"
            "kernel 0: pointwise %2 float32[4, 8], fused with %1\n"
            "    reads %0 at (i0, i1) -> (i0, i1)\n"
            "kernel 1: pointwise %3 float32[4, 8]\n"
            "    reads %2 at (i0, i1) -> (i0, i1)\n"
            "kernel 2: sum reduction %4 float32[4]\n"
            "    reads %2 at (i0, i1) -> (i0, i1)\n");
}

}  // namespace
}  // namespace kiln
