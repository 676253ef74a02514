#include "client/warmup_suggest.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/warmup_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

kiln::v1::Dim Constant(int64_t size) {
  kiln::v1::Dim dim;
  dim.set_constant(size);
  return dim;
}

kiln::v1::Dim Symbol(const std::string& name, int64_t multiplier = 0) {
  kiln::v1::Dim dim;
  dim.set_symbol(name);
  dim.set_multiplier(multiplier);
  return dim;
}

// A graph of float inputs with these sizes that returns them.
kiln::v1::Graph GraphOf(const std::vector<std::vector<kiln::v1::Dim>>& inputs) {
  kiln::v1::Graph graph;
  for (size_t i = 0; i < inputs.size(); ++i) {
    kiln::v1::Input* input = graph.add_inputs();
    input->set_value(i);
    input->mutable_type()->set_dtype(kiln::v1::FLOAT32);
    for (const kiln::v1::Dim& dim : inputs[i]) *input->mutable_type()->add_sizes() = dim;
    graph.add_outputs(i);
  }
  return graph;
}

kiln::v1::TrafficHistogram Traffic(
    const std::vector<std::pair<std::vector<int64_t>, int64_t>>& rows, int64_t other_calls = 0) {
  kiln::v1::TrafficHistogram traffic;
  for (const auto& [sizes, calls] : rows) {
    kiln::v1::TrafficHistogram::Row* row = traffic.add_rows();
    for (int64_t size : sizes) row->add_sizes(size);
    row->set_calls(calls);
  }
  traffic.set_other_calls(other_calls);
  return traffic;
}

// "B=1,8 S=128,512 | 95/100 calls, 4 buckets, 0 unmatched"
std::string Text(const absl::StatusOr<WarmupSuggestion>& suggestion) {
  if (!suggestion.ok()) return suggestion.status().ToString();
  std::vector<std::string> symbols;
  for (const kiln::v1::SymbolSizes& symbol : suggestion->entry.symbols()) {
    symbols.push_back(absl::StrCat(symbol.symbol(), "=", absl::StrJoin(symbol.sizes(), ",")));
  }
  return absl::StrCat(absl::StrJoin(symbols, " "), " | ", suggestion->covered_calls, "/",
                      suggestion->total_calls, " calls, ", suggestion->buckets, " buckets, ",
                      suggestion->unmatched_calls, " unmatched");
}

// x: [s0, 64], calls mostly at small s0.
class OneSymbolTest : public ::testing::Test {
 protected:
  const kiln::v1::Graph graph_ = GraphOf({{Symbol("s0"), Constant(64)}});
  const kiln::v1::TrafficHistogram traffic_ =
      Traffic({{{32, 64}, 15}, {{8, 64}, 50}, {{128, 64}, 1}, {{16, 64}, 30}, {{64, 64}, 4}});
};

TEST_F(OneSymbolTest, TheMostFrequentSizesUntilTheShareIsReached) {
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic_, 0.9, 10)),
            "s0=8,16,32 | 95/100 calls, 3 buckets, 0 unmatched");
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic_, 0.99, 10)),
            "s0=8,16,32,64 | 99/100 calls, 4 buckets, 0 unmatched");
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic_, 0.8, 10)),
            "s0=8,16 | 80/100 calls, 2 buckets, 0 unmatched")
      << "exactly the share is enough";
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic_, 1, 10)),
            "s0=8,16,32,64,128 | 100/100 calls, 5 buckets, 0 unmatched");
  EXPECT_EQ(SuggestWarmupPlan(graph_, traffic_, 0.9, 10)->entry.serve(),
            kiln::v1::WarmupGraph::SERVE_STATIC);
}

TEST_F(OneSymbolTest, TiesGoToTheSmallerSize) {
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, Traffic({{{4, 64}, 10}, {{2, 64}, 10}}), 0.5, 10)),
            "s0=2 | 10/20 calls, 1 buckets, 0 unmatched");
}

TEST_F(OneSymbolTest, AShareOutOfReachGetsTheBestWithMaxBuckets) {
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic_, 0.99, 2)),
            "s0=8,16 | 80/100 calls, 2 buckets, 0 unmatched");
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic_, 0.99, 1)),
            "s0=8 | 50/100 calls, 1 buckets, 0 unmatched");
}

// x: [B, S], mask: [S]: a row is B, S, S.
class TwoSymbolsTest : public ::testing::Test {
 protected:
  const kiln::v1::Graph graph_ = GraphOf({{Symbol("B"), Symbol("S")}, {Symbol("S")}});
  const kiln::v1::TrafficHistogram traffic_ = Traffic({{{1, 128, 128}, 40},
                                                       {{8, 512, 512}, 40},
                                                       {{1, 512, 512}, 10},
                                                       {{8, 128, 128}, 5},
                                                       {{4, 256, 256}, 5}});
};

TEST_F(TwoSymbolsTest, TrafficOnAFewPairsGetsTheSmallestCrossProductHoldingThem) {
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic_, 0.95, 16)),
            "B=1,8 S=128,512 | 95/100 calls, 4 buckets, 0 unmatched");
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic_, 0.8, 16)),
            "B=1,8 S=128,512 | 95/100 calls, 4 buckets, 0 unmatched")
      << "the second pair brings the rest with it";
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic_, 0.4, 16)),
            "B=1 S=128 | 40/100 calls, 1 buckets, 0 unmatched");
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic_, 1, 16)),
            "B=1,4,8 S=128,256,512 | 100/100 calls, 9 buckets, 0 unmatched");
}

TEST_F(TwoSymbolsTest, AShareOutOfReachGetsTheBestWithMaxBuckets) {
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic_, 0.99, 2)),
            "B=1 S=128,512 | 50/100 calls, 2 buckets, 0 unmatched");
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic_, 1, 8)),
            "B=1,8 S=128,512 | 95/100 calls, 4 buckets, 0 unmatched")
      << "the last pair would take 9 buckets";
}

TEST_F(TwoSymbolsTest, RowsThatDoNotFitTheGraphAreUnmatched) {
  const kiln::v1::TrafficHistogram traffic = Traffic({{{1, 128, 128}, 10},
                                                      {{1, 128, 256}, 3},   // S is 128 and 256
                                                      {{1, 128}, 2},        // rank
                                                      {{0, 128, 128}, 1}},  // below 1
                                                     /*other_calls=*/4);
  EXPECT_EQ(Text(SuggestWarmupPlan(graph_, traffic, 0.99, 16)),
            "B=1 S=128 | 10/20 calls, 1 buckets, 6 unmatched");

  const kiln::v1::Graph heads = GraphOf({{Symbol("s0", /*multiplier=*/4), Constant(64)}});
  EXPECT_EQ(Text(SuggestWarmupPlan(heads, Traffic({{{32, 64}, 7}, {{30, 64}, 2}, {{32, 16}, 1}}),
                                   0.99, 16)),
            "s0=8 | 7/10 calls, 1 buckets, 3 unmatched")
      << "30 is not 4 * s0; the constant dim is 64";
}

TEST(WarmupSuggestTest, SymbolsStatedEqualAreListedOnce) {
  kiln::v1::Graph graph = GraphOf({{Symbol("B"), Constant(8)}, {Symbol("A")}});
  auto* equal = graph.add_relations()->mutable_equal();
  equal->set_lhs("B");
  equal->set_rhs("A");
  auto suggestion =
      SuggestWarmupPlan(graph, Traffic({{{2, 8, 2}, 5}, {{4, 8, 4}, 5}, {{2, 8, 4}, 1}}), 1, 16);
  EXPECT_EQ(Text(suggestion), "A=2,4 | 10/11 calls, 2 buckets, 1 unmatched");
  auto compiles = ExpandWarmupGraph(graph, suggestion->entry, "suggested");
  ASSERT_TRUE(compiles.ok()) << compiles.status();
  EXPECT_EQ(compiles->size(), 2);
}

TEST_F(TwoSymbolsTest, TheEntryExpandsIntoOneStaticCompilePerBucket) {
  auto suggestion = SuggestWarmupPlan(graph_, traffic_, 1, 16);
  ASSERT_TRUE(suggestion.ok()) << suggestion.status();
  EXPECT_TRUE(suggestion->entry.graph().empty());
  auto compiles = ExpandWarmupGraph(graph_, suggestion->entry, "suggested");
  ASSERT_TRUE(compiles.ok()) << compiles.status();
  ASSERT_EQ(compiles->size(), suggestion->buckets);
  for (const WarmupCompile& compile : *compiles) {
    EXPECT_FALSE(compile.symbolic) << compile.name;
    for (const kiln::v1::Input& input : compile.request.graph().inputs()) {
      for (const kiln::v1::Dim& dim : input.type().sizes()) {
        EXPECT_EQ(dim.kind_case(), kiln::v1::Dim::kConstant) << compile.name;
      }
    }
  }
  EXPECT_EQ(compiles->front().name, "suggested B=1 S=128");
}

TEST_F(TwoSymbolsTest, ErrorsNameTheProblem) {
  EXPECT_EQ(SuggestWarmupPlan(GraphOf({{Constant(4), Constant(64)}}), traffic_, 0.99, 16).status(),
            absl::InvalidArgumentError(
                "the graph's inputs have no symbolic dims: trace it with a dynamic dim"));
  EXPECT_EQ(SuggestWarmupPlan(graph_, traffic_, 0, 16).status(),
            absl::InvalidArgumentError("share 0 is outside (0, 1]"));
  EXPECT_EQ(SuggestWarmupPlan(graph_, traffic_, 1.5, 16).status(),
            absl::InvalidArgumentError("share 1.5 is outside (0, 1]"));
  EXPECT_EQ(SuggestWarmupPlan(graph_, traffic_, 0.99, 0).status(),
            absl::InvalidArgumentError("max_buckets 0 is below 1"));
  EXPECT_EQ(SuggestWarmupPlan(graph_, Traffic({}), 0.99, 16).status(),
            absl::InvalidArgumentError("the traffic histogram has no calls"));
  EXPECT_EQ(SuggestWarmupPlan(graph_, Traffic({{{1, 128, 128}, 0}}), 0.99, 16).status(),
            absl::InvalidArgumentError("the traffic histogram has no calls"));
  EXPECT_EQ(SuggestWarmupPlan(graph_, Traffic({{{1, 128, 128}, 3}, {{1, 64, 64}, -1}}), 0.99, 16)
                .status(),
            absl::InvalidArgumentError("traffic row 1 has -1 calls"));
  EXPECT_EQ(SuggestWarmupPlan(graph_, Traffic({}, -2), 0.99, 16).status(),
            absl::InvalidArgumentError("the traffic histogram has -2 other calls"));
  EXPECT_EQ(SuggestWarmupPlan(graph_, Traffic({{{1, 128}, 3}}, 2), 0.99, 16).status(),
            absl::InvalidArgumentError("none of the traffic histogram's 5 calls fit the graph's "
                                       "inputs (3 at other ranks or sizes, 2 past the "
                                       "histogram's rows)"));
}

}  // namespace
}  // namespace kiln
