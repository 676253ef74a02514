// Single-query attention: aten._scaled_dot_product_flash_attention_for_cpu
// with one query per (batch, head), as a decoding step asks, becomes one
// extern call of kiln_attention_f32 (codegen/emit/kiln_attention.h, pasted
// into the generated source): one pass over the keys with an online
// softmax, rows and ranges of keys spread across the runtime's threads.
//
// The mask is eager's: what F.scaled_dot_product_attention makes of a
// boolean mask, 0 where a key is kept and -inf where not, or any additive
// float mask. A key whose mask entry is -inf contributes exp(-inf) = 0 to
// every sum, so the kernel never reads its key or value. A mask that is a
// prefix set by a position or length tensor (`arange(n) <= position`,
// `arange(n) < lengths[b]`) becomes kiln.attention_to_length
// (passes/attention_lengths.h): the kernel reads the position and stops
// there, so a step at position p reads p + 1 keys and values and no mask.
// The tracer keeps the op for the cases this rule takes
// (kiln/_decompositions.py); it decomposes the others (several queries,
// dropout, causal, other dtypes) into GEMMs and a softmax.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::Dim;
using ir::DType;

constexpr int64_t kMaxValueWidth = 1024;  // kiln_attention.h's KILN_ATTENTION_MAX_WIDTH

// The results of attention of `query` over `key` and `value` (inputs 0..2).
absl::StatusOr<std::vector<ir::TensorType>> InferQueryKeyValue(const InputTypes& inputs) {
  const ir::TensorType &query = *inputs[0], &key = *inputs[1], &value = *inputs[2];
  for (int i = 0; i < 3; ++i) {
    if (inputs[i]->dtype != DType::kFloat32) {
      return absl::UnimplementedError(absl::StrCat(
          "single-query attention takes float32 tensors, got ", ir::DTypeName(inputs[i]->dtype)));
    }
  }
  if (query.rank() != 4 || key.rank() != 4 || value.rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("expects query, key and value of rank 4 ([batch, heads, length, width]), got ",
                     Shape(query), ", ", Shape(key), " and ", Shape(value)));
  }
  if (query.sizes[2] != Dim::Constant(1)) {
    return absl::UnimplementedError(
        absl::StrCat("attention of ", Shape(query),
                     ": Kiln lowers one query per head (a decoding step); "
                     "trace it through kiln, which decomposes the others"));
  }
  for (int d : {0, 1}) {
    if (key.sizes[d] != query.sizes[d] || value.sizes[d] != query.sizes[d]) {
      return absl::InvalidArgumentError(absl::StrCat("query ", Shape(query), ", key ", Shape(key),
                                                     " and value ", Shape(value),
                                                     " must agree in batch and heads"));
    }
  }
  if (key.sizes[3] != query.sizes[3] || value.sizes[2] != key.sizes[2]) {
    return absl::InvalidArgumentError(absl::StrCat("query ", Shape(query), ", key ", Shape(key),
                                                   " and value ", Shape(value),
                                                   " must agree in width and keys"));
  }
  if (value.sizes[3].is_symbolic() || value.sizes[3].constant > kMaxValueWidth ||
      query.sizes[3].is_symbolic()) {
    return absl::UnimplementedError(absl::StrCat("attention with values of width ", Shape(value),
                                                 ": at most ", kMaxValueWidth, ", static"));
  }
  return std::vector<ir::TensorType>{
      ContiguousType(DType::kFloat32,
                     {query.sizes[0], query.sizes[1], Dim::Constant(1), value.sizes[3]}),
      ContiguousType(DType::kFloat32, {query.sizes[0], query.sizes[1], Dim::Constant(1)})};
}

absl::StatusOr<std::vector<ir::TensorType>> InferAttention(const ir::Node& node,
                                                           const InputTypes& inputs) {
  if (inputs.size() == 4 && inputs[3]->dtype != DType::kFloat32) {
    return absl::UnimplementedError(absl::StrCat(
        "single-query attention takes float32 tensors, got ", ir::DTypeName(inputs[3]->dtype)));
  }
  if (ScalarArgAsDouble(node, "dropout_p") != 0.0 || BoolArg(node, "is_causal")) {
    return absl::UnimplementedError(
        "attention with dropout or is_causal: trace it through kiln, which decomposes it");
  }
  ASSIGN_OR_RETURN(std::vector<ir::TensorType> results, InferQueryKeyValue(inputs));
  if (inputs.size() == 4) {
    const ir::TensorType &query = *inputs[0], &mask = *inputs[3];
    const std::vector<Dim> scores = {query.sizes[0], query.sizes[1], query.sizes[2],
                                     inputs[1]->sizes[2]};
    bool broadcasts = mask.rank() <= 4;
    for (int d = 0; broadcasts && d < mask.rank(); ++d) {
      const Dim& size = mask.sizes[d];
      broadcasts = size == Dim::Constant(1) || size == scores[4 - mask.rank() + d];
    }
    if (!broadcasts) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attn_mask ", Shape(mask), " does not broadcast to the scores' [batch, heads, 1, keys] ",
          Shape(ContiguousType(DType::kFloat32, scores))));
    }
  }
  return results;
}

// kiln.attention_to_length(query, key, value, position[, key_index,
// value_index]): keys j < position (j <= position when `inclusive`) of each
// batch row, the position int64 of sizes [], [1], [1, 1] or [batch, 1].
// Paged (`block` > 0): key and value are pools [pool blocks, block, heads,
// width] and the indexes int64 [batch * blocks], row n's blocks in order.
absl::StatusOr<std::vector<ir::TensorType>> InferAttentionToLength(const ir::Node& node,
                                                                   const InputTypes& inputs) {
  const int64_t block = IntArg(node, "block"), blocks = IntArg(node, "blocks");
  InputTypes unpaged = inputs;
  ir::TensorType key, value;  // the pools as [batch, heads, keys, width]
  if (block > 0) {
    const ir::TensorType &query = *inputs[0], &key_pool = *inputs[1], &value_pool = *inputs[2];
    if (inputs.size() != 6 || key_pool.rank() != 4 || value_pool.rank() != 4 || query.rank() != 4 ||
        key_pool.sizes[1] != Dim::Constant(block) || value_pool.sizes[1] != Dim::Constant(block)) {
      return absl::InternalError(absl::StrCat("paged attention of ", Shape(query), " over pools ",
                                              Shape(key_pool), " and ", Shape(value_pool)));
    }
    const Dim keys = Dim::Constant(block * blocks);
    key = ContiguousType(key_pool.dtype,
                         {query.sizes[0], key_pool.sizes[2], keys, key_pool.sizes[3]});
    value = ContiguousType(value_pool.dtype,
                           {query.sizes[0], value_pool.sizes[2], keys, value_pool.sizes[3]});
    unpaged[1] = &key, unpaged[2] = &value;
    const ir::SymExpr count = ir::SymExpr::Of(query.sizes[0]) * blocks;
    for (int i : {4, 5}) {
      if (inputs[i]->dtype != DType::kInt64 || inputs[i]->rank() != 1 ||
          !(ir::SymExpr::Of(inputs[i]->sizes[0]) == count)) {
        return absl::InternalError(absl::StrCat("paged attention's block index ", Shape(*inputs[i]),
                                                " for ", blocks, " blocks per row"));
      }
    }
  } else if (inputs.size() != 4) {
    return absl::InternalError("attention to a length reads a block index only when paged");
  }
  ASSIGN_OR_RETURN(std::vector<ir::TensorType> results, InferQueryKeyValue(unpaged));
  const ir::TensorType& position = *inputs[3];
  const bool per_batch = position.rank() == 2 && (position.sizes[0] == Dim::Constant(1) ||
                                                  position.sizes[0] == inputs[0]->sizes[0]);
  if (position.dtype != DType::kInt64 ||
      (position.rank() >= 1 && position.sizes.back() != Dim::Constant(1)) ||
      (position.rank() == 2 && !per_batch) || position.rank() > 2) {
    return absl::InternalError(absl::StrCat("attention to a length of ", Shape(position), " ",
                                            ir::DTypeName(position.dtype)));
  }
  return results;
}

absl::StatusOr<std::vector<ir::Definition>> LowerAttention(const ir::Graph&, const ir::Node& node) {
  std::vector<ir::Definition> definitions(node.outputs.size());
  for (ir::Definition& definition : definitions) {
    definition.kind = ir::Definition::Kind::kExtern;
    definition.function = "attention";
    definition.operands = node.inputs;
  }
  return definitions;
}

}  // namespace

void RegisterAttentionOps(OpTable& table) {
  OpDef def;
  def.name = "aten._scaled_dot_product_flash_attention_for_cpu.default";
  def.family = "attention";
  def.dtypes = {DType::kFloat32};
  def.min_inputs = 3;
  def.max_inputs = 4;
  def.args = {{"dropout_p", ArgKind::kFloat, ir::ArgValue(0.0)},
              {"is_causal", ArgKind::kBool, ir::ArgValue(false)},
              {"attn_mask", ArgKind::kOptionalTensor, ir::ArgValue(true)},
              {"scale", ArgKind::kFloat, ir::ArgValue(ir::None{})}};
  def.infer = InferAttention;
  def.lower = LowerAttention;
  table.Add(std::move(def));

  OpDef to_length;
  to_length.name = "kiln.attention_to_length.default";
  to_length.family = "attention";
  to_length.dtypes = {DType::kFloat32};
  to_length.min_inputs = 4;
  to_length.max_inputs = 6;
  to_length.args = {{"scale", ArgKind::kFloat, ir::ArgValue(ir::None{})},
                    {"inclusive", ArgKind::kBool, std::nullopt},
                    {"block", ArgKind::kInt, ir::ArgValue(int64_t{0})},
                    {"blocks", ArgKind::kInt, ir::ArgValue(int64_t{0})}};
  to_length.infer = InferAttentionToLength;
  to_length.lower = LowerAttention;
  table.Add(std::move(to_length));
}

}  // namespace kiln::ops
