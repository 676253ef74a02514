#include "client/warmup_plan.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/graph_file.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

class WarmupPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDirectory("/tmp/kiln-planXXXXXX");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    auto graph = ReadGraphFile("examples/tail_dynamic.json");  // x: [s0, 64]
    ASSERT_TRUE(graph.ok()) << graph.status();
    graph_ = *graph;
    WriteGraph("tail.json", graph_);
  }
  void TearDown() override { RemoveRecursively(dir_).IgnoreError(); }

  void WriteGraph(const std::string& name, const kiln::v1::Graph& graph) {
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/" + name, PrintJsonMessage(graph), 0644).ok());
  }

  absl::StatusOr<std::vector<WarmupCompile>> Expand(const std::string& json) {
    const std::string path = dir_ + "/plan.json";
    EXPECT_TRUE(WriteFileAtomically(path, json, 0644).ok());
    auto plan = ReadWarmupPlan(path);
    if (!plan.ok()) return plan.status();
    return ExpandWarmupPlan(*plan, dir_);
  }

  static bool IsStatic(const kiln::v1::Graph& graph) {
    for (const auto& input : graph.inputs()) {
      for (const auto& dim : input.type().sizes()) {
        if (dim.kind_case() != kiln::v1::Dim::kConstant) return false;
      }
    }
    return true;
  }

  std::string dir_;
  kiln::v1::Graph graph_;
};

// Two inputs x: [a, 64] and y: [b, 64] with a == b, and a third z: [c, 8]
// with 10 <= c and c % 4 == 0: a bucket listing only `a` runs them at
// a, a and 12.
TEST_F(WarmupPlanTest, BucketInputSizesFillSymbolsTheBucketDoesNotList) {
  kiln::v1::Graph graph;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(R"({"inputs": [
      {"value": 0, "name": "x", "type": {"sizes": [{"symbol": "a"}, {"constant": 64}]}},
      {"value": 1, "name": "y", "type": {"sizes": [{"symbol": "b"}, {"constant": 64}]}},
      {"value": 2, "name": "z", "type": {"sizes": [{"symbol": "c", "multiplier": 2},
                                                   {"constant": 8}]}}],
    "relations": [{"equal": {"lhs": "a", "rhs": "b"}},
                  {"range": {"symbol": "c", "min": 10}},
                  {"divisible": {"symbol": "c", "divisor": 4}}]})",
                                                          &graph)
                  .ok());
  EXPECT_EQ(BucketInputSizes(graph, {{"a", 5}}),
            (std::vector<std::vector<int64_t>>{{5, 64}, {5, 64}, {24, 8}}));
  EXPECT_EQ(BucketInputSizes(graph, {{"b", 3}, {"c", 4}}),
            (std::vector<std::vector<int64_t>>{{3, 64}, {3, 64}, {8, 8}}));
}

TEST_F(WarmupPlanTest, SizesAreTheUnionOfTheListAndTheRulesSorted) {
  kiln::v1::SymbolSizes sizes;
  sizes.add_sizes(48);
  sizes.add_sizes(3);
  sizes.mutable_powers_of_two()->set_from(3);
  sizes.mutable_powers_of_two()->set_to(40);
  sizes.mutable_multiples()->set_of(16);
  sizes.mutable_multiples()->set_up_to(64);
  EXPECT_EQ(*ExpandSizes(sizes), (std::vector<int64_t>{3, 4, 8, 16, 32, 48, 64}));
}

TEST_F(WarmupPlanTest, EmptyInvertedAndNonPositiveSizesAreRefused) {
  kiln::v1::SymbolSizes sizes;
  EXPECT_EQ(ExpandSizes(sizes).status(),
            absl::InvalidArgumentError("no sizes: give `sizes`, `powers_of_two` or `multiples`"));
  sizes.mutable_powers_of_two()->set_from(64);
  sizes.mutable_powers_of_two()->set_to(8);
  EXPECT_EQ(
      ExpandSizes(sizes).status(),
      absl::InvalidArgumentError("powers_of_two from 64 to 8 is empty (needs 1 <= from <= to)"));
  sizes.Clear();
  sizes.mutable_multiples()->set_of(0);
  sizes.mutable_multiples()->set_up_to(8);
  EXPECT_THAT(ExpandSizes(sizes).status().message(), HasSubstr("multiples of 0 up to 8 is empty"));
  sizes.Clear();
  sizes.add_sizes(0);
  EXPECT_EQ(ExpandSizes(sizes).status(), absl::InvalidArgumentError("size 0 is below 1"));
}

TEST_F(WarmupPlanTest, StaticBucketsAreTheGraphSpecializedToEachSize) {
  auto compiles = Expand(R"({"graphs": [{"graph": "tail.json",
      "symbols": [{"symbol": "s0", "powers_of_two": {"from": 1, "to": 8}}]}]})");
  ASSERT_TRUE(compiles.ok()) << compiles.status();
  ASSERT_EQ(compiles->size(), 4);
  const int64_t expected[] = {1, 2, 4, 8};
  for (int i = 0; i < 4; ++i) {
    const WarmupCompile& compile = (*compiles)[i];
    EXPECT_EQ(compile.name, absl::StrCat("graphs[0] tail.json s0=", expected[i]));
    const kiln::v1::Graph& graph = compile.request.graph();
    ASSERT_TRUE(IsStatic(graph)) << compile.name;
    EXPECT_EQ(graph.inputs(0).type().sizes(0).constant(), expected[i]);
    EXPECT_EQ(compile.request.priority(), kiln::v1::CompileRequest::PRIORITY_WARMUP);
    EXPECT_EQ(compile.buckets.size(), 1);
  }
}

// A package kiln.save wrote (a directory) stands for its graph.json.
TEST_F(WarmupPlanTest, APackageDirectoryStandsForItsGraph) {
  ASSERT_TRUE(MakeDirectories(dir_ + "/tail.kiln", 0700).ok());
  WriteGraph("tail.kiln/graph.json", graph_);
  auto compiles = Expand(R"({"graphs": [{"graph": "tail.kiln",
      "symbols": [{"symbol": "s0", "sizes": ["2", "4"]}]}]})");
  ASSERT_TRUE(compiles.ok()) << compiles.status();
  ASSERT_EQ(compiles->size(), 2);
  EXPECT_EQ((*compiles)[0].name, "graphs[0] tail.kiln s0=2");
  kiln::v1::WarmupGraph entry;
  entry.set_graph("tail.kiln");
  EXPECT_EQ(WarmupGraphPath(entry, dir_), dir_ + "/tail.kiln/graph.json");
  entry.set_graph("/abs/f.json");
  EXPECT_EQ(WarmupGraphPath(entry, dir_), "/abs/f.json");
}

TEST_F(WarmupPlanTest, SymbolicBucketsShareTheSymbolicArtifactButSizeOneIsStatic) {
  auto compiles = Expand(R"({"graphs": [{"graph": "tail.json", "serve": "SERVE_SYMBOLIC",
      "target": "TARGET_X86_64_V3", "symbols": [{"symbol": "s0", "sizes": ["1", "16", "32"]}]}]})");
  ASSERT_TRUE(compiles.ok()) << compiles.status();
  ASSERT_EQ(compiles->size(), 2);
  EXPECT_EQ((*compiles)[0].name, "graphs[0] tail.json s0=1");
  EXPECT_TRUE(IsStatic((*compiles)[0].request.graph()));
  EXPECT_EQ((*compiles)[1].name, "graphs[0] tail.json symbolic");
  EXPECT_EQ((*compiles)[1].buckets.size(), 2);
  EXPECT_EQ((*compiles)[1].request.graph().SerializeAsString(), graph_.SerializeAsString())
      << "the graph as traced";
  EXPECT_EQ((*compiles)[1].request.options().target(), kiln::v1::TARGET_X86_64_V3);
}

TEST_F(WarmupPlanTest, TheExamplePlanExpands) {
  auto plan = ReadWarmupPlan("examples/plans/warmup.json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto compiles = ExpandWarmupPlan(*plan, "examples/plans");
  ASSERT_TRUE(compiles.ok()) << compiles.status();
  ASSERT_EQ(compiles->size(), 8) << "s0 = 1 ... 64 static, and the symbolic artifact";
  EXPECT_EQ(compiles->back().name, "graphs[1] ../tail_dynamic.json symbolic");
  EXPECT_EQ(compiles->back().buckets.size(), 10);
}

TEST_F(WarmupPlanTest, ErrorsNameThePlanEntry) {
  EXPECT_EQ(Expand(R"({"graphs": []})").status(),
            absl::InvalidArgumentError("the plan lists no graphs"));
  auto missing = Expand(R"({"graphs": [{"graph": "gone.json",
      "symbols": [{"symbol": "s0", "sizes": ["2"]}]}]})");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("graphs[0] gone.json: "));
  EXPECT_EQ(Expand(R"({"graphs": [{"graph": "tail.json", "symbols": [{"symbol": "s0",
      "sizes": ["2"]}]}, {"graph": "tail.json", "symbols": [{"symbol": "B", "sizes": ["2"]}]}]})")
                .status(),
            absl::InvalidArgumentError("graphs[1] tail.json symbol 'B': not a symbolic dim of the "
                                       "graph's inputs (its symbols: s0)"));
  EXPECT_EQ(Expand(R"({"graphs": [{"graph": "tail.json", "symbols": [{"symbol": "s0",
      "sizes": ["2"]}, {"symbol": "s0", "sizes": ["4"]}]}]})")
                .status(),
            absl::InvalidArgumentError("graphs[0] tail.json symbol 's0': listed twice"));
  EXPECT_EQ(
      Expand(R"({"graphs": [{"graph": "tail.json", "symbols": [{"symbol": "s0"}]}]})").status(),
      absl::InvalidArgumentError("graphs[0] tail.json symbol 's0': no sizes: give `sizes`, "
                                 "`powers_of_two` or `multiples`"));
  EXPECT_EQ(Expand(R"({"graphs": [{"graph": "tail.json"}]})").status(),
            absl::InvalidArgumentError("graphs[0] tail.json: lists no symbol sizes"));
  EXPECT_THAT(Expand(R"({"graphs": [{"graph": "tail.json", "bucket": 3}]})").status().message(),
              HasSubstr("plan.json: not a Kiln warmup plan (protobuf JSON)"));
}

// A static graph (no symbols) is one bucket, itself: warming it runs it
// once, so whatever its first call would make is made before traffic.
TEST_F(WarmupPlanTest, AStaticGraphIsOneBucket) {
  auto graph = ReadGraphFile("examples/f.json");
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE(IsStatic(*graph));
  WriteGraph("f.json", *graph);
  auto compiles = Expand(R"({"graphs": [{"graph": "f.json"}]})");
  ASSERT_TRUE(compiles.ok()) << compiles.status();
  ASSERT_EQ(compiles->size(), 1u);
  EXPECT_EQ((*compiles)[0].name, "graphs[0] f.json");
  ASSERT_EQ((*compiles)[0].buckets.size(), 1u);
  EXPECT_TRUE((*compiles)[0].buckets[0].empty());
}

TEST_F(WarmupPlanTest, ASymbolicBucketMustKeepTheGraphsRelationsAStaticOneNeedNot) {
  kiln::v1::Graph bounded = graph_;
  auto* range = bounded.add_relations()->mutable_range();
  range->set_symbol("s0");
  range->set_min(2);
  range->set_max(64);
  auto* divisible = bounded.add_relations()->mutable_divisible();
  divisible->set_symbol("s0");
  divisible->set_divisor(8);
  WriteGraph("bounded.json", bounded);
  EXPECT_EQ(Expand(R"({"graphs": [{"graph": "bounded.json", "serve": "SERVE_SYMBOLIC",
      "symbols": [{"symbol": "s0", "sizes": ["16", "128"]}]}]})")
                .status(),
            absl::InvalidArgumentError("graphs[0] bounded.json bucket s0=128: breaks the graph's "
                                       "relation 2 <= s0 <= 64; make it a static bucket"));
  EXPECT_EQ(Expand(R"({"graphs": [{"graph": "bounded.json", "serve": "SERVE_SYMBOLIC",
      "symbols": [{"symbol": "s0", "sizes": ["12"]}]}]})")
                .status(),
            absl::InvalidArgumentError("graphs[0] bounded.json bucket s0=12: breaks the graph's "
                                       "relation s0 % 8 == 0; make it a static bucket"));
  auto compiles = Expand(R"({"graphs": [{"graph": "bounded.json",
      "symbols": [{"symbol": "s0", "sizes": ["12", "128"]}]}]})");
  ASSERT_TRUE(compiles.ok()) << compiles.status();
  EXPECT_EQ(compiles->size(), 2);
}

}  // namespace
}  // namespace kiln
