#include "codegen/pipeline.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "codegen/guards.h"
#include "codegen/pipeline_testing.h"
#include "codegen/retype.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(PipelineTest, FFusesAddReluAndComputesMmInPlaceInTheOutput) {
  const GeneratedCode code = Generate(ReadExample("f"));
  EXPECT_EQ(Stage(code, "kernels"),
            "kernel 0: extern mm -> %2 float32[64, 64]\n"
            "    reads %0 at (i0, i1) -> (i0, i1); %0 at (i0, i1) -> (i1, i0)\n"
            "kernel 1: pointwise %4 float32[64, 64], fused with %3\n"
            "    reads %2 at (i0, i1) -> (i0, i1)\n");
  EXPECT_EQ(Stage(code, "buffer plan"),
            "input 0: 16384 bytes, holds %0\n"
            "output 0: 16384 bytes, holds %2, %4\n"
            "scratch arena: 0 bytes\n"
            "note: %4 is computed in place over %2 (dead after kernel 1) in output 0\n");
  // x @ x.T is a symmetric rank-k update on x, straight into the output.
  EXPECT_NE(code.source.find("rt->syrk_f32(rt->context, 64, 64, b0 + 0, 64, 1, b1, 64);"),
            std::string::npos)
      << code.source;
  EXPECT_NE(code.source.find("float v1 = (v0 + 0x1p+0f);"), std::string::npos);
  EXPECT_NE(code.source.find("float v2 = (v1 < 0x0p+0f ? 0x0p+0f : v1);"), std::string::npos);
  EXPECT_EQ(code.source.find("#include <"), std::string::npos) << "must be freestanding";
  EXPECT_EQ(code.signature.scratch_bytes(), 0);
}

TEST(PipelineTest, KeepProductKeepsTheObservableProductApart) {
  const GeneratedCode code = Generate(ReadExample("keep_product"));
  EXPECT_EQ(Stage(code, "buffer plan"),
            "input 0: 16384 bytes, holds %0\n"
            "output 0: 16384 bytes, holds %2\n"
            "output 1: 16384 bytes, holds %4\n"
            "scratch arena: 0 bytes\n");
}

TEST(PipelineTest, SourceIsDeterministicAndIgnoresNamesAndIds) {
  kiln::v1::Graph graph = ReadExample("f");
  const std::string first = Generate(graph).source;
  graph.set_name("f");  // the name stays in a comment; renumber and rename the rest
  for (auto& node : *graph.mutable_nodes()) node.set_name("renamed_" + node.name());
  EXPECT_EQ(Generate(graph).source, first);
}

// x.t().reshape(2, 2, 6) on x: [6, 4] is viewable (eager's view takes
// it), so Kiln aliases x's memory under strides [2, 1, 4] instead of
// copying; and mm(x, y).view(12), the whole product in order, is written
// straight into the output.
TEST(PipelineTest, ViewableReshapesAndInOrderOutputsCopyNothing) {
  const std::string json = R"({"name": "views", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 6}, {"constant": 4}]}},
      {"value": 1, "name": "y", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 2}]}}],
    "nodes": [
      {"name": "t", "op": "aten.t.default", "inputs": [0], "outputs": [2],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 6}],
                        "strides": [{"constant": 1}, {"constant": 4}]}]},
      {"name": "split", "op": "aten.view.default", "inputs": [2], "outputs": [3],
       "args": [{"name": "size", "intList": {"values": ["2", "2", "6"]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 2}, {"constant": 2}, {"constant": 6}]}]},
      {"name": "double", "op": "aten.mul.Tensor", "inputs": [3], "outputs": [4],
       "args": [{"name": "other", "floatValue": 2.0}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 2}, {"constant": 2}, {"constant": 6}]}]},
      {"name": "mm", "op": "aten.mm.default", "inputs": [0, 1], "outputs": [5],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 6}, {"constant": 2}]}]},
      {"name": "flat", "op": "aten.view.default", "inputs": [5], "outputs": [6],
       "args": [{"name": "size", "intList": {"values": ["12"]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 12}]}]}],
    "outputs": [4, 6]})";
  const GeneratedCode code = Generate(ParseGraph(json));
  const std::string core = Stage(code, "core graph");
  EXPECT_EQ(core.find("aten.clone"), std::string::npos) << core;
  EXPECT_NE(core.find("kiln.alias.default(%0, size=[2, 2, 6], storage_offset=0, stride=[2, 1, 4])"),
            std::string::npos)
      << core;
  EXPECT_EQ(Stage(code, "kernels").find("copy %"), std::string::npos) << Stage(code, "kernels");
}

// softmax's row max skips NaN tests and its exp skips the upper clamp (both
// exact here: ops_test's NaN and inf rows), the lanes' final combine is a
// vector tree, and the exp loop is interleaved; a plain exp keeps kiln_expf.
TEST(PipelineTest, SoftmaxTakesItsCheaperMaxAndExp) {
  const std::string json = R"({"name": "softmax", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 1024}]}}],
    "nodes": [
      {"name": "softmax", "op": "aten._softmax.default", "inputs": [0], "outputs": [1],
       "args": [{"name": "dim", "intValue": "-1"}, {"name": "half_to_float", "boolValue": false}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 1024}]}]},
      {"name": "exp", "op": "aten.exp.default", "inputs": [0], "outputs": [2],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 1024}]}]}],
    "outputs": [1, 2]})";
  const GeneratedCode code = Generate(ParseGraph(json));
  const std::string core = Stage(code, "core graph");
  EXPECT_NE(core.find("kiln.softmax_max.default(%0, dim=[-1], keepdim=True)"), std::string::npos)
      << core;
  EXPECT_NE(core.find("kiln.exp_nonpositive.default("), std::string::npos) << core;
  EXPECT_NE(code.source.find("lanes[k] = (lanes[k] > v0 ? lanes[k] : v0);"), std::string::npos)
      << code.source;
  EXPECT_NE(code.source.find("const kiln_lanes8 l8 = (l16[0].lo + l16[0].hi);"), std::string::npos)
      << code.source;
  EXPECT_NE(code.source.find("#pragma clang loop interleave_count(2)\n"
                             "      for (kiln_int64 i1 = 0; i1 < 1024; ++i1) {\n"
                             "        float v2 = p0[i0 * 1024 + i1];"),
            std::string::npos)
      << code.source;
  EXPECT_NE(code.source.find("= kiln_expf_nonpositive("), std::string::npos) << code.source;
  EXPECT_NE(code.source.find("= kiln_expf("), std::string::npos) << "the plain exp";
}

TEST(PipelineTest, GeluBackwardsCdfAndPdfShareOneExp) {
  // float32: one call computes cdf + x pdf (kiln_gelu_derivative, whose
  // erf reuses the pdf's exp); float64: libm's erf beside the exp, which,
  // of -x^2 / 2, is never of a positive argument.
  auto gelu_backward = [](const std::string& dtype) {
    return Generate(ParseGraph(absl::Substitute(R"({"name": "gelu_bwd", "inputs": [
      {"value": 0, "name": "grad", "type": {"dtype": "$0", "sizes": [{"constant": 64}]}},
      {"value": 1, "name": "x", "type": {"dtype": "$0", "sizes": [{"constant": 64}]}}],
    "nodes": [
      {"name": "gelu_backward", "op": "aten.gelu_backward.default", "inputs": [0, 1],
       "outputs": [2], "args": [{"name": "approximate", "stringValue": "none"}],
       "outputTypes": [{"dtype": "$0", "sizes": [{"constant": 64}]}]}],
    "outputs": [2]})",
                                                dtype)));
  };
  const GeneratedCode single = gelu_backward("FLOAT32");
  EXPECT_NE(single.source.find("= kiln_gelu_derivative(v"), std::string::npos) << single.source;
  EXPECT_EQ(single.source.find("= kiln_erf_for_gelu(v"), std::string::npos) << single.source;
  EXPECT_EQ(single.source.find("= kiln_expf_nonpositive(v"), std::string::npos) << single.source;
  const GeneratedCode twice = gelu_backward("FLOAT64");
  EXPECT_NE(twice.source.find("rt->math_f64[KILN_MATH_ERF]"), std::string::npos) << twice.source;
  EXPECT_NE(twice.source.find("= rt->math_f64[KILN_MATH_EXP]"), std::string::npos) << twice.source;
  EXPECT_EQ(twice.source.find("kiln_gelu_derivative(v"), std::string::npos) << twice.source;
}

TEST(PipelineTest, AnOutputAliasingPartOfAResultIsCopied) {
  // as_strided(mm(x, y), [2, 3], [3, 1]): the first half of the product. Its
  // memory is the product's in order, but only 6 of its 12 elements: the
  // product may not be written into the 6-element output.
  const std::string json = R"({"name": "part", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 3}]}},
      {"value": 1, "name": "y", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 3}, {"constant": 3}]}}],
    "nodes": [
      {"name": "mm", "op": "aten.mm.default", "inputs": [0, 1], "outputs": [2],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 3}]}]},
      {"name": "part", "op": "aten.as_strided.default", "inputs": [2], "outputs": [3],
       "args": [{"name": "size", "intList": {"values": ["2", "3"]}},
                {"name": "stride", "intList": {"values": ["3", "1"]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 2}, {"constant": 3}],
                        "strides": [{"constant": 3}, {"constant": 1}]}]}],
    "outputs": [3]})";
  const GeneratedCode code = Generate(ParseGraph(json));
  EXPECT_NE(Stage(code, "kernels").find("copy %"), std::string::npos) << Stage(code, "kernels");
  EXPECT_NE(Stage(code, "buffer plan").find("scratch [0, 48): 48 bytes, holds %2"),
            std::string::npos)
      << Stage(code, "buffer plan");
}

// index_select is a gathered load (loop_ir.h): the index, widened to int64,
// is one coordinate of the table (a transposed view: the coordinate moves
// to the table's symbolic dim); an index outside it reads 0, not memory;
// the table is realized (relu is not fused into the lookup) and the read
// is never in place. The index is checked against the table's dim
// (passes/check_lookups.h): the run ends in eager's IndexError.
TEST(PipelineTest, GatheredLoadsReadTheTableOnlyInsideIt) {
  const std::string json = R"({"name": "lookup", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32",
       "sizes": [{"constant": 4}, {"symbol": "S"}]}},
      {"value": 1, "name": "i", "type": {"dtype": "INT32", "sizes": [{"constant": 3}]}}],
    "nodes": [
      {"name": "relu", "op": "aten.relu.default", "inputs": [0], "outputs": [2],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"symbol": "S"}]}]},
      {"name": "t", "op": "aten.t.default", "inputs": [2], "outputs": [3],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "S"}, {"constant": 4}],
                        "strides": [{"constant": 1}, {"symbol": "S"}]}]},
      {"name": "select", "op": "aten.index_select.default", "inputs": [3, 1], "outputs": [4],
       "args": [{"name": "dim", "intValue": "0"}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 3}, {"constant": 4}]}]}],
    "outputs": [4]})";
  const GeneratedCode code = Generate(ParseGraph(json));
  const std::string loops = Stage(code, "loop IR");
  EXPECT_NE(loops.find("%5 : int32[] = extern index_check(%1)"), std::string::npos) << loops;
  EXPECT_NE(loops.find("%4 : float32[3, 4] = pointwise load(%3, (i0, i1) -> (0, i1), coordinate 0 "
                       "= cast(load(%1, (i0, i1) -> (i0))), else 0)"),
            std::string::npos)
      << loops;
  EXPECT_NE(Stage(code, "kernels")
                .find("kernel 2: extern index_check -> %5 int32[]\n    reads %1 at (i0) -> (i0)"),
            std::string::npos)
      << Stage(code, "kernels");
  EXPECT_NE(Stage(code, "kernels")
                .find("reads %1 at (i0, i1) -> (i0); %2 at (i0, i1, i2) -> (i1, "
                      "i2)"),
            std::string::npos)
      << Stage(code, "kernels");
  EXPECT_NE(code.source.find("if ((entry < 0) | (entry >= symbols[0])) {\n"
                             "      rt->index_error(rt->context, \"index_select\", 0, entry, "
                             "symbols[0]);\n      return KILN_RUN_INDEX_ERROR;"),
            std::string::npos)
      << code.source;
  EXPECT_NE(code.source.find("float v2 = ((v1 >= 0) & (v1 < symbols[0]) ? p2[i1 * "
                             "symbols[0] + v1 * 1] : 0x0p+0f);"),
            std::string::npos)
      << code.source;
}

// A bias gradient sums a [64, 1024] gradient over its rows: each output
// element's column is 1024 floats apart, so the reduction runs the
// columns innermost (one vector of neighbouring columns per row read) in
// chunks of the parallel loop, runs of 64 rows into partial sums. The same
// sum over the other dim reads rows, and folds each one in lanes.
TEST(PipelineTest, ASumDownColumnsFoldsNeighbouringColumnsTogether) {
  auto sum_over = [](int dim, int kept) {
    return ParseGraph(absl::StrCat(R"({"name": "bias_grad", "inputs": [
      {"value": 0, "name": "g", "type": {"dtype": "FLOAT32",
       "sizes": [{"constant": 64}, {"constant": 1024}]}}],
    "nodes": [
      {"name": "sum", "op": "aten.sum.dim_IntList", "inputs": [0], "outputs": [1],
       "args": [{"name": "dim", "intList": {"values": [")",
                                   dim, R"("]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": )",
                                   kept, R"(}]}]}],
    "outputs": [1]})"));
  };
  const GeneratedCode columns = Generate(sum_over(0, 1024));
  EXPECT_NE(columns.source.find("for (kiln_int64 col = begin; col < end; col += 256) {\n"
                                "    const kiln_int64 width = end - col < 256 ? end - col : 256;\n"
                                "    for (kiln_int64 j = 0; j < width; ++j) cols[j] = 0x0p+0f;\n"
                                "    for (kiln_int64 i1 = 0; i1 < 64; ++i1) {\n"
                                "      for (kiln_int64 j = 0; j < width; ++j) {\n"
                                "        const kiln_int64 i0 = col + j;\n"
                                "        float v0 = p1[i0 + i1 * 1024];\n"
                                "        cols[j] = (cols[j] + v0);\n"),
            std::string::npos)
      << columns.source;
  EXPECT_EQ(columns.source.find("lanes"), std::string::npos) << columns.source;
  const GeneratedCode rows = Generate(sum_over(1, 64));
  EXPECT_EQ(rows.source.find("cols["), std::string::npos) << rows.source;
  EXPECT_NE(rows.source.find("lanes[k] = (lanes[k] + v0);"), std::string::npos) << rows.source;
}

// index_select's backward (loop_ir.h, Definition::Kind::kScatter): one
// kernel on the calling thread checks every index (one out of range stops
// the run, as eager's IndexError), writes the start, autograd's new_zeros
// inlined as a store of 0, then adds each element of the source (relu
// inlined) at the row its index names, in the output's memory, in order.
TEST(PipelineTest, ScattersAddInOrderOntoTheirStartAfterCheckingEveryIndex) {
  const std::string json = R"({"name": "index_select_backward", "inputs": [
      {"value": 0, "name": "grad", "type": {"dtype": "FLOAT32",
       "sizes": [{"constant": 3}, {"constant": 4}]}},
      {"value": 1, "name": "i", "type": {"dtype": "INT32", "sizes": [{"constant": 3}]}}],
    "nodes": [
      {"name": "zeros", "op": "aten.new_zeros.default", "inputs": [0], "outputs": [2],
       "args": [{"name": "size", "intList": {"values": ["5", "4"]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 5}, {"constant": 4}]}]},
      {"name": "relu", "op": "aten.relu.default", "inputs": [0], "outputs": [3],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 3}, {"constant": 4}]}]},
      {"name": "index_add", "op": "aten.index_add.default", "inputs": [2, 1, 3], "outputs": [4],
       "args": [{"name": "dim", "intValue": "0"}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 5}, {"constant": 4}]}]}],
    "outputs": [4]})";
  const GeneratedCode code = Generate(ParseGraph(json));
  EXPECT_NE(Stage(code, "loop IR")
                .find("%4 : float32[5, 4] = scatter-add onto %2, over [3, 4]: load(%3, (i0, i1) -> "
                      "(i0, i1)) at (i0, i1) -> (0, i1), coordinate 0 = cast(load(%1, (i0, i1) -> "
                      "(i0)))"),
            std::string::npos)
      << Stage(code, "loop IR");
  EXPECT_NE(Stage(code, "kernels")
                .find("kernel 0: scatter-add along dim 0 %4 float32[5, 4], fused with %2, %3\n"
                      "    reads %1 at (i0, i1) -> (i0); %0 at (i0, i1) -> (i0, i1)\n"),
            std::string::npos)
      << Stage(code, "kernels");
  EXPECT_NE(code.source.find("      long long v1 = ((long long)v0);\n"
                             "      if ((v1 < 0) | (v1 >= 5)) {\n"
                             "        rt->index_error(rt->context, \"index_add\", 0, v1, 5);\n"
                             "        return KILN_RUN_INDEX_ERROR;\n"
                             "      }\n"
                             "    }\n"
                             "  }\n"
                             "  for (kiln_int64 i0 = 0; i0 < 5; ++i0) {\n"
                             "    for (kiln_int64 i1 = 0; i1 < 4; ++i1) {\n"
                             "      p0[i0 * 4 + i1] = 0x0p+0f;\n"
                             "    }\n"
                             "  }\n"
                             "  for (kiln_int64 i0 = 0; i0 < 3; ++i0) {\n"
                             "    for (kiln_int64 i1 = 0; i1 < 4; ++i1) {\n"
                             "      int v2 = p1[i0];\n"
                             "      long long v3 = ((long long)v2);\n"
                             "      float v4 = p2[i0 * 4 + i1];\n"
                             "      float v5 = (v4 < 0x0p+0f ? 0x0p+0f : v4);\n"
                             "      if ((v3 >= 0) & (v3 < 5)) {\n"
                             "        p0[i1 + v3 * 4] = (p0[i1 + v3 * 4] + v5);\n"
                             "      }\n"),
            std::string::npos)
      << code.source;
  EXPECT_NE(code.source.find("    const kiln_int32 status = kiln_group_0(rt, symbols, b2, b1, "
                             "b0);\n    if (status != 0) return status;\n"),
            std::string::npos)
      << code.source;
}

// embedding's backward: the padding row's positions get index -1, which
// the scatter skips; a bfloat16 sum is rounded after every add, as eager's.
TEST(PipelineTest, EmbeddingBackwardSkipsThePaddingRowAndRoundsEverySum) {
  const std::string json = R"({"name": "embedding_backward", "inputs": [
      {"value": 0, "name": "grad", "type": {"dtype": "BFLOAT16",
       "sizes": [{"constant": 2}, {"constant": 3}, {"constant": 8}]}},
      {"value": 1, "name": "i", "type": {"dtype": "INT64",
       "sizes": [{"constant": 2}, {"constant": 3}]}}],
    "nodes": [
      {"name": "backward", "op": "aten.embedding_dense_backward.default", "inputs": [0, 1],
       "outputs": [2],
       "args": [{"name": "num_weights", "intValue": "10"}, {"name": "padding_idx", "intValue": "0"},
                {"name": "scale_grad_by_freq", "boolValue": false}],
       "outputTypes": [{"dtype": "BFLOAT16", "sizes": [{"constant": 10}, {"constant": 8}]}]}],
    "outputs": [2]})";
  const GeneratedCode code = Generate(ParseGraph(json));
  EXPECT_NE(Stage(code, "loop IR")
                .find("scatter-add onto 0, over [2, 3, 8]: load(%0, (i0, i1, i2) -> (i0, i1, i2)) "
                      "at (i0, i1, i2) -> (0, i2), coordinate 0 = where(eq(load(%1, (i0, i1, i2) "
                      "-> (i0, i1)), 0), -1, load(%1, (i0, i1, i2) -> (i0, i1)))"),
            std::string::npos)
      << Stage(code, "loop IR");
  EXPECT_NE(code.source.find("        long long v2 = (v1 ? -1LL : v0);\n"
                             "        float v3 = kiln_bf16_to_float(p2[i0 * 24 + i1 * 8 + "
                             "i2]);\n"
                             "        if ((v2 >= 0) & (v2 < 10)) {\n"
                             "          p0[i2 + v2 * 8] = kiln_float_to_bf16((kiln_bf16_to_float("
                             "p0[i2 + v2 * 8]) + v3));\n"),
            std::string::npos)
      << code.source;
}

// Max pooling's padding is a bounded load (loop_ir.h): it reads -inf
// outside the input instead of memory, testing only the sides the loops
// can leave (the top and left here: every window ends inside, and the
// symbolic batch is its own dim); what it reads is realized (relu is not
// fused into the windows); the 3x3 window is unrolled.
TEST(PipelineTest, BoundedLoadsTestOnlyWhatTheLoopsCanLeave) {
  const std::string json = R"({"name": "pool", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32",
       "sizes": [{"symbol": "N"}, {"constant": 2}, {"constant": 6}, {"constant": 6}]}}],
    "nodes": [
      {"name": "relu", "op": "aten.relu.default", "inputs": [0], "outputs": [1],
       "outputTypes": [{"dtype": "FLOAT32",
        "sizes": [{"symbol": "N"}, {"constant": 2}, {"constant": 6}, {"constant": 6}]}]},
      {"name": "pool", "op": "aten.max_pool2d_with_indices.default", "inputs": [1],
       "outputs": [2, 3],
       "args": [{"name": "kernel_size", "intList": {"values": ["3", "3"]}},
                {"name": "stride", "intList": {"values": ["2", "2"]}},
                {"name": "padding", "intList": {"values": ["1", "1"]}}],
       "outputTypes": [
         {"dtype": "FLOAT32", "sizes": [{"symbol": "N"}, {"constant": 2}, {"constant": 3}, {"constant": 3}]},
         {"dtype": "INT64", "sizes": [{"symbol": "N"}, {"constant": 2}, {"constant": 3}, {"constant": 3}]}]}],
    "outputs": [2, 3]})";
  const GeneratedCode code = Generate(ParseGraph(json));
  const std::string loops = Stage(code, "loop IR");
  EXPECT_NE(loops.find("%2 : float32[s0, 2, 3, 3] = pool_max over [3, 3] of load(%1, (i0, i1, i2, "
                       "i3, i4, i5) -> (i0, i1, 2*i2 + i4 + -1, 2*i3 + i5 + -1), else -inf)"),
            std::string::npos)
      << loops;
  EXPECT_NE(Stage(code, "kernels").find("kernel 0: pointwise %1 float32[s0, 2, 6, 6]\n"),
            std::string::npos)
      << Stage(code, "kernels");
  EXPECT_NE(code.source.find("#pragma clang loop unroll(full)\n"
                             "            for (kiln_int64 i4 = 0; i4 < 3; ++i4) {\n"
                             "              #pragma clang loop unroll(full)\n"
                             "              for (kiln_int64 i5 = 0; i5 < 3; ++i5) {\n"
                             "                float v0 = ((i2 * 2 + i4 + -1 >= 0) & "
                             "(i3 * 2 + i5 + -1 >= 0) ? p1[i0 * 72 + i1 * 36 + i2 * 12 + i3 * 2 + "
                             "i4 * 6 + i5 + -7] : (-__builtin_inff()));\n"
                             "                acc = (((v0 > acc) | (v0 != v0)) ? v0 : acc);\n"),
            std::string::npos)
      << code.source;
  // The index starts at the window's first position inside the input.
  EXPECT_NE(code.source.find("if ((v16 > acc) | (v16 != v16)) { acc = v16; acc_index = v32; }"),
            std::string::npos)
      << code.source;

  // Windows that never leave the input read memory with no test at all.
  const std::string inside = R"({"name": "pool", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32",
       "sizes": [{"constant": 2}, {"constant": 6}, {"constant": 6}]}}],
    "nodes": [
      {"name": "pool", "op": "aten.avg_pool2d.default", "inputs": [0], "outputs": [1],
       "args": [{"name": "kernel_size", "intList": {"values": ["2", "2"]}}],
       "outputTypes": [{"dtype": "FLOAT32",
        "sizes": [{"constant": 2}, {"constant": 3}, {"constant": 3}]}]}],
    "outputs": [1]})";
  const GeneratedCode plain = Generate(ParseGraph(inside));
  EXPECT_NE(plain.source.find("float v0 = p1[i0 * 36 + i1 * 12 + i2 * 2 + i3 * 6 + i4];"),
            std::string::npos)
      << plain.source;
  EXPECT_EQ(plain.source.find(" ? p1["), std::string::npos) << plain.source;
}

// Attention's views at a symbolic sequence length S: kᵀ regrouped for bmm
// and q's leading dims merged both alias the input's memory (no clone, no
// copy kernel), under strides that are products of S.
TEST(PipelineTest, SymbolicReshapesRegroupAroundSymbolsWithoutCopies) {
  const std::string json = R"({"name": "scores", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32",
       "sizes": [{"constant": 2}, {"constant": 4}, {"symbol": "S"}, {"constant": 32}]}}],
    "nodes": [
      {"name": "t", "op": "aten.transpose.int", "inputs": [0], "outputs": [1],
       "args": [{"name": "dim0", "intValue": "-2"}, {"name": "dim1", "intValue": "-1"}],
       "outputTypes": [{"dtype": "FLOAT32",
                        "sizes": [{"constant": 2}, {"constant": 4}, {"constant": 32}, {"symbol": "S"}]}]},
      {"name": "kt", "op": "aten.view.default", "inputs": [1], "outputs": [2],
       "args": [{"name": "size", "symIntList": {"values": [{"terms": [{"coefficient": "8"}]},
                 {"terms": [{"coefficient": "32"}]}, {"terms": [{"coefficient": "1", "symbols": ["S"]}]}]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 8}, {"constant": 32}, {"symbol": "S"}]}]},
      {"name": "q", "op": "aten.view.default", "inputs": [0], "outputs": [3],
       "args": [{"name": "size", "symIntList": {"values": [{"terms": [{"coefficient": "8"}]},
                 {"terms": [{"coefficient": "1", "symbols": ["S"]}]}, {"terms": [{"coefficient": "32"}]}]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 8}, {"symbol": "S"}, {"constant": 32}]}]},
      {"name": "bmm", "op": "aten.bmm.default", "inputs": [3, 2], "outputs": [4],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 8}, {"symbol": "S"}, {"symbol": "S"}]}]}],
    "outputs": [4]})";
  const GeneratedCode code = Generate(ParseGraph(json));
  const std::string core = Stage(code, "core graph");
  EXPECT_EQ(core.find("aten.clone"), std::string::npos) << core;
  EXPECT_NE(core.find("kiln.alias.default(%0, size=[8, 32, s0], storage_offset=0, "
                      "stride=[32*s0, 1, 32])"),
            std::string::npos)
      << core;
  EXPECT_NE(core.find("kiln.alias.default(%0, size=[8, s0, 32], storage_offset=0, "
                      "stride=[32*s0, 32, 1])"),
            std::string::npos)
      << core;
  const std::string kernels = Stage(code, "kernels");
  EXPECT_NE(kernels.find("kernel 0: extern bmm -> %3 float32[8, s0, s0]"), std::string::npos)
      << kernels;
  EXPECT_EQ(kernels.find("kernel 1"), std::string::npos) << kernels;
  EXPECT_NE(Stage(code, "buffer plan").find("output 0: 32*s0*s0 bytes"), std::string::npos)
      << Stage(code, "buffer plan");
}

// view(x: [s, 5], [5, s]) is a real reshape, but not one that keeps the
// symbol whole: Unimplemented, naming the node. A -1 next to a merged symbol
// is inferred: view(x: [16, B, 64], [-1, 64]) is [16*B, 64].
TEST(PipelineTest, SymbolicReshapesInferOrRefuseByTheirProducts) {
  auto view = [](const std::string& sizes, const std::string& target, const std::string& result) {
    const std::string json = R"({"name": "v", "inputs": [{"value": 0, "name": "x",
        "type": {"dtype": "FLOAT32", "sizes": )" +
                             sizes + R"(}}],
      "nodes": [{"name": "view", "op": "aten.view.default", "inputs": [0], "outputs": [1],
        "args": [{"name": "size", )" +
                             target + R"(}],
        "outputTypes": [{"dtype": "FLOAT32", "sizes": )" +
                             result + R"(}]}],
      "outputs": [1]})";
    return ParseGraph(json);
  };
  EXPECT_EQ(PrepareGraph(view(R"([{"symbol": "s"}, {"constant": 5}])",
                              R"("symIntList": {"values": [{"terms": [{"coefficient": "5"}]},
                                  {"terms": [{"coefficient": "1", "symbols": ["s"]}]}]})",
                              R"([{"constant": 5}, {"symbol": "s"}])"))
                .status(),
            absl::UnimplementedError("node 0 'view' (aten.view.default): a reshape regrouping "
                                     "elements across a symbolic size"));
  const GeneratedCode code =
      Generate(view(R"([{"constant": 16}, {"symbol": "B"}, {"constant": 64}])",
                    R"("intList": {"values": ["-1", "64"]})",
                    R"([{"symbol": "B", "multiplier": "16"}, {"constant": 64}])"));
  EXPECT_NE(Stage(code, "graph").find("%1 : float32[16*s0, 64] = aten.view.default"),
            std::string::npos)
      << Stage(code, "graph");
}

// expand(x: [1, 4], [S, 4]) broadcasts to a symbolic size (a mask to
// [B, H, S, S], say): a view reading row 0 for every row.
TEST(PipelineTest, ExpandBroadcastsToASymbolicSize) {
  const std::string json = R"({"name": "bias", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 1}, {"constant": 4}]}},
      {"value": 1, "name": "y", "type": {"dtype": "FLOAT32", "sizes": [{"symbol": "S"}, {"constant": 4}]}}],
    "nodes": [
      {"name": "expand", "op": "aten.expand.default", "inputs": [0], "outputs": [2],
       "args": [{"name": "size", "symIntList": {"values": [
                 {"terms": [{"coefficient": "1", "symbols": ["S"]}]}, {"terms": [{"coefficient": "4"}]}]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "S"}, {"constant": 4}]}]},
      {"name": "add", "op": "aten.add.Tensor", "inputs": [2, 1], "outputs": [3],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "S"}, {"constant": 4}]}]}],
    "outputs": [3]})";
  const GeneratedCode code = Generate(ParseGraph(json));
  EXPECT_NE(Stage(code, "loop IR").find("float32[s0, 4] = view %0 (i0, i1) -> (0, i1)"),
            std::string::npos)
      << Stage(code, "loop IR");
}

// pos.expand(B, 16, 64).reshape(B, 1024): a static tensor viewed at a
// symbolic size stays a view of it (stride 0 along B).
TEST(PipelineTest, AStaticTensorExpandedToASymbolicSizeReshapesAsAView) {
  const std::string json = R"({"name": "pos", "inputs": [
      {"value": 0, "name": "pos", "type": {"dtype": "FLOAT32",
       "sizes": [{"constant": 1}, {"constant": 16}, {"constant": 64}]}},
      {"value": 1, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"symbol": "B"}, {"constant": 1024}]}}],
    "nodes": [
      {"name": "expand", "op": "aten.expand.default", "inputs": [0], "outputs": [2],
       "args": [{"name": "size", "symIntList": {"values": [{"terms": [{"coefficient": "1", "symbols": ["B"]}]},
                 {"terms": [{"coefficient": "16"}]}, {"terms": [{"coefficient": "64"}]}]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "B"}, {"constant": 16}, {"constant": 64}]}]},
      {"name": "flat", "op": "aten.view.default", "inputs": [2], "outputs": [3],
       "args": [{"name": "size", "intList": {"values": ["-1", "1024"]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "B"}, {"constant": 1024}]}]},
      {"name": "add", "op": "aten.add.Tensor", "inputs": [3, 1], "outputs": [4],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "B"}, {"constant": 1024}]}]}],
    "outputs": [4]})";
  const GeneratedCode code = Generate(ParseGraph(json));
  const std::string core = Stage(code, "core graph");
  EXPECT_NE(core.find("kiln.alias.default(%0, size=[s0, 1024], storage_offset=0, stride=[0, 1])"),
            std::string::npos)
      << core;
  EXPECT_EQ(core.find("aten.clone"), std::string::npos) << core;
}

// A causal mask over a symbolic S: ones(S, S) and arange(S) (its
// positions) are typed by the symbol, like any value computed from x.
// A training graph's weight gradient, t(t(mm)), is written by the GEMM
// straight into the output: no copy kernel.
TEST(PipelineTest, AnOutputThatViewsAResultInOrderIsWrittenByItsKernel) {
  const GeneratedCode code = Generate(ParseGraph(R"({"name": "weight_grad", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"constant": "4"}, {"constant": "3"}]}},
      {"value": 1, "name": "g", "type": {"dtype": "FLOAT32", "sizes": [{"constant": "4"}, {"constant": "5"}]}}],
    "nodes": [
      {"name": "t", "op": "aten.t.default", "inputs": [1], "outputs": [2],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": "5"}, {"constant": "4"}],
                        "strides": [{"constant": "1"}, {"constant": "5"}]}]},
      {"name": "mm", "op": "aten.mm.default", "inputs": [2, 0], "outputs": [3],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": "5"}, {"constant": "3"}]}]},
      {"name": "t_1", "op": "aten.t.default", "inputs": [3], "outputs": [4],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": "3"}, {"constant": "5"}],
                        "strides": [{"constant": "1"}, {"constant": "3"}]}]},
      {"name": "t_2", "op": "aten.t.default", "inputs": [4], "outputs": [5],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": "5"}, {"constant": "3"}]}]}],
    "outputs": [5]})"));
  const std::string kernels = Stage(code, "kernels");
  EXPECT_NE(kernels.find("kernel 0: extern mm -> %3"), std::string::npos) << kernels;
  EXPECT_EQ(kernels.find("copy"), std::string::npos) << kernels;
  EXPECT_NE(Stage(code, "buffer plan").find("output 0: 60 bytes, holds %3"), std::string::npos)
      << Stage(code, "buffer plan");
}

// x [N, 4, 9, 9] convolved (stride 2, padding 1) with w [weight0, weight1,
// 3, 3], transposed or not, into [N, 8, out, out]; scaled per channel; ReLU.
struct ConvolutionGraph {
  bool transposed = false;
  int64_t weight0 = 8, weight1 = 4;
  int64_t output_padding = 0;
  int64_t out = 5;
};

kiln::v1::Graph Convolution(const ConvolutionGraph& c = {}) {
  const std::string out = absl::StrCat(R"({"constant": ")", c.out, R"("})");
  const std::string out_type =
      absl::StrCat(R"([{"dtype": "FLOAT32", "sizes": [{"symbol": "N"}, {"constant": "8"}, )", out,
                   ", ", out, "]}]");
  return ParseGraph(absl::StrCat(R"({"name": "conv", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32",
        "sizes": [{"symbol": "N"}, {"constant": "4"}, {"constant": "9"}, {"constant": "9"}]}},
      {"value": 1, "name": "w", "type": {"dtype": "FLOAT32",
        "sizes": [{"constant": ")",
                                 c.weight0, R"("}, {"constant": ")", c.weight1,
                                 R"("}, {"constant": "3"}, {"constant": "3"}]}},
      {"value": 2, "name": "scale", "type": {"dtype": "FLOAT32",
        "sizes": [{"constant": "8"}, {"constant": "1"}, {"constant": "1"}]}}],
    "nodes": [
      {"name": "conv", "op": "aten.convolution.default", "inputs": [0, 1], "outputs": [3],
       "args": [{"name": "bias", "none": true},
                {"name": "stride", "intList": {"values": ["2", "2"]}},
                {"name": "padding", "intList": {"values": ["1", "1"]}},
                {"name": "dilation", "intList": {"values": ["1", "1"]}},
                {"name": "transposed", "boolValue": )",
                                 c.transposed ? "true" : "false", R"(},
                {"name": "output_padding", "intList": {"values": [")",
                                 c.output_padding, R"(", ")", c.output_padding, R"("]}},
                {"name": "groups", "intValue": "1"}],
       "outputTypes": )",
                                 out_type, R"(},
      {"name": "scaled", "op": "aten.mul.Tensor", "inputs": [3, 2], "outputs": [4],
       "outputTypes": )",
                                 out_type, R"(},
      {"name": "relu", "op": "aten.relu.default", "inputs": [4], "outputs": [5],
       "outputTypes": )",
                                 out_type, R"(}],
    "outputs": [5]})"));
}

// A convolution is one call through the runtime table, its batch symbolic;
// what follows it is one pass over its output.
TEST(PipelineTest, AConvolutionCallsTheRuntimeAndItsTailIsOnePass) {
  const GeneratedCode code = Generate(Convolution());
  const std::string source = Stage(code, "C++");
  EXPECT_NE(source.find("const kiln_conv conv = {2, symbols[0], 4, 8, 1,\n"
                        "      {9, 9}, {5, 5}, {3, 3},\n"
                        "      {2, 2}, {1, 1}, {1, 1},\n"
                        "      {324, 81, 9, 1}, {36, 9, 3, 1}, {200, 25, 5, 1}, 0};"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("if (rt->conv_f32(rt->context, &conv, "), std::string::npos) << source;
  const std::string kernels = Stage(code, "kernels");
  EXPECT_NE(kernels.find("kernel 0: extern conv -> %3"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("kernel 1: pointwise %5 float32[s0, 8, 5, 5], fused with %4"),
            std::string::npos)
      << kernels;
  EXPECT_EQ(kernels.find("kernel 2"), std::string::npos) << kernels;
}

// A transposed convolution is the same call with kiln_conv.transposed set,
// the weight in torch's [in, out / groups, kernel...] order; what follows
// it is one pass over its output too.
TEST(PipelineTest, ATransposedConvolutionCallsTheRuntimeWithTransposedSet) {
  // (9 - 1) * 2 - 2 * 1 + (3 - 1) + 1 + 1 = 18
  const GeneratedCode code =
      Generate(Convolution({/*transposed=*/true, /*weight0=*/4, /*weight1=*/8,
                            /*output_padding=*/1, /*out=*/18}));
  const std::string source = Stage(code, "C++");
  EXPECT_NE(source.find("const kiln_conv conv = {2, symbols[0], 4, 8, 1,\n"
                        "      {9, 9}, {18, 18}, {3, 3},\n"
                        "      {2, 2}, {1, 1}, {1, 1},\n"
                        "      {324, 81, 9, 1}, {72, 9, 3, 1}, {2592, 324, 18, 1}, 1};"),
            std::string::npos)
      << source;
  const std::string kernels = Stage(code, "kernels");
  EXPECT_NE(kernels.find("kernel 0: extern conv_transpose -> %3"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("kernel 1: pointwise %5 float32[s0, 8, 18, 18], fused with %4"),
            std::string::npos)
      << kernels;
  EXPECT_EQ(kernels.find("kernel 2"), std::string::npos) << kernels;
}

TEST(PipelineTest, ConvolutionsNameWhatDoesNotFit) {
  auto error = [](const kiln::v1::Graph& graph) {
    auto prepared = PrepareGraph(graph);
    return prepared.ok() ? std::string("ok") : std::string(prepared.status().message());
  };
  const std::string misfit =
      error(Convolution({/*transposed=*/false, /*weight0=*/8, /*weight1=*/3}));
  EXPECT_NE(misfit.find("a weight [8, 3, 3, 3] in 1 groups does not fit an input [s0, 4, 9, 9]"),
            std::string::npos)
      << misfit;
  // A forward convolution's weight [8, 4, ...] is [in, out] the wrong way
  // round for a transposed one.
  const std::string transposed =
      error(Convolution({/*transposed=*/true, /*weight0=*/8, /*weight1=*/4,
                         /*output_padding=*/0, /*out=*/18}));
  EXPECT_NE(transposed.find("a transposed weight [8, 4, 3, 3] in 1 groups does not fit an input "
                            "[s0, 4, 9, 9]: the input needs weight[0] channels"),
            std::string::npos)
      << transposed;
  const std::string output_padding = error(Convolution({/*transposed=*/true, /*weight0=*/4,
                                                        /*weight1=*/8, /*output_padding=*/2,
                                                        /*out=*/19}));
  EXPECT_NE(output_padding.find("output_padding 2 of spatial dim 0 must be smaller than its "
                                "stride 2 or its dilation 1"),
            std::string::npos)
      << output_padding;
}

// A one-node float32 graph: `inputs` shapes, `op` with `args` (JSON), one
// result of shape `result`; its preparation's error message, or "ok".
std::string OneNodeError(const std::vector<std::string>& inputs, const std::string& op,
                         const std::string& args, const std::string& result,
                         const std::string& dtype = "FLOAT32") {
  auto type = [&](const std::string& sizes) {
    return absl::StrCat(R"({"dtype": ")", dtype, R"(", "sizes": [)", sizes, "]}");
  };
  std::vector<std::string> declared, ids;
  for (size_t i = 0; i < inputs.size(); ++i) {
    declared.push_back(absl::StrCat(R"({"value": )", i, R"(, "name": "x)", i, R"(", "type": )",
                                    type(inputs[i]), "}"));
    ids.push_back(absl::StrCat(i));
  }
  const size_t out = inputs.size();
  const kiln::v1::Graph graph = ParseGraph(
      absl::StrCat(R"({"name": "one", "inputs": [)", absl::StrJoin(declared, ", "),
                   R"(], "nodes": [{"name": "n", "op": ")", op, R"(", "inputs": [)",
                   absl::StrJoin(ids, ", "), R"(], "args": [)", args, R"(], "outputs": [)", out,
                   R"(], "outputTypes": [)", type(result), R"(]}], "outputs": [)", out, "]}"));
  auto prepared = PrepareGraph(graph);
  return prepared.ok() ? std::string("ok") : std::string(prepared.status().message());
}

TEST(PipelineTest, PixelShuffleOfNoChannelsIsEmpty) {
  const std::string c = R"({"constant": )";
  EXPECT_EQ(
      OneNodeError({c + "1}, " + c + "0}, " + c + "2}, " + c + "2}"}, "aten.pixel_shuffle.default",
                   R"({"name": "upscale_factor", "intValue": "2"})",
                   c + "1}, " + c + "0}, " + c + "4}, " + c + "4}"),
      "ok");
}

TEST(PipelineTest, SoftmaxOverAnEmptyDimOfAnEmptyTensorIsEmpty) {
  const std::string c = R"({"constant": )";
  const std::string empty = c + "5}, " + c + "0}, " + c + "0}";
  EXPECT_EQ(OneNodeError({empty}, "aten._softmax.default",
                         R"({"name": "dim", "intValue": "2"}, )"
                         R"({"name": "half_to_float", "boolValue": false})",
                         empty),
            "ok");
  EXPECT_EQ(OneNodeError({c + "5}, " + c + "0}"}, "aten.amax.default",
                         R"({"name": "dim", "intList": {"values": ["1"]}})", c + "5}"),
            "node 0 'n' (aten.amax.default): cannot take max over dim 1 of size 0 (no identity)");
}

TEST(PipelineTest, TheOpsFromTheProbeNameWhatDoesNotFit) {
  const std::string c = R"({"constant": )";
  EXPECT_EQ(
      OneNodeError({c + "1}, " + c + "6}, " + c + "2}, " + c + "2}"}, "aten.pixel_shuffle.default",
                   R"({"name": "upscale_factor", "intValue": "2"})",
                   c + "1}, " + c + "1}, " + c + "4}, " + c + "4}"),
      "node 0 'n' (aten.pixel_shuffle.default): the channels of float32[1, 6, 2, 2] (dim 1) "
      "are not a multiple of the upscale factor squared, 4");
  EXPECT_EQ(OneNodeError({c + "1}, " + c + "1}, " + c + "5}, " + c + "4}"},
                         "aten.pixel_unshuffle.default",
                         R"({"name": "downscale_factor", "intValue": "2"})",
                         c + "1}, " + c + "4}, " + c + "2}, " + c + "2}"),
            "node 0 'n' (aten.pixel_unshuffle.default): the height and width of float32[1, 1, 5, "
            "4] are not multiples of the downscale factor 2");
  EXPECT_EQ(OneNodeError({c + "2}, " + c + "4}, " + c + "5}", c + "3}"}, "aten.prelu.default", "",
                         c + "2}, " + c + "4}, " + c + "5}"),
            "node 0 'n' (aten.prelu.default): weight float32[3] is neither one value nor one per "
            "channel (dim 1) of the input float32[2, 4, 5]");
  EXPECT_EQ(OneNodeError({c + "4}", c + "4}"}, "aten.div.Tensor_mode",
                         R"({"name": "rounding_mode", "stringValue": "round"})", c + "4}"),
            "node 0 'n' (aten.div.Tensor_mode): rounding_mode is not None, 'trunc' or 'floor'");
  EXPECT_EQ(OneNodeError({c + "4}", c + "4}"}, "aten.huber_loss.default",
                         R"({"name": "delta", "floatValue": 0})", ""),
            "node 0 'n' (aten.huber_loss.default): delta 0 is not positive");
  EXPECT_EQ(OneNodeError({c + "4}", c + "4}"}, "aten.smooth_l1_loss.default",
                         R"({"name": "beta", "floatValue": -1})", ""),
            "node 0 'n' (aten.smooth_l1_loss.default): beta -1 is negative");
  // Integers divide by nonzero constants only: eager raises on a zero
  // divisor, which a kernel cannot.
  EXPECT_EQ(OneNodeError({c + "4}", c + "4}"}, "aten.fmod.Tensor", "", c + "4}", "INT64"),
            "node 0 'n' (aten.fmod.Tensor): int64 operands are not supported yet");
  EXPECT_EQ(
      OneNodeError({c + "4}", c + "4}"}, "aten.floor_divide.default", "", c + "4}", "INT64"),
      "node 0 'n' (aten.floor_divide.default): an integer division by a tensor or a size: eager "
      "raises on a zero divisor, which a kernel cannot; divide by a constant, or in "
      "floating point");
  EXPECT_EQ(OneNodeError({c + "4}"}, "aten.floor_divide.default",
                         R"({"name": "other", "intValue": "0"})", c + "4}", "INT64"),
            "node 0 'n' (aten.floor_divide.default): an integer division by zero");
  EXPECT_EQ(OneNodeError({c + "4}"}, "aten.remainder.Scalar",
                         R"({"name": "other", "intValue": "3"})", c + "4}", "INT64"),
            "ok");
  EXPECT_EQ(OneNodeError({c + "4}"}, "aten.div.Tensor_mode",
                         R"({"name": "other", "intValue": "2"})", c + "4}", "INT64"),
            "node 0 'n' (aten.div.Tensor_mode): div with rounding_mode None divides integers "
            "into floats: trace torch.div(a, b)");
}

TEST(PipelineTest, FactoriesTakeSymbolicSizes) {
  const std::string json = R"({"name": "causal", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"symbol": "S"}, {"symbol": "S"}]}}],
    "nodes": [
      {"name": "ones", "op": "aten.ones.default", "outputs": [1],
       "args": [{"name": "size", "symIntList": {"values": [
                 {"terms": [{"coefficient": "1", "symbols": ["S"]}]},
                 {"terms": [{"coefficient": "1", "symbols": ["S"]}]}]}},
                {"name": "dtype", "dtypeValue": "BOOL"}],
       "outputTypes": [{"dtype": "BOOL", "sizes": [{"symbol": "S"}, {"symbol": "S"}]}]},
      {"name": "triu", "op": "aten.triu.default", "inputs": [1], "outputs": [2],
       "args": [{"name": "diagonal", "intValue": "1"}],
       "outputTypes": [{"dtype": "BOOL", "sizes": [{"symbol": "S"}, {"symbol": "S"}]}]},
      {"name": "mask", "op": "aten.masked_fill.Scalar", "inputs": [0, 2], "outputs": [3],
       "args": [{"name": "value", "floatValue": "-Infinity"}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "S"}, {"symbol": "S"}]}]},
      {"name": "positions", "op": "aten.arange.default", "outputs": [4],
       "args": [{"name": "end", "symInt": {"terms": [{"coefficient": "1", "symbols": ["S"]}]}}],
       "outputTypes": [{"dtype": "INT64", "sizes": [{"symbol": "S"}]}]},
      {"name": "add", "op": "aten.add.Tensor", "inputs": [3, 4], "outputs": [5],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "S"}, {"symbol": "S"}]}]}],
    "outputs": [5]})";
  const GeneratedCode code = Generate(ParseGraph(json));
  const std::string graph = Stage(code, "graph");
  EXPECT_NE(graph.find("%1 : bool[s0, s0] = aten.ones.default"), std::string::npos) << graph;
  EXPECT_NE(graph.find("%4 : int64[s0] = aten.arange.default"), std::string::npos) << graph;
}

// A table cut to a sequence's symbolic length (position ids, a causal mask:
// table[:S]) is a view of S rows when the relations keep S within the
// table; x[:, 0] selects in a symbolic dim when its smallest size has the
// index. Otherwise they are refused, saying what to state.
TEST(PipelineTest, SlicesToASymbolicLengthAndSelectsInASymbolicDimNeedTheirBounds) {
  auto graph = [](const std::string& relations, const std::string& index,
                  const std::string& start = R"({"name": "start", "intValue": "0"})") {
    return ParseGraph(R"({"name": "cut", "inputs": [
        {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"symbol": "S"}, {"constant": 8}]}},
        {"value": 1, "name": "table", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 64}, {"constant": 8}]}}],
      "nodes": [
        {"name": "cut", "op": "aten.slice.Tensor", "inputs": [1], "outputs": [2],
         "args": [{"name": "dim", "intValue": "0"}, )" +
                      start + R"(,
                  {"name": "end", "symInt": {"terms": [{"coefficient": "1", "symbols": ["S"]}]}}],
         "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "S"}, {"constant": 8}]}]},
        {"name": "add", "op": "aten.add.Tensor", "inputs": [0, 2], "outputs": [3],
         "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "S"}, {"constant": 8}]}]},
        {"name": "first", "op": "aten.select.int", "inputs": [3], "outputs": [4],
         "args": [{"name": "dim", "intValue": "0"}, {"name": "index", "intValue": ")" +
                      index + R"("}],
         "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 8}]}]}],
      "outputs": [4], "relations": [)" +
                      relations + "]}");
  };
  const std::string within = R"({"range": {"symbol": "S", "max": "64"}})";
  const GeneratedCode code = Generate(graph(within, "0"));
  EXPECT_NE(Stage(code, "graph").find("%2 : float32[s0, 8] = aten.slice.Tensor"),
            std::string::npos);
  EXPECT_EQ(PrepareGraph(graph("", "0")).status(),
            absl::InvalidArgumentError(
                "node 0 'cut' (aten.slice.Tensor): slices dim 0 (size 64) to S, which the "
                "graph's relations do not keep within 64: state \"S <= 64\" in its relations "
                "(the tracer does when it makes such a slice)"));
  EXPECT_EQ(PrepareGraph(graph(R"({"range": {"symbol": "S", "max": "65"}})", "0")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PrepareGraph(graph(within, "2")).status(),
            absl::InvalidArgumentError(
                "node 2 'first' (aten.select.int): selects index 2 of dim 0, whose size S may "
                "be as small as 2: state a larger lower bound in the graph's relations"));
  EXPECT_TRUE(
      PrepareGraph(graph(within + R"(, {"range": {"symbol": "S", "min": "3"}})", "2")).ok());
  EXPECT_EQ(PrepareGraph(graph(within, "-1")).status().code(), absl::StatusCode::kUnimplemented);
  // An argument that takes an int given a symbolic size says what to do.
  EXPECT_EQ(PrepareGraph(graph(within, "0",
                               R"({"name": "step", "symInt": {"terms": [{"coefficient": "1",
                                   "symbols": ["S"]}]}})"))
                .status(),
            absl::UnimplementedError(
                "node 0 'cut' (aten.slice.Tensor): argument 'step' follows a symbolic size, and "
                "aten.slice.Tensor takes an int there: trace the dims it follows static, or "
                "compute it outside the function and pass the result as an input"));
}

// A factory size entry that is no size, and an arange whose count is not
// its symbolic end, are refused naming the node and what is unsupported.
TEST(PipelineTest, FactorySizesThatAreNoSizeAreRefused) {
  auto factory = [](const std::string& op, const std::string& args, const std::string& sizes) {
    return ParseGraph(R"({"name": "factory", "inputs": [
        {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"symbol": "S"}]}}],
      "nodes": [{"name": "made", "op": ")" +
                      op + R"(", "outputs": [1], "args": )" + args + R"(,
        "outputTypes": [{"dtype": "INT64", "sizes": )" +
                      sizes + R"(}]}],
      "outputs": [1]})");
  };
  const std::string s = R"({"terms": [{"coefficient": "1", "symbols": ["S"]}]})";
  const std::string s_plus_one =
      R"({"terms": [{"coefficient": "1", "symbols": ["S"]}, {"coefficient": "1"}]})";
  EXPECT_EQ(
      PrepareGraph(factory("aten.ones.default",
                           R"([{"name": "size", "symIntList": {"values": [)" + s_plus_one + "]}}]",
                           R"([{"symbol": "S"}])"))
          .status(),
      absl::UnimplementedError("node 0 'made' (aten.ones.default): size entry 0 is 1 + s0, "
                               "not a size (a constant times symbols, like 2*s0)"));
  EXPECT_EQ(
      PrepareGraph(factory("aten.zeros.default",
                           R"([{"name": "size", "intList": {"values": ["4", "-1"]}}])",
                           R"([{"constant": 4}, {"constant": 1}])"))
          .status(),
      absl::InvalidArgumentError(
          "node 0 'made' (aten.zeros.default): size entry 1 is -1: a size cannot be negative"));
  EXPECT_EQ(PrepareGraph(factory("aten.arange.start",
                                 R"([{"name": "start", "intValue": "1"},
                                     {"name": "end", "symInt": )" +
                                     s + "}]",
                                 R"([{"symbol": "S"}])"))
                .status(),
            absl::UnimplementedError("node 0 'made' (aten.arange.start): arange from 1 by 1 to a "
                                     "symbolic end (s0): a symbolic end needs start 0 and step 1"));
  EXPECT_EQ(PrepareGraph(factory("aten.arange.start",
                                 R"([{"name": "start", "symInt": )" + s +
                                     R"(}, {"name": "end", "intValue": "9"}])",
                                 R"([{"symbol": "S"}])"))
                .status(),
            absl::UnimplementedError("node 0 'made' (aten.arange.start): arange with a symbolic "
                                     "start (s0): only its end may be symbolic"));
}

// A size argument naming a symbol that no input size binds could never be
// given a value: refused at import, naming the node and the symbol.
TEST(PipelineTest, ASymbolNoInputBindsIsRefused) {
  const std::string json = R"({"name": "unbound", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 1}, {"constant": 4}]}}],
    "nodes": [
      {"name": "expand", "op": "aten.expand.default", "inputs": [0], "outputs": [1],
       "args": [{"name": "size", "symIntList": {"values": [
                 {"terms": [{"coefficient": "1", "symbols": ["T"]}]}, {"terms": [{"coefficient": "4"}]}]}}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "T"}, {"constant": 4}]}]}],
    "outputs": [1]})";
  kiln::v1::Graph graph = ParseGraph(json);
  EXPECT_EQ(PrepareGraph(graph).status(),
            absl::InvalidArgumentError("node 0 'expand' (aten.expand.default): argument 'size' "
                                       "names symbol 'T', which no input size uses"));
  // Unless the node is dead: it is dropped before anything needs T.
  graph.set_outputs(0, 0);
  EXPECT_TRUE(PrepareGraph(graph).ok()) << PrepareGraph(graph).status();
}

// view(x: [S, B, 4], [-1, 4]) is [S*B, 4]; specializing S keeps B in the
// product (3*B at S = 3), and S = 0 empties it.
TEST(PipelineTest, SpecializingASymbolInsideAProduct) {
  const kiln::v1::Graph graph = ParseGraph(R"({"name": "flat", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32",
       "sizes": [{"symbol": "S"}, {"symbol": "B"}, {"constant": 4}]}}],
    "nodes": [{"name": "view", "op": "aten.view.default", "inputs": [0], "outputs": [1],
      "args": [{"name": "size", "intList": {"values": ["-1", "4"]}}],
      "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "S", "times": ["B"]}, {"constant": 4}]}]}],
    "outputs": [1]})");
  auto prepared = PrepareGraph(graph);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_NE(ir::ToString(*prepared).find("%1 : float32[s0*s1, 4] = aten.view.default"),
            std::string::npos)
      << ir::ToString(*prepared);
  const kiln::v1::Graph three = Specialize(graph, {{"S", 3}});
  EXPECT_EQ(three.nodes(0).output_types(0).sizes(0).ShortDebugString(),
            "symbol: \"B\" multiplier: 3");
  EXPECT_TRUE(PrepareGraph(three).ok()) << PrepareGraph(three).status();
  const kiln::v1::Graph empty = Specialize(graph, {{"S", 0}});
  EXPECT_EQ(empty.nodes(0).output_types(0).sizes(0).ShortDebugString(), "constant: 0");
}

// add(x: [a, 64], y: [b, 64]): only valid when the graph states a == b.
kiln::v1::Graph SymbolicAdd(const std::string& relations_json) {
  const std::string json = R"({"name": "add2", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"symbol": "a"}, {"constant": 64}]}},
      {"value": 1, "name": "y", "type": {"dtype": "FLOAT32", "sizes": [{"symbol": "b"}, {"constant": 64}]}}],
    "nodes": [{"name": "add", "op": "aten.add.Tensor", "inputs": [0, 1], "outputs": [2],
      "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"symbol": "a"}, {"constant": 64}]}]}],
    "outputs": [2], "relations": )" +
                           relations_json + "}";
  return ParseGraph(json);
}

TEST(PipelineTest, RelationsMergeEqualSymbolsAndBoundTheRest) {
  EXPECT_EQ(PrepareGraph(SymbolicAdd("[]")).status(),
            absl::InvalidArgumentError("node 0 'add' (aten.add.Tensor): shapes [s0, 64] and "
                                       "[s1, 64] cannot be broadcast together"));
  auto graph = PrepareGraph(SymbolicAdd(R"([{"equal": {"lhs": "a", "rhs": "b"}},
      {"range": {"symbol": "b", "min": 1, "max": 512}},
      {"divisible": {"symbol": "a", "divisor": 4}}, {"divisible": {"symbol": "b", "divisor": 6}}])"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(graph->symbols, std::vector<std::string>{"s0"});
  EXPECT_EQ(graph->bounds[0].min, 2) << "symbolic dims are >= 2 whatever the range says";
  EXPECT_EQ(graph->bounds[0].max, 512);
  EXPECT_EQ(graph->bounds[0].divisor, 12);
  EXPECT_NE(ir::ToString(*graph).find("symbol s0: 2 <= s0 <= 512, s0 % 12 == 0\n"),
            std::string::npos);
  // Canonical guards: per symbol a range, then a divisor; no equalities.
  const kiln::v1::Guards guards = ExactGuards(*graph);
  ASSERT_EQ(guards.relations_size(), 2);
  EXPECT_EQ(guards.relations(0).ShortDebugString(), "range { symbol: \"s0\" min: 2 max: 512 }");
  EXPECT_EQ(guards.relations(1).ShortDebugString(), "divisible { symbol: \"s0\" divisor: 12 }");
  // Requested guards must state the same relations, in any order.
  kiln::v1::Guards reordered = guards;
  reordered.mutable_relations()->SwapElements(0, 1);
  EXPECT_TRUE(ResolveGuards(*graph, reordered).ok());
  reordered.mutable_relations(0)->mutable_divisible()->set_divisor(4);
  EXPECT_EQ(ResolveGuards(*graph, reordered).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(PipelineTest, BadRelationsAreNamed) {
  EXPECT_EQ(PrepareGraph(SymbolicAdd(R"([{"equal": {"lhs": "a", "rhs": "c"}}])")).status(),
            absl::InvalidArgumentError("relation 0 names symbol 'c', which no input size uses"));
  EXPECT_EQ(PrepareGraph(SymbolicAdd(R"([{"equal": {"lhs": "a", "rhs": "b"}},
      {"range": {"symbol": "a", "min": 5, "max": 3}}])"))
                .status(),
            absl::InvalidArgumentError("relation 1: 5 <= a <= 3 admits no size >= 2"));
  EXPECT_EQ(PrepareGraph(SymbolicAdd(R"([{"divisible": {"symbol": "a", "divisor": 0}}])")).status(),
            absl::InvalidArgumentError("relation 0: a % 0 == 0 needs a positive divisor"));
  EXPECT_EQ(PrepareGraph(SymbolicAdd(R"([{}])")).status(),
            absl::InvalidArgumentError("relation 0 is empty"));
  EXPECT_EQ(PrepareGraph(SymbolicAdd(R"([{"equal": {"lhs": "a", "rhs": "b"}},
      {"range": {"symbol": "a", "min": 5, "max": 7}}, {"divisible": {"symbol": "b", "divisor": 8}}])"))
                .status(),
            absl::InvalidArgumentError("the relations on symbol 'a' admit no size"));
}

TEST(PipelineTest, SpecializingASymbolFixesItsEqualsAndDropsTheirRelations) {
  const kiln::v1::Graph graph = SymbolicAdd(R"([{"equal": {"lhs": "a", "rhs": "b"}},
      {"divisible": {"symbol": "b", "divisor": 4}}])");
  const kiln::v1::Graph fixed = Specialize(graph, {{"a", 1}});
  EXPECT_EQ(fixed.relations_size(), 0);
  EXPECT_EQ(fixed.inputs(1).type().sizes(0).ShortDebugString(), "constant: 1");
  auto prepared = PrepareGraph(fixed);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_TRUE(prepared->symbols.empty());
  // Re-typed to exact sizes, the relations go; kept symbolic, they stay.
  kiln::v1::Dim eight, sixty_four;
  eight.set_constant(8);
  sixty_four.set_constant(64);
  auto exact = Retype(graph, {{eight, sixty_four}, {eight, sixty_four}});
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->relations_size(), 0);
  auto same = Retype(
      graph, {{graph.inputs(0).type().sizes().begin(), graph.inputs(0).type().sizes().end()},
              {graph.inputs(1).type().sizes().begin(), graph.inputs(1).type().sizes().end()}});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->relations_size(), 2);
}

// (x * 2).sum(1) traced with x transposed: [3, 5] at strides [1, 3].
// Re-typed with layouts, the input takes the strides given (none:
// contiguous; a stride 0; a symbolic stride) and the nodes' types follow;
// re-typed with sizes alone, unchanged sizes keep the declared strides.
TEST(PipelineTest, RetypeLaysInputsOutAsGiven) {
  const kiln::v1::Graph graph = ParseGraph(R"({"name": "t", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT64",
       "sizes": [{"constant": 3}, {"constant": 5}], "strides": [{"constant": 1}, {"constant": 3}]}}],
    "nodes": [
      {"name": "mul", "op": "aten.mul.Tensor", "inputs": [0], "outputs": [1],
       "args": [{"name": "other", "floatValue": 2}],
       "outputTypes": [{"dtype": "FLOAT64", "sizes": [{"constant": 3}, {"constant": 5}],
                        "strides": [{"constant": 1}, {"constant": 3}]}]},
      {"name": "sum", "op": "aten.sum.dim_IntList", "inputs": [1], "outputs": [2],
       "args": [{"name": "dim", "intList": {"values": ["1"]}}],
       "outputTypes": [{"dtype": "FLOAT64", "sizes": [{"constant": 3}]}]}],
    "outputs": [2]})");
  auto dim = [](int64_t constant) {
    kiln::v1::Dim dim;
    dim.set_constant(constant);
    return dim;
  };
  kiln::v1::Dim symbol;
  symbol.set_symbol("a");
  const auto strides_of = [](const kiln::v1::Graph& g, int node) {
    const kiln::v1::TensorType& type =
        node < 0 ? g.inputs(0).type() : g.nodes(node).output_types(0);
    std::string text;
    for (const kiln::v1::Dim& stride : type.strides()) {
      absl::StrAppend(&text,
                      stride.has_symbol() ? stride.symbol() : absl::StrCat(stride.constant()), " ");
    }
    return text;
  };
  auto contiguous = Retype(graph, std::vector<InputLayout>{{{dim(3), dim(5)}, {}}});
  ASSERT_TRUE(contiguous.ok()) << contiguous.status();
  EXPECT_EQ(strides_of(*contiguous, -1), "");
  EXPECT_EQ(strides_of(*contiguous, 0), "5 1 ") << "the op table's type, not the trace's";
  auto expanded = Retype(graph, std::vector<InputLayout>{{{dim(3), dim(5)}, {dim(0), dim(1)}}});
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  EXPECT_EQ(strides_of(*expanded, -1), "0 1 ");
  EXPECT_TRUE(PrepareGraph(*expanded).ok());
  auto symbolic = Retype(graph, std::vector<InputLayout>{{{symbol, dim(5)}, {dim(1), symbol}}});
  ASSERT_TRUE(symbolic.ok()) << symbolic.status();
  EXPECT_EQ(strides_of(*symbolic, -1), "1 a ");
  EXPECT_TRUE(PrepareGraph(*symbolic).ok()) << PrepareGraph(*symbolic).status();
  auto same = Retype(graph, std::vector<std::vector<kiln::v1::Dim>>{{dim(3), dim(5)}});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(strides_of(*same, -1), "1 3 ");
  auto resized = Retype(graph, std::vector<std::vector<kiln::v1::Dim>>{{dim(4), dim(5)}});
  ASSERT_TRUE(resized.ok()) << resized.status();
  EXPECT_EQ(strides_of(*resized, -1), "");
  EXPECT_EQ(Retype(graph, std::vector<InputLayout>{}).status(),
            absl::InvalidArgumentError("layouts for 0 inputs; the graph has 1"));
}

// x.split(2) traced at 4 rows has two results; at 6 rows it would have
// three, which the graph has no values for.
TEST(PipelineTest, RetypeNamesASplitWhoseResultCountChanges) {
  const kiln::v1::Graph graph = ParseGraph(R"({"name": "halves", "inputs": [
      {"value": 0, "name": "x", "type": {"dtype": "FLOAT32", "sizes": [{"constant": 4}]}}],
    "nodes": [{"name": "split", "op": "aten.split.Tensor", "inputs": [0], "outputs": [1, 2],
       "args": [{"name": "split_size", "intValue": "2"}],
       "outputTypes": [{"dtype": "FLOAT32", "sizes": [{"constant": 2}]},
                       {"dtype": "FLOAT32", "sizes": [{"constant": 2}]}]}],
    "outputs": [1, 2]})");
  kiln::v1::Dim three, six;
  three.set_constant(3);
  six.set_constant(6);
  auto fewer = Retype(graph, {{three}});
  ASSERT_TRUE(fewer.ok()) << fewer.status();
  EXPECT_EQ(fewer->nodes(0).output_types(1).sizes(0).constant(), 1);
  EXPECT_EQ(Retype(graph, {{six}}).status(),
            absl::InvalidArgumentError(
                "node 0 'split' (aten.split.Tensor): gives 3 results at the new sizes, not the 2 "
                "the graph was traced with; trace the model at these sizes"));
}

// One pointwise node of `op` on float vectors of 8 (`inputs` of them) in
// `dtype`, its source.
std::string PointwiseSource(const std::string& op, int inputs, const std::string& dtype,
                            const std::string& args = "") {
  std::vector<std::string> declared, ids;
  for (int i = 0; i < inputs; ++i) {
    declared.push_back(absl::Substitute(
        R"({"value": $0, "name": "x$0", "type": {"dtype": "$1", "sizes": [{"constant": 8}]}})", i,
        dtype));
    ids.push_back(absl::StrCat(i));
  }
  return Generate(
             ParseGraph(absl::Substitute(
                 R"({"name": "one", "inputs": [$0], "nodes": [{"name": "n", "op": "$1",
                          "inputs": [$2], "args": [$3], "outputs": [$4],
                          "outputTypes": [{"dtype": "$5", "sizes": [{"constant": 8}]}]}],
                          "outputs": [$4]})",
                 absl::StrJoin(declared, ", "), op, absl::StrJoin(ids, ", "), args, inputs, dtype)))
      .source;
}

// The special functions' headers are pasted only into a source that calls
// one, and compute in double: float32 operands widened, the result rounded.
TEST(PipelineTest, SpecialFunctionsPasteTheirHeadersOnlyWhereCalled) {
  const std::string lgamma = PointwiseSource("aten.lgamma.default", 1, "FLOAT32");
  EXPECT_NE(lgamma.find("= ((float)kiln_special_lgamma((double)v"), std::string::npos) << lgamma;
  for (const char* guard :
       {"#define KILN_SPECIAL_H_", "#define KILN_BESSEL_H_", "#define KILN_POLYNOMIALS_H_"}) {
    EXPECT_NE(lgamma.find(guard), std::string::npos) << guard;
  }
  const std::string exp = PointwiseSource("aten.exp.default", 1, "FLOAT32");
  EXPECT_EQ(exp.find("KILN_SPECIAL_H_"), std::string::npos) << exp;
  EXPECT_EQ(exp.find("kiln_special_"), std::string::npos) << exp;
  // Eager's Hermite polynomials are NaN past degree 128 in float32, 512 in
  // float64.
  EXPECT_NE(PointwiseSource("aten.special_hermite_polynomial_h.default", 2, "FLOAT32")
                .find(", (double)v1, 128))"),
            std::string::npos);
  EXPECT_NE(PointwiseSource("aten.special_hermite_polynomial_h.default", 2, "FLOAT64")
                .find(", (double)v1, 512))"),
            std::string::npos);
  // polygamma(n >= 2) is (-1)^(n+1) n! zeta(n + 1, x).
  const std::string polygamma =
      PointwiseSource("aten.polygamma.default", 1, "FLOAT64", R"({"name": "n", "intValue": "3"})");
  EXPECT_NE(polygamma.find("kiln_special_zeta((double)0x1p+2, (double)v0))"), std::string::npos)
      << polygamma;
  EXPECT_NE(polygamma.find("0x1.8p+2 * "), std::string::npos) << polygamma;
}

TEST(PipelineTest, PolygammaOfANegativeOrderIsRefused) {
  EXPECT_EQ(OneNodeError({R"({"constant": 4})"}, "aten.polygamma.default",
                         R"({"name": "n", "intValue": "-1"})", R"({"constant": 4})"),
            "node 0 'n' (aten.polygamma.default): polygamma's n is -1: it must be 0 or more (as "
            "in eager PyTorch)");
}

}  // namespace
}  // namespace kiln
