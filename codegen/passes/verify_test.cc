// Verify's refusals through PrepareGraph: each names the node, the op and
// the schema, argument or type it breaks.
#include "codegen/passes/verify.h"

#include "absl/strings/str_cat.h"
#include "codegen/pipeline_testing.h"
#include "codegen/prepare.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(VerifyTest, ErrorsNameTheNode) {
  kiln::v1::Graph unknown = ReadExample("f");
  unknown.mutable_nodes(2)->set_op("aten.frobnicate.default");
  EXPECT_EQ(
      PrepareGraph(unknown).status(),
      absl::UnimplementedError("node 2 'add' (aten.frobnicate.default): op "
                               "'aten.frobnicate.default' is not supported (see docs/OPS.md)"));

  // Every unsupported op at once, each with its first node and how many more.
  kiln::v1::Graph several = ReadExample("f");
  several.mutable_nodes(0)->set_op("aten.nonzero.default");
  several.mutable_nodes(1)->set_op("aten.linalg_svd.default");
  several.mutable_nodes(2)->set_op("aten.nonzero.default");
  EXPECT_EQ(PrepareGraph(several).status(),
            absl::UnimplementedError(
                "2 ops are not supported (see docs/OPS.md): 'aten.nonzero.default' "
                "(node 0 'permute' (aten.nonzero.default) and 1 more), "
                "'aten.linalg_svd.default' (node 1 'mm' (aten.linalg_svd.default))"));

  kiln::v1::Graph malformed = ReadExample("f");
  malformed.mutable_nodes(2)->set_op("add");
  EXPECT_EQ(PrepareGraph(malformed).status(),
            absl::InvalidArgumentError("node 2 'add' (add): 'add' is not an ATen op name "
                                       "(expected aten.<op>.<overload>)"));

  // A library's own op (torch.library) is an op Kiln lacks, not a malformed name.
  kiln::v1::Graph custom = ReadExample("f");
  custom.mutable_nodes(2)->set_op("mylib.mix.default");
  EXPECT_EQ(PrepareGraph(custom).status(),
            absl::UnimplementedError("node 2 'add' (mylib.mix.default): op 'mylib.mix.default' is "
                                     "not supported (see docs/OPS.md)"));

  kiln::v1::Graph arity = ReadExample("f");
  arity.mutable_nodes(1)->mutable_inputs()->RemoveLast();
  EXPECT_EQ(
      PrepareGraph(arity).status(),
      absl::InvalidArgumentError("node 1 'mm' (aten.mm.default): expects 2 tensor inputs, got 1"));

  // An optional tensor the arguments say is present needs its input: a
  // layer norm with its bias and no weight input says so (`weight: None`).
  const std::string f32_8 = R"({"dtype": "FLOAT32", "sizes": [{"constant": 8}]})";
  const std::string f32_2x8 =
      R"({"dtype": "FLOAT32", "sizes": [{"constant": 2}, {"constant": 8}]})";
  const std::string f32_2x1 =
      R"({"dtype": "FLOAT32", "sizes": [{"constant": 2}, {"constant": 1}]})";
  const kiln::v1::Graph bias_only = ParseGraph(absl::StrCat(
      R"({"name": "ln", "inputs": [{"value": 0, "name": "x", "type": )", f32_2x8,
      R"(}, {"value": 1, "name": "b", "type": )", f32_8,
      R"(}], "nodes": [{"name": "ln", "op": "aten.native_layer_norm.default", "inputs": [0, 1],
          "args": [{"name": "normalized_shape", "intList": {"values": ["8"]}},
                   {"name": "eps", "floatValue": 1e-05}],
          "outputs": [2, 3, 4], "outputTypes": [)",
      f32_2x8, ", ", f32_2x1, ", ", f32_2x1, R"(]}], "outputs": [2]})"));
  EXPECT_EQ(PrepareGraph(bias_only).status(),
            absl::InvalidArgumentError(
                "node 0 'ln' (aten.native_layer_norm.default): has 2 tensor inputs, but its "
                "arguments say 3 (2 of 2 optional tensors present)"));

  // normalized_shape must name the input's last dims, as eager requires
  // (a 0-dim input has none).
  const auto layer_norm_of = [](const std::string& type) {
    return ParseGraph(absl::StrCat(
        R"({"name": "ln", "inputs": [{"value": 0, "name": "x", "type": )", type,
        R"(}], "nodes": [{"name": "ln", "op": "aten.native_layer_norm.default", "inputs": [0],
            "args": [{"name": "normalized_shape", "intList": {"values": ["8"]}},
                     {"name": "weight", "none": true}, {"name": "bias", "none": true},
                     {"name": "eps", "floatValue": 1e-05}],
            "outputs": [1, 2, 3], "outputTypes": [)",
        type, ", ", type, ", ", type, R"(]}], "outputs": [1]})"));
  };
  EXPECT_EQ(PrepareGraph(layer_norm_of(R"({"dtype": "FLOAT32"})")).status(),
            absl::InvalidArgumentError(
                "node 0 'ln' (aten.native_layer_norm.default): normalized_shape [8] must name 1 "
                "to 0 of the input's last dims (it has 0)"));
  EXPECT_EQ(PrepareGraph(layer_norm_of(R"({"dtype": "FLOAT32", "sizes": [{"constant": 8},
                                                                         {"constant": 4}]})"))
                .status(),
            absl::InvalidArgumentError("node 0 'ln' (aten.native_layer_norm.default): "
                                       "normalized_shape [8] does not match the input's dim 1, "
                                       "of size 4"));

  kiln::v1::Graph shape = ReadExample("f");
  shape.mutable_nodes(3)->mutable_output_types(0)->mutable_sizes(0)->set_constant(32);
  EXPECT_EQ(PrepareGraph(shape).status(),
            absl::InvalidArgumentError("node 3 'relu' (aten.relu.default): result 0 is declared "
                                       "float32[32, 64] but its inputs imply float32[64, 64]"));

  kiln::v1::Graph cycle = ReadExample("f");
  cycle.mutable_nodes(1)->set_inputs(1, 4);
  EXPECT_EQ(PrepareGraph(cycle).status(),
            absl::InvalidArgumentError(
                "node 1 'mm' (aten.mm.default) uses value 4 before node 3 'relu' "
                "(aten.relu.default) defines it (a cycle, or nodes not in topological order)"));

  kiln::v1::Graph dangling = ReadExample("f");
  dangling.mutable_nodes(1)->set_inputs(1, 99);
  EXPECT_EQ(PrepareGraph(dangling).status(),
            absl::InvalidArgumentError(
                "node 1 'mm' (aten.mm.default) uses value 99, which no input or node defines"));

  // Kiln's own ops skip checks a user's graph needs (an alias's bounds).
  kiln::v1::Graph internal = ReadExample("f");
  internal.mutable_nodes(1)->set_op("kiln.mm.default");
  EXPECT_EQ(PrepareGraph(internal).status(),
            absl::InvalidArgumentError("node 1 'mm' (kiln.mm.default): 'kiln.mm.default' is "
                                       "internal to Kiln, not an ATen op"));
}

}  // namespace
}  // namespace kiln
