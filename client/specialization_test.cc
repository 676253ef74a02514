// The respecialization policy on graph protos: which dims turn symbolic,
// the one-at-a-time fallback, size-1 specializations, the specialization limit.
#include "client/specialization.h"

#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/retype.h"
#include "common/graph_file.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

kiln::v1::Graph Parse(const std::string& text) {
  kiln::v1::Graph graph;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &graph)) << text;
  return graph;
}

// Inputs of these sizes (contiguous, float32), as views.
class Inputs {
 public:
  Inputs(std::vector<std::vector<int64_t>> sizes, DType dtype = kiln::v1::FLOAT32)
      : sizes_(std::move(sizes)) {
    for (const auto& size : sizes_) strides_.push_back(ContiguousStrides(size));
    for (size_t i = 0; i < sizes_.size(); ++i) {
      views_.push_back(TensorView{nullptr, dtype, sizes_[i], strides_[i]});
    }
  }
  Inputs(const Inputs&) = delete;  // the views point into this object
  absl::Span<const TensorView> views() const { return views_; }

 private:
  std::vector<std::vector<int64_t>> sizes_, strides_;
  std::vector<TensorView> views_;
};

std::string DimString(const kiln::v1::Dim& dim) {
  return dim.has_symbol() ? dim.symbol() : absl::StrCat(dim.constant());
}

// "[a, 4] [a]" per candidate, candidates separated by " | ".
std::string CandidatesString(const Respecialization& plan) {
  std::vector<std::string> candidates;
  for (const InputDims& candidate : plan.candidates) {
    std::vector<std::string> inputs;
    for (const auto& dims : candidate) {
      std::vector<std::string> sizes;
      for (const kiln::v1::Dim& dim : dims) sizes.push_back(DimString(dim));
      inputs.push_back(absl::StrCat("[", absl::StrJoin(sizes, ", "), "]"));
    }
    candidates.push_back(absl::StrJoin(inputs, " "));
  }
  return absl::StrJoin(candidates, " | ");
}

std::string Plan(const kiln::v1::Graph& graph, const Inputs& inputs) {
  absl::StatusOr<Respecialization> plan = PlanRespecialization(graph, inputs.views());
  if (!plan.ok()) return plan.status().ToString();
  return CandidatesString(*plan);
}

// Two static inputs, x: [4, 4] and y: [4], one symbolic: z: [s, 8].
constexpr char kGraph[] = R"pb(
  inputs {
    value: 0
    type {
      dtype: FLOAT32
      sizes { constant: 4 }
      sizes { constant: 4 }
    }
  }
  inputs {
    value: 1
    type {
      dtype: FLOAT32
      sizes { constant: 4 }
    }
  }
  inputs {
    value: 2
    type {
      dtype: FLOAT32
      sizes { symbol: "s" }
      sizes { constant: 8 }
    }
  }
)pb";

TEST(PlanRespecializationTest, ChangedDimsTurnSymbolicOnePerSizePair) {
  const kiln::v1::Graph graph = Parse(kGraph);
  // Every 4 that became 6 is one symbol: x stays square, y stays x's width.
  EXPECT_EQ(Plan(graph, Inputs({{6, 6}, {6}, {3, 8}})),
            "[d4_6, d4_6] [d4_6] [s, 8] | [6, 6] [6] [3, 8]");
  // A square input grown in one dim keeps its dims apart.
  EXPECT_EQ(Plan(graph, Inputs({{4, 6}, {4}, {3, 8}})), "[4, d4_6] [4] [s, 8] | [4, 6] [4] [3, 8]");
}

TEST(PlanRespecializationTest, TwoNewSymbolsFallBackOneAtATime) {
  const kiln::v1::Graph graph = Parse(kGraph);
  EXPECT_EQ(Plan(graph, Inputs({{6, 5}, {4}, {3, 8}})),
            "[d4_6, d4_5] [4] [s, 8] | [d4_6, 5] [4] [s, 8] | [6, d4_5] [4] [s, 8] | "
            "[6, 5] [4] [3, 8]");
}

TEST(PlanRespecializationTest, SizesBelowTwoStayExact) {
  const kiln::v1::Graph graph = Parse(kGraph);
  EXPECT_EQ(Plan(graph, Inputs({{1, 4}, {0}, {3, 8}})), "[1, 4] [0] [3, 8]");
  // An old size of 1 is no size to grow from either.
  const kiln::v1::Graph one = Parse(R"pb(
    inputs {
      value: 0
      type {
        dtype: FLOAT32
        sizes { constant: 1 }
      }
    }
  )pb");
  EXPECT_EQ(Plan(one, Inputs(std::vector<std::vector<int64_t>>{{5}})), "[5]");
}

TEST(PlanRespecializationTest, RemembersSizesByTheirExactValues) {
  auto plan = PlanRespecialization(Parse(kGraph), Inputs({{6, 5}, {4}, {3, 8}}).views());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->sizes_key, "6,5,;4,;3,8,;");
}

TEST(PlanRespecializationTest, RankDtypeOrCountThatDiffersIsRefused) {
  const kiln::v1::Graph graph = Parse(kGraph);
  EXPECT_EQ(Plan(graph, Inputs({{6, 6}, {6}})), "INVALID_ARGUMENT: input count differs");
  EXPECT_EQ(Plan(graph, Inputs({{6, 6, 1}, {6}, {3, 8}})),
            "FAILED_PRECONDITION: rank or dtype differs: no specialization helps");
  EXPECT_EQ(Plan(graph, Inputs({{6, 6}, {6}, {3, 8}}, kiln::v1::FLOAT64)),
            "FAILED_PRECONDITION: rank or dtype differs: no specialization helps");
}

// The candidates are sizes Retype takes: for f (x @ x.T, add, relu) every
// candidate lowers, the first one symbolic.
TEST(PlanRespecializationTest, CandidatesRetypeARealGraph) {
  auto graph = ReadGraphFile("examples/f.json");
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto plan = PlanRespecialization(*graph, Inputs({{96, 64}}).views());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(CandidatesString(*plan), "[d64_96, 64] | [96, 64]");
  for (const InputDims& candidate : plan->candidates) {
    auto retyped = Retype(*graph, candidate);
    ASSERT_TRUE(retyped.ok()) << retyped.status();
    EXPECT_EQ(DimString(retyped->inputs(0).type().sizes(0)), DimString(candidate[0][0]));
  }
}

TEST(SmallSizeSpecializationTest, SymbolsBelowTwoBecomeConstant) {
  const kiln::v1::Graph graph = Parse(kGraph);
  EXPECT_FALSE(SmallSizeSpecialization(graph, Inputs({{4, 4}, {4}, {2, 8}}).views()).has_value());
  for (int64_t size : {0, 1}) {
    const std::optional<kiln::v1::Graph> specialized =
        SmallSizeSpecialization(graph, Inputs({{4, 4}, {4}, {size, 8}}).views());
    ASSERT_TRUE(specialized.has_value()) << size;
    EXPECT_EQ(DimString(specialized->inputs(2).type().sizes(0)), absl::StrCat(size));
    EXPECT_EQ(DimString(specialized->inputs(2).type().sizes(1)), "8");
  }
}

TEST(CheckSpecializationLimitTest, RefusesPastTheLimitWithTheMissAndWhatToDo) {
  const absl::Status miss =
      absl::FailedPreconditionError("input 0 'x': dim 0 has size 5; the graph was compiled for 4");
  EXPECT_TRUE(CheckSpecializationLimit(7, 8, miss).ok());
  EXPECT_TRUE(CheckSpecializationLimit(2, 3, miss).ok());
  EXPECT_EQ(CheckSpecializationLimit(3, 3, miss),
            absl::FailedPreconditionError(
                "input 0 'x': dim 0 has size 5; the graph was compiled for 4; and the "
                "specialization limit (3) is reached: add these sizes as a bucket of a warmup "
                "plan (docs/WARMUP.md) or raise the limit "
                "(CompiledGraph::set_specialization_limit)"));
}

}  // namespace
}  // namespace kiln
