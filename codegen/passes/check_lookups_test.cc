// Which lookups get a kiln.check_index, of which index and size, seen in
// the core graph.
#include "codegen/passes/check_lookups.h"

#include "absl/strings/substitute.h"
#include "codegen/pipeline_testing.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// embedding(table [16, 4], index [$0]) + 1: a lookup of the user's graph.
kiln::v1::Graph Embedding(int rows) {
  return ParseGraph(absl::Substitute(
      R"({"name": "embed", "inputs": [
      {"value": 0, "name": "table", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 16}, {"constant": 4}]}},
      {"value": 1, "name": "index", "type": {"dtype": "INT64", "sizes": [{"constant": $0}]}}],
    "nodes": [
      {"name": "embedding", "op": "aten.embedding.default", "inputs": [0, 1], "outputs": [2],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": $0}, {"constant": 4}]}]},
      {"name": "add", "op": "aten.add.Scalar", "inputs": [2], "outputs": [3],
       "args": [{"name": "other", "floatValue": 1}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": $0}, {"constant": 4}]}]}],
    "outputs": [3]})",
      rows));
}

int Count(const std::string& text, const std::string& part) {
  int count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

TEST(CheckLookupsTest, AnEmbeddingChecksItsIndexAgainstTheTablesRows) {
  const std::string core = Stage(Generate(Embedding(3)), "core graph");
  EXPECT_EQ(Count(core,
                  "kiln.check_index.default(%1, dim=0, from_the_end=False, "
                  "op=\"embedding\", size=16)"),
            1)
      << core;
}

TEST(CheckLookupsTest, AnEmptyIndexNamesNoPositionAndIsNotChecked) {
  const std::string core = Stage(Generate(Embedding(0)), "core graph");
  EXPECT_EQ(Count(core, "kiln.check_index"), 0) << core;
}

TEST(CheckLookupsTest, AGraphWithoutLookupsIsUnchanged) {
  const kiln::v1::Graph graph = ParseGraph(R"({"name": "relu", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 4}]}}],
    "nodes": [{"name": "relu", "op": "aten.relu.default", "inputs": [0], "outputs": [1],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}]}]}],
    "outputs": [1]})");
  EXPECT_EQ(Count(Stage(Generate(graph), "core graph"), "kiln.check_index"), 0);
}

}  // namespace
}  // namespace kiln
