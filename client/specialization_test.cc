// The respecialization policy on graph protos: which dims turn symbolic,
// the one-at-a-time fallback, size-1 specializations, the specialization limit.
#include "client/specialization.h"

#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "proto/graph_file.h"

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
      : Inputs(std::move(sizes), {}, dtype) {}
  // With strides: an empty list (or none) for a contiguous input.
  Inputs(std::vector<std::vector<int64_t>> sizes, std::vector<std::vector<int64_t>> strides,
         DType dtype = kiln::v1::FLOAT32)
      : sizes_(std::move(sizes)), strides_(std::move(strides)) {
    strides_.resize(sizes_.size());
    for (size_t i = 0; i < sizes_.size(); ++i) {
      if (strides_[i].empty()) strides_[i] = ContiguousStrides(sizes_[i]);
    }
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
  if (!dim.has_symbol()) return absl::StrCat(dim.constant());
  std::vector<std::string> factors;
  if (dim.multiplier() > 1) factors.push_back(absl::StrCat(dim.multiplier()));
  factors.push_back(dim.symbol());
  factors.insert(factors.end(), dim.times().begin(), dim.times().end());
  return absl::StrJoin(factors, "*");
}

std::string DimsString(const google::protobuf::RepeatedPtrField<kiln::v1::Dim>& dims) {
  std::vector<std::string> parts;
  for (const kiln::v1::Dim& dim : dims) parts.push_back(DimString(dim));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

// "[a, 4] [a]" per candidate (an input with strides: "[4, a]@[1, 4]"),
// candidates separated by " | ".
std::string CandidatesString(const Respecialization& plan) {
  std::vector<std::string> candidates;
  for (const InputLayouts& candidate : plan.candidates) {
    std::vector<std::string> inputs;
    for (const kiln::v1::InputLayout& layout : candidate) {
      inputs.push_back(DimsString(layout.sizes()));
      if (!layout.strides().empty()) {
        absl::StrAppend(&inputs.back(), "@", DimsString(layout.strides()));
      }
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

// The candidates for a real graph, f (x @ x.T, add, relu): the first
// symbolic. kilnd re-types each (tests/key_agreement_test).
TEST(PlanRespecializationTest, CandidatesForARealGraph) {
  auto graph = ReadGraphFile("examples/f.json");
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto plan = PlanRespecialization(*graph, Inputs({{96, 64}}).views());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(CandidatesString(*plan), "[d64_96, 64] | [96, 64]");
}

kiln::v1::Dim Constant(int64_t value) {
  kiln::v1::Dim dim;
  dim.set_constant(value);
  return dim;
}

kiln::v1::Dim Symbol(const std::string& name) {
  kiln::v1::Dim dim;
  dim.set_symbol(name);
  return dim;
}

// The strides a call's layout declares, over constant or symbolic sizes.
std::string Seen(const std::vector<kiln::v1::Dim>& sizes, const std::vector<int64_t>& view_sizes,
                 const std::vector<int64_t>& view_strides) {
  const TensorView view{nullptr, kiln::v1::FLOAT64, view_sizes, view_strides};
  const std::vector<kiln::v1::Dim> strides = StridesAsSeen(sizes, view);
  return DimsString({strides.begin(), strides.end()});
}

TEST(StridesAsSeenTest, DenseStridesAreProductsOfTheSizesInsideOthersConstants) {
  const kiln::v1::Dim a = Symbol("a"), b = Symbol("b");
  // Contiguous: no strides (also when a size-1 dim's stride is odd).
  EXPECT_EQ(Seen({Constant(3), Constant(5)}, {3, 5}, {5, 1}), "[]");
  EXPECT_EQ(Seen({Constant(3), Constant(1)}, {3, 1}, {1, 7}), "[]");
  // x.t() of a [5, 3] tensor: its column stride is its row count.
  EXPECT_EQ(Seen({Constant(3), Constant(5)}, {3, 5}, {1, 3}), "[1, 3]");
  EXPECT_EQ(Seen({a, Constant(5)}, {3, 5}, {1, 3}), "[1, a]");
  EXPECT_EQ(Seen({Constant(3), b}, {3, 5}, {1, 3}), "[1, 3]");
  // A slice of rows 10 wide keeps that step, whatever the sizes.
  EXPECT_EQ(Seen({a, Constant(5)}, {4, 5}, {10, 1}), "[10, 1]");
  EXPECT_EQ(Seen({Constant(4), Constant(5)}, {4, 5}, {1, 8}), "[1, 8]");
  // An expanded dim reads one element again and again.
  EXPECT_EQ(Seen({Constant(3), Constant(5)}, {3, 5}, {0, 1}), "[0, 1]");
  EXPECT_EQ(Seen({Constant(3), Constant(4), Constant(5)}, {3, 4, 5}, {0, 0, 1}), "[0, 0, 1]");
  // A permutation of a [3, 4, 2] tensor, and the same over symbols.
  EXPECT_EQ(Seen({Constant(2), Constant(3), Constant(4)}, {2, 3, 4}, {1, 8, 2}), "[1, 8, 2]");
  EXPECT_EQ(Seen({a, Constant(3), b}, {2, 3, 4}, {1, 8, 2}), "[1, a*b, a]");
  // A size-1 dim takes the stride a contiguous layout gives it next to the
  // dim inside.
  EXPECT_EQ(Seen({Constant(3), Constant(1), Constant(5)}, {3, 1, 5}, {1, 99, 3}), "[1, 15, 3]");
}

// Other strides at the sizes a graph takes: the graph laid out as the call
// is. The exact candidate declares the strides seen; a symbolic graph also
// gets its symbolic form laid out so, which serves that layout at any size.
TEST(PlanRespecializationTest, OtherStridesAreLaidOutAsSeen) {
  const kiln::v1::Graph graph = Parse(kGraph);
  EXPECT_EQ(Plan(graph, Inputs({{4, 4}, {4}, {3, 8}}, {{1, 4}, {}, {}})),
            "[4, 4]@[1, 4] [4] [s, 8] | [4, 4]@[1, 4] [4] [3, 8]");
  EXPECT_EQ(Plan(graph, Inputs({{4, 4}, {4}, {3, 8}}, {{}, {}, {1, 3}})),
            "[4, 4] [4] [s, 8]@[1, s] | [4, 4] [4] [3, 8]@[1, 3]");
  // New sizes too: the new symbol is in the strides.
  EXPECT_EQ(Plan(graph, Inputs({{6, 4}, {4}, {3, 8}}, {{1, 6}, {}, {}})),
            "[d4_6, 4]@[1, d4_6] [4] [s, 8] | [6, 4]@[1, 6] [4] [3, 8]");
  auto plan = PlanRespecialization(graph, Inputs({{4, 4}, {4}, {3, 8}}, {{1, 4}, {}, {}}).views());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->sizes_key, "4,4,@1,4,;4,;3,8,;");
  // A graph traced with a transposed input, called with a contiguous one:
  // the exact candidate is contiguous (not the traced layout again).
  const kiln::v1::Graph transposed = Parse(R"pb(
    inputs {
      value: 0
      type {
        dtype: FLOAT32
        sizes { constant: 3 }
        sizes { constant: 5 }
        strides { constant: 1 }
        strides { constant: 3 }
      }
    }
  )pb");
  EXPECT_EQ(Plan(transposed, Inputs({{3, 5}})), "[3, 5]");
  EXPECT_EQ(Plan(transposed, Inputs({{3, 5}}, {{10, 1}})), "[3, 5]@[10, 1]");
  // Its own layout keeps the declared strides, as written.
  EXPECT_EQ(Plan(transposed, Inputs({{3, 5}}, {{1, 3}})), "[3, 5]@[1, 3]");
}

// A candidate's input types must take the call: else its artifact could
// not run it, and compiling it would be wasted.
TEST(InputTypesTakeTest, ChecksTheCandidatesInputTypes) {
  const kiln::v1::Graph graph = Parse(kGraph);
  const Inputs contiguous({{4, 4}, {4}, {3, 8}});
  const Inputs transposed({{4, 4}, {4}, {3, 8}}, {{1, 4}, {}, {}});
  EXPECT_TRUE(InputTypesTake(graph, {}, contiguous.views()));
  EXPECT_FALSE(InputTypesTake(graph, {}, transposed.views()));
  EXPECT_TRUE(InputTypesTake(graph, {}, transposed.views(), /*copyable=*/true));
  EXPECT_FALSE(InputTypesTake(graph, {}, Inputs({{4, 4}, {4}, {1, 8}}).views())) << "s >= 2";
  auto plan = PlanRespecialization(graph, transposed.views());
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const InputLayouts& layouts : plan->candidates) {
    EXPECT_TRUE(InputTypesTake(graph, layouts, transposed.views()));
    EXPECT_FALSE(InputTypesTake(graph, layouts, contiguous.views()));
  }
}

// relu(x) and relu(z), x: [4, 4], z: [s, 8].
constexpr char kTwoReluGraph[] = R"pb(
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
      sizes { symbol: "s" }
      sizes { constant: 8 }
    }
  }
  nodes {
    op: "aten.relu.default"
    inputs: 0
    outputs: 2
    output_types {
      dtype: FLOAT32
      sizes { constant: 4 }
      sizes { constant: 4 }
    }
  }
  nodes {
    op: "aten.relu.default"
    inputs: 1
    outputs: 3
    output_types {
      dtype: FLOAT32
      sizes { symbol: "s" }
      sizes { constant: 8 }
    }
  }
  outputs: 2
  outputs: 3
)pb";

TEST(SmallSizeSpecializationTest, StridedInputsKeepTheirLayout) {
  const kiln::v1::Graph graph = Parse(kTwoReluGraph);
  const Inputs inputs({{4, 4}, {1, 8}}, {{1, 4}, {}});
  const std::optional<SpecializedGraph> specialized =
      SmallSizeSpecialization(graph, inputs.views());
  ASSERT_TRUE(specialized.has_value());
  // The static graph, and the layouts kilnd re-types it for.
  EXPECT_EQ(DimString(specialized->graph.inputs(1).type().sizes(0)), "1");
  ASSERT_EQ(specialized->layouts.size(), 2u);
  EXPECT_EQ(specialized->layouts[0].ShortDebugString(),
            "sizes { constant: 4 } sizes { constant: 4 } strides { constant: 1 } "
            "strides { constant: 4 }");
  EXPECT_EQ(specialized->layouts[1].ShortDebugString(),
            "sizes { constant: 1 } sizes { constant: 8 }");
  EXPECT_TRUE(InputTypesTake(specialized->graph, specialized->layouts, inputs.views()));
  EXPECT_FALSE(InputTypesTake(specialized->graph, {}, inputs.views()));
}

TEST(SmallSizeSpecializationTest, SymbolsBelowTwoBecomeConstant) {
  const kiln::v1::Graph graph = Parse(kGraph);
  EXPECT_FALSE(SmallSizeSpecialization(graph, Inputs({{4, 4}, {4}, {2, 8}}).views()).has_value());
  for (int64_t size : {0, 1}) {
    const std::optional<SpecializedGraph> specialized =
        SmallSizeSpecialization(graph, Inputs({{4, 4}, {4}, {size, 8}}).views());
    ASSERT_TRUE(specialized.has_value()) << size;
    EXPECT_EQ(DimString(specialized->graph.inputs(2).type().sizes(0)), absl::StrCat(size));
    EXPECT_EQ(DimString(specialized->graph.inputs(2).type().sizes(1)), "8");
    EXPECT_TRUE(specialized->layouts.empty()) << "contiguous inputs need no re-typing";
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

// A symbolic graph with relations: q: [S, 64], k: [2*T, 64], S == T, S in
// [2, 512], S % 4 == 0.
constexpr char kRelatedGraph[] = R"pb(
  inputs {
    value: 0
    name: "q"
    type {
      dtype: FLOAT32
      sizes { symbol: "S" }
      sizes { constant: 64 }
    }
  }
  inputs {
    value: 1
    name: "k"
    type {
      dtype: FLOAT32
      sizes { symbol: "T" multiplier: 2 }
      sizes { constant: 64 }
    }
  }
  relations { equal { lhs: "S" rhs: "T" } }
  relations { range { symbol: "S" min: 2 max: 512 } }
  relations { divisible { symbol: "S" divisor: 4 } }
)pb";

TEST(CheckGraphTakesSizesTest, NamesTheDimOrRelationThatRefuses) {
  const kiln::v1::Graph graph = Parse(kRelatedGraph);
  EXPECT_TRUE(CheckGraphTakesSizes(graph, {{8, 64}, {16, 64}}).ok());
  EXPECT_EQ(CheckGraphTakesSizes(graph, {{8, 32}, {16, 64}}),
            absl::FailedPreconditionError("input 0 'q' dim 1 is 32; the graph has 64"));
  EXPECT_EQ(CheckGraphTakesSizes(graph, {{8, 64}, {15, 64}}),
            absl::FailedPreconditionError("input 1 'k' dim 0 is 15; the graph has 2*T"));
  EXPECT_EQ(CheckGraphTakesSizes(graph, {{8, 64}, {24, 64}}),
            absl::FailedPreconditionError("S = 8 and T = 12; the graph states them equal"));
  EXPECT_EQ(CheckGraphTakesSizes(graph, {{1, 64}, {2, 64}}),
            absl::FailedPreconditionError(
                "input 0 'q' dim 0 makes S = 1; symbolic sizes are at least 2"));
  // Sizes 0 and 1 too: then the relations decide.
  EXPECT_EQ(CheckGraphTakesSizes(graph, {{1, 64}, {2, 64}}, /*smallest_symbol=*/0),
            absl::FailedPreconditionError(
                "input 0 'q' dim 0 makes S = 1; the graph states 2 <= S <= 512"));
  EXPECT_EQ(CheckGraphTakesSizes(graph, {{1024, 64}, {2048, 64}}),
            absl::FailedPreconditionError(
                "input 0 'q' dim 0 makes S = 1024; the graph states 2 <= S <= 512"));
  EXPECT_EQ(
      CheckGraphTakesSizes(graph, {{6, 64}, {12, 64}}),
      absl::FailedPreconditionError("input 0 'q' dim 0 makes S = 6; the graph states S % 4 == 0"));
  EXPECT_EQ(CheckGraphTakesSizes(graph, {{8, 64}}),
            absl::InvalidArgumentError("the graph has 2 inputs; the sizes give 1"));
  EXPECT_EQ(CheckGraphTakesSizes(graph, {{8, 64, 1}, {16, 64}}),
            absl::InvalidArgumentError("input 0 'q' has 2 dims; the sizes give 3 (8x64x1)"));
  // A symbol shared by two dims binds once.
  const kiln::v1::Graph shared = Parse(R"pb(
    inputs {
      value: 0
      name: "x"
      type {
        dtype: FLOAT32
        sizes { symbol: "n" }
        sizes { symbol: "n" }
      }
    }
  )pb");
  EXPECT_EQ(
      CheckGraphTakesSizes(shared, {{3, 4}}),
      absl::FailedPreconditionError("input 0 'x' dim 1 makes n = 4; input 0 'x' dim 0 made it 3"));
}

// The requests for sizes, as CompiledGraph makes them: the graph itself
// when it takes them, else the specialization policy's graphs in order.
TEST(RequestsForSizesTest, FollowTheSpecializationPolicy) {
  auto graph = ReadGraphFile("examples/f.json");
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto same = RequestsForSizes(*graph, {{64, 64}});
  ASSERT_TRUE(same.ok()) << same.status();
  ASSERT_EQ(same->size(), 1u);
  EXPECT_EQ((*same)[0].description, "the graph as given");
  EXPECT_EQ((*same)[0].request.graph.SerializeAsString(), graph->SerializeAsString());
  EXPECT_TRUE((*same)[0].request.layouts.empty());

  auto other = RequestsForSizes(*graph, {{96, 64}});
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_EQ(other->size(), 2u);
  EXPECT_EQ((*other)[0].description, "re-typed, changed dims symbolic (d64_96)");
  EXPECT_EQ(DimString((*other)[0].request.layouts[0].sizes(0)), "d64_96");
  EXPECT_EQ((*other)[1].description, "re-typed for the exact sizes");
  EXPECT_EQ(DimString((*other)[1].request.layouts[0].sizes(0)), "96");
  // The same requests CompiledGraph would make, in its order: the graph as
  // given, with the candidates' layouts.
  const Inputs inputs({{96, 64}});
  const Specializations planned = PlanSpecializations(*graph, inputs.views());
  ASSERT_FALSE(planned.small_size.has_value());
  ASSERT_TRUE(planned.respecialization.ok());
  const std::vector<InputLayouts>& candidates = planned.respecialization->candidates;
  ASSERT_EQ(candidates.size(), 2u);
  for (size_t c = 0; c < candidates.size(); ++c) {
    EXPECT_EQ((*other)[c].request.graph.SerializeAsString(), graph->SerializeAsString());
    ASSERT_EQ((*other)[c].request.layouts.size(), 1u);
    EXPECT_EQ((*other)[c].request.layouts[0].SerializeAsString(),
              candidates[c][0].SerializeAsString());
  }

  EXPECT_EQ(RequestsForSizes(*graph, {{96}}).status(),
            absl::InvalidArgumentError("input 0 'x' has 2 dims; the sizes give 1 (96)"));
}

TEST(RequestsForSizesTest, ASymbolAtOneGetsTheStaticSpecialization) {
  const kiln::v1::Graph graph = Parse(kGraph);
  auto requests = RequestsForSizes(graph, {{4, 4}, {4}, {1, 8}});
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_EQ(requests->size(), 1u);
  EXPECT_EQ((*requests)[0].description, "the static specialization for symbols at 0 or 1");
  EXPECT_EQ(DimString((*requests)[0].request.graph.inputs(2).type().sizes(0)), "1");
}

TEST(ParseInputSizesTest, DimsPerInputOrSymbolSizes) {
  const kiln::v1::Graph graph = Parse(kGraph);
  using Sizes = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(*ParseInputSizes(graph, "4x4,4,7x8"), (Sizes{{4, 4}, {4}, {7, 8}}));
  EXPECT_EQ(*ParseInputSizes(graph, "s=7"), (Sizes{{4, 4}, {4}, {7, 8}}));
  const kiln::v1::Graph related = Parse(kRelatedGraph);
  // T is stated equal to S: giving either gives both.
  EXPECT_EQ(*ParseInputSizes(related, "S=8"), (Sizes{{8, 64}, {16, 64}}));
  EXPECT_EQ(*ParseInputSizes(related, "T=8"), (Sizes{{8, 64}, {16, 64}}));
  const kiln::v1::Graph scalar = Parse(R"pb(
    inputs {
      value: 0
      type {
        dtype: FLOAT32
        sizes { constant: 3 }
      }
    }
    inputs {
      value: 1
      type { dtype: FLOAT32 }
    }
  )pb");
  EXPECT_EQ(*ParseInputSizes(scalar, "3,"), (Sizes{{3}, {}}));
  EXPECT_EQ(InputSizesString({{3}, {}}), "3,");
  EXPECT_EQ(InputSizesString({{4, 4}, {4}, {7, 8}}), "4x4,4,7x8");

  EXPECT_EQ(ParseInputSizes(graph, "4x4,4").status(),
            absl::InvalidArgumentError("the graph has 3 inputs; '4x4,4' gives 2"));
  EXPECT_EQ(ParseInputSizes(graph, "4x4,4,7*8").status(),
            absl::InvalidArgumentError("'7*8' is not an input's dims (write them as 8x64; inputs "
                                       "separated by commas, or symbol sizes as B=8,S=16)"));
  EXPECT_EQ(ParseInputSizes(graph, "s=7,4x4").status(),
            absl::InvalidArgumentError("'4x4' is not NAME=SIZE (give symbol sizes as B=8,S=16, "
                                       "or every input's dims as 8x64,64x32)"));
  EXPECT_EQ(ParseInputSizes(graph, "B=7").status(),
            absl::InvalidArgumentError("the graph's inputs have no symbol B (they have s)"));
}

}  // namespace
}  // namespace kiln
