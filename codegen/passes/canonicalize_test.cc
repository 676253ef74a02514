// Canonicalize: the same computation written two ways comes out as one graph.
#include "codegen/passes/canonicalize.h"

#include "absl/strings/substitute.h"
#include "codegen/import.h"
#include "codegen/passes/verify.h"
#include "codegen/pipeline_testing.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

constexpr char kF32[] = R"({"dtype": "FLOAT32", "sizes": [{"constant": 2}, {"constant": 3}]})";

// add(x, y) and mul(x, y) of x, y: float32[2, 3], returned as (mul, add),
// with the add's alpha given or omitted and a relu no output reads; `first`
// and `second` are the nodes in the order written.
std::string Graph(const std::string& first, const std::string& second) {
  return absl::Substitute(R"({"name": "g", "inputs": [
      {"value": 0, "name": "x", "type": $0}, {"value": 1, "name": "y", "type": $0}],
    "nodes": [$1, $2,
      {"name": "dead", "op": "aten.relu.default", "inputs": [0], "outputs": [9], "outputTypes": [$0]}],
    "outputs": [7, 8]})",
                          kF32, first, second);
}

std::string Add(const std::string& args) {
  return absl::Substitute(
      R"({"name": "add", "op": "aten.add.Tensor", "inputs": [0, 1], "outputs": [8], "args": [$1],
          "outputTypes": [$0]})",
      kF32, args);
}

std::string Mul() {
  return absl::Substitute(
      R"({"name": "mul", "op": "aten.mul.Tensor", "inputs": [0, 1], "outputs": [7],
          "outputTypes": [$0]})",
      kF32);
}

std::string Canonical(const std::string& json) {
  absl::StatusOr<ir::Graph> graph = ImportGraph(ParseGraph(json));
  EXPECT_TRUE(graph.ok()) << graph.status();
  EXPECT_TRUE(VerifyGraph(*graph).ok());
  absl::StatusOr<ir::Graph> canonical = Canonicalize(*graph);
  EXPECT_TRUE(canonical.ok()) << canonical.status();
  return canonical.ok() ? ir::ToString(*canonical) : "";
}

TEST(CanonicalizeTest, OrderDefaultsAndDeadNodesDoNotChangeTheGraph) {
  const std::string expected =
      "%0 = input 0 : float32[2, 3]  # x\n"
      "%1 = input 1 : float32[2, 3]  # y\n"
      "%2 : float32[2, 3] = aten.mul.Tensor(%0, %1, other=None)  # mul\n"
      "%3 : float32[2, 3] = aten.add.Tensor(%0, %1, alpha=1, other=None)  # add\n"
      "return (%2, %3)\n";
  EXPECT_EQ(Canonical(Graph(Mul(), Add(""))), expected);
  EXPECT_EQ(Canonical(Graph(Add(R"({"name": "alpha", "intValue": "1"})"), Mul())), expected);
}

}  // namespace
}  // namespace kiln
