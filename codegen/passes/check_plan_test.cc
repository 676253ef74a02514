// CheckPlan: a sound plan passes; each broken invariant is Internal, named.
#include "codegen/passes/check_plan.h"

#include <utility>

#include "codegen/passes/lower.h"
#include "codegen/passes/plan_buffers.h"
#include "codegen/passes/schedule.h"
#include "codegen/pipeline_testing.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// exp(x) read by a sum and a neg: three kernels in one group, exp's value
// in a row buffer.
constexpr char kGraph[] = R"({"name": "plan", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 8}]}}],
    "nodes": [
      {"name": "exp", "op": "aten.exp.default", "inputs": [0], "outputs": [1],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 8}]}]},
      {"name": "sum", "op": "aten.sum.dim_IntList", "inputs": [1], "outputs": [2],
       "args": [{"name": "dim", "intList": {"values": ["1"]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}]}]},
      {"name": "neg", "op": "aten.neg.default", "inputs": [1], "outputs": [3],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 8}]}]}],
    "outputs": [2, 3]})";

class CheckPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    graph_ = Prepare(kGraph);
    absl::StatusOr<ir::LoopProgram> program = Lower(graph_);
    ASSERT_TRUE(program.ok()) << program.status();
    program_ = *std::move(program);
    absl::StatusOr<Schedule> schedule = ScheduleProgram(graph_, program_);
    ASSERT_TRUE(schedule.ok()) << schedule.status();
    schedule_ = *std::move(schedule);
    absl::StatusOr<BufferPlan> plan = PlanBuffers(graph_, program_, schedule_);
    ASSERT_TRUE(plan.ok()) << plan.status();
    plan_ = *std::move(plan);
  }

  ir::Graph graph_;
  ir::LoopProgram program_;
  Schedule schedule_;
  BufferPlan plan_;
};

TEST_F(CheckPlanTest, ASoundPlanPasses) {
  EXPECT_EQ(ToString(schedule_, graph_, program_) + ToString(plan_),
            "group of kernels 0-2, row by row over 1 outer dim:\n"
            "kernel 0: pointwise %1 float32[4, 8]\n"
            "    reads %0 at (i0, i1) -> (i0, i1)\n"
            "kernel 1: sum reduction %2 float32[4]\n"
            "    reads %1 at (i0, i1) -> (i0, i1)\n"
            "kernel 2: pointwise %3 float32[4, 8]\n"
            "    reads %1 at (i0, i1) -> (i0, i1)\n"
            "input 0: 128 bytes, holds %0\n"
            "output 0: 16 bytes, holds %2\n"
            "output 1: 128 bytes, holds %3\n"
            "row buffer of group 0: 32 bytes, holds %1\n"
            "scratch arena: 0 bytes\n");
  EXPECT_EQ(CheckPlan(graph_, schedule_, plan_), absl::OkStatus());
}

TEST_F(CheckPlanTest, AKernelReadingAValueNotYetWrittenIsInternal) {
  std::swap(schedule_.kernels.front(), schedule_.kernels.back());
  EXPECT_EQ(CheckPlan(graph_, schedule_, plan_),
            absl::InternalError("kernel 0 reads %1 before any kernel writes it"));
}

TEST_F(CheckPlanTest, ARealizedValueWithoutAStorageIsInternal) {
  plan_.storage_of[1] = -1;
  EXPECT_EQ(CheckPlan(graph_, schedule_, plan_),
            absl::InternalError("kernel 0 writes %1, which has no storage"));
}

TEST_F(CheckPlanTest, AnOutputWrittenInAnotherOutputsStorageIsInternal) {
  plan_.storage_of[3] = plan_.storage_of[2];
  EXPECT_EQ(CheckPlan(graph_, schedule_, plan_),
            absl::InternalError("output 0 ends holding %3, not %2"));
}

}  // namespace
}  // namespace kiln
