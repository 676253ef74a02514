// Which linear pairs run transposed, seen in the core graph.
#include "codegen/passes/transpose_linear.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "codegen/pipeline_testing.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// Linear -> GELU -> Linear (as traced: addmm(b, x, t(W))); `batch` is a
// JSON size ({"constant": 16} or {"symbol": "B"}), `relations` the graph's.
kiln::v1::Graph LinearPair(const std::string& batch, int in, int hidden, int out,
                           const std::string& relations = "[]") {
  const std::string json = absl::Substitute(R"({"name": "mlp", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [$0, {"constant": $1}]}},
      {"value": 1, "name": "w1", "type": {"dtype": "FLOAT32", "sizes": [{"constant": $2}, {"constant": $1}]}},
      {"value": 2, "name": "b1", "type": {"dtype": "FLOAT32", "sizes": [{"constant": $2}]}},
      {"value": 3, "name": "w2", "type": {"dtype": "FLOAT32", "sizes": [{"constant": $3}, {"constant": $2}]}}],
    "nodes": [
      {"name": "t", "op": "aten.t.default", "inputs": [1], "outputs": [4],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": $1}, {"constant": $2}],
                        "strides": [{"constant": 1}, {"constant": $1}]}]},
      {"name": "addmm", "op": "aten.addmm.default", "inputs": [2, 0, 4], "outputs": [5],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [$0, {"constant": $2}]}]},
      {"name": "gelu", "op": "aten.gelu.default", "inputs": [5], "outputs": [6],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [$0, {"constant": $2}]}]},
      {"name": "t_1", "op": "aten.t.default", "inputs": [3], "outputs": [7],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": $2}, {"constant": $3}],
                        "strides": [{"constant": 1}, {"constant": $2}]}]},
      {"name": "mm", "op": "aten.mm.default", "inputs": [6, 7], "outputs": [8],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [$0, {"constant": $3}]}]}],
    "outputs": [8], "relations": $4})",
                                            batch, in, hidden, out, relations);
  return ParseGraph(json);
}

kiln::v1::Graph LinearPair(int batch, int in, int hidden, int out) {
  return LinearPair(absl::StrCat(R"({"constant": )", batch, "}"), in, hidden, out);
}

bool Transposed(const kiln::v1::Graph& graph) {
  return Stage(Generate(graph), "core graph").find("kiln.mm.default(%1, %") != std::string::npos;
}

// At a small batch both products run with the weight on the left (two plain
// GEMMs), GELU and its bias on the transposed hidden values, and the result
// is read back as a transposed view.
TEST(TransposeLinearTest, LinearPairsRunTransposedAtSmallBatches) {
  const std::string core = Stage(Generate(LinearPair(16, 64, 128, 32)), "core graph");
  EXPECT_NE(core.find("float32[128, 16] = kiln.mm.default(%1, %"), std::string::npos) << core;
  EXPECT_NE(core.find("float32[128, 16]{strides 1, 0} = aten.t.default(%"), std::string::npos)
      << "the bias, broadcast along the batch\n"
      << core;
  EXPECT_NE(core.find("float32[128, 16] = aten.gelu.default(%"), std::string::npos) << core;
  EXPECT_NE(core.find("float32[32, 16] = kiln.mm.default(%3, %"), std::string::npos) << core;
  EXPECT_NE(core.find("float32[16, 32]{strides 1, 16} = aten.t.default(%"), std::string::npos)
      << core;
}

// Up to a batch as large as the narrowest width (32 here); a symbolic batch
// by its bound, and not at all without one.
TEST(TransposeLinearTest, LinearPairsStayAsWrittenWhereTransposingWouldNotPay) {
  EXPECT_TRUE(Transposed(LinearPair(32, 64, 128, 32)));
  for (int batch : {33, 64}) {
    const std::string kept = Stage(Generate(LinearPair(batch, 64, 128, 32)), "core graph");
    EXPECT_EQ(kept.find("kiln.mm.default(%1, %"), std::string::npos) << batch << "\n" << kept;
    EXPECT_NE(kept.find(absl::StrCat("float32[", batch, ", 128] = kiln.mm.default(%0, %")),
              std::string::npos)
        << batch << "\n"
        << kept;
  }
  EXPECT_TRUE(Transposed(LinearPair(256, 256, 1024, 256)));
  EXPECT_FALSE(Transposed(LinearPair(257, 256, 1024, 256)));

  const std::string symbolic = R"({"symbol": "B"})";
  EXPECT_FALSE(Transposed(LinearPair(symbolic, 64, 128, 32)));
  EXPECT_TRUE(
      Transposed(LinearPair(symbolic, 64, 128, 32, R"([{"range": {"symbol": "B", "max": 32}}])")));
  EXPECT_FALSE(
      Transposed(LinearPair(symbolic, 64, 128, 32, R"([{"range": {"symbol": "B", "max": 33}}])")));
  // A batch of 2B counts as twice B's bound.
  const std::string twice = R"({"symbol": "B", "multiplier": 2})";
  EXPECT_TRUE(
      Transposed(LinearPair(twice, 64, 128, 32, R"([{"range": {"symbol": "B", "max": 16}}])")));
  EXPECT_FALSE(
      Transposed(LinearPair(twice, 64, 128, 32, R"([{"range": {"symbol": "B", "max": 17}}])")));
  const std::string core = Stage(
      Generate(LinearPair(symbolic, 64, 128, 32, R"([{"range": {"symbol": "B", "max": 8}}])")),
      "core graph");
  EXPECT_NE(core.find("float32[128, s0] = kiln.mm.default(%1, %"), std::string::npos) << core;
  EXPECT_NE(core.find("float32[s0, 32]{strides 1, s0} = aten.t.default(%"), std::string::npos)
      << core;
}

}  // namespace
}  // namespace kiln
