// Composites that move elements without arithmetic: cat, stack, repeat, pixel_(un)shuffle.
#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// repeat(x, repeats): x tiled repeats[d] times along each dim d, extra
// leading repeats adding dims (an affine instance norm repeats its weight
// per sample). Each dim of size s becomes [r, s]: an unsqueeze and an
// expand (views), then a reshape merges the pairs, which copies, as eager.
absl::StatusOr<std::vector<int>> Repeat(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType type = b.type(node.inputs[0]);
  const std::vector<int64_t> repeats = IntListArg(node, "repeats");
  if (static_cast<int64_t>(repeats.size()) < type.rank()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "repeats has ", repeats.size(), " entries, fewer than the input's rank ", type.rank()));
  }
  const int64_t lead = static_cast<int64_t>(repeats.size()) - type.rank();
  int value = node.inputs[0];
  std::vector<ir::SymExpr> pairs, merged;
  for (int64_t d = 0; d < static_cast<int64_t>(repeats.size()); ++d) {
    if (repeats[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("repeats entry ", d, " is negative"));
    }
    const ir::SymExpr size =
        d < lead ? ir::SymExpr::Constant(1) : ir::SymExpr::Of(type.sizes[d - lead]);
    // [..., r, s] so far: the dim's repeat goes before it (a new leading
    // dim holds it as the size).
    ASSIGN_OR_RETURN(value, b.Add("aten.unsqueeze.default", {value}, {{"dim", 2 * d}}));
    if (d < lead) {
      ASSIGN_OR_RETURN(value, b.Add("aten.unsqueeze.default", {value}, {{"dim", 2 * d + 1}}));
    }
    pairs.push_back(ir::SymExpr::Constant(repeats[d]));
    pairs.push_back(size);
    merged.push_back(size * repeats[d]);
  }
  ASSIGN_OR_RETURN(value, b.Add("aten.expand.default", {value}, {{"size", pairs}}));
  ASSIGN_OR_RETURN(value, b.Add("aten.reshape.default", {value}, {{"size", merged}}));
  return std::vector<int>{value};
}

// pixel_shuffle(x, r): (*, C r^2, H, W) -> (*, C, H r, W r), out[..., c,
// h r + i, w r + j] = x[..., c r^2 + i r + j, h, w]: a reshape splitting
// the channels into (C, r, r), a permute moving each factor behind its
// spatial dim, a reshape merging them. pixel_unshuffle is its inverse.
absl::StatusOr<std::vector<int>> PixelShuffle(GraphBuilder& b, const ir::Node& node) {
  const bool shuffle = node.op == "aten.pixel_shuffle.default";
  const ir::TensorType type = b.type(node.inputs[0]);
  const int64_t r = IntArg(node, shuffle ? "upscale_factor" : "downscale_factor");
  const int64_t lead = type.rank() - 3;
  if (lead < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("needs an input of at least 3 dims (..., C, H, W), got ", type.rank()));
  }
  if (r <= 0) return absl::InvalidArgumentError(absl::StrCat("factor ", r, " is not positive"));
  std::vector<ir::SymExpr> split, merged;
  std::vector<int64_t> order;
  for (int64_t d = 0; d < lead; ++d) {
    split.push_back(ir::SymExpr::Of(type.sizes[d]));
    merged.push_back(split.back());
    order.push_back(d);
  }
  const ir::SymExpr c = ir::SymExpr::Of(type.sizes[lead]);
  const ir::SymExpr h = ir::SymExpr::Of(type.sizes[lead + 1]);
  const ir::SymExpr w = ir::SymExpr::Of(type.sizes[lead + 2]);
  const ir::SymExpr factor = ir::SymExpr::Constant(r);
  if (shuffle) {
    const std::optional<ir::SymExpr> channels = ir::DivideExactly(c, factor * r);
    if (!channels.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the channels of ", ir::ToString(type, b.graph()), " (dim ", lead,
                       ") are not a multiple of the upscale factor squared, ", r * r));
    }
    // (C, i, j, H, W) -> (C, H, i, W, j)
    split.insert(split.end(), {*channels, factor, factor, h, w});
    for (int64_t d : {0, 3, 1, 4, 2}) order.push_back(lead + d);
    merged.insert(merged.end(), {*channels, h * r, w * r});
  } else {
    const std::optional<ir::SymExpr> rows = ir::DivideExactly(h, factor);
    const std::optional<ir::SymExpr> columns = ir::DivideExactly(w, factor);
    if (!rows.has_value() || !columns.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the height and width of ", ir::ToString(type, b.graph()),
                       " are not multiples of the downscale factor ", r));
    }
    // (C, H, i, W, j) -> (C, i, j, H, W)
    split.insert(split.end(), {c, *rows, factor, *columns, factor});
    for (int64_t d : {0, 2, 4, 1, 3}) order.push_back(lead + d);
    merged.insert(merged.end(), {c * (r * r), *rows, *columns});
  }
  ASSIGN_OR_RETURN(int value, b.Add("aten.reshape.default", {node.inputs[0]}, {{"size", split}}));
  ASSIGN_OR_RETURN(value, b.Add("aten.permute.default", {value}, {{"dims", order}}));
  ASSIGN_OR_RETURN(value, b.Add("aten.reshape.default", {value}, {{"size", merged}}));
  return std::vector<int>{value};
}

// stack(tensors, dim): kiln.stack itself (parts of one shape).
absl::StatusOr<std::vector<int>> Stack(GraphBuilder& b, const ir::Node& node) {
  ASSIGN_OR_RETURN(const int stacked,
                   b.Add("kiln.stack.default", node.inputs, {{"dim", IntArg(node, "dim")}}));
  return std::vector<int>{stacked};
}

// cat(tensors, dim): kiln.concat, which writes each part at its offset.
// As eager, a part of shape [0] is left out whatever the others' rank (an
// empty start that a loop concatenates onto), yet its dtype takes part in
// the result's.
absl::StatusOr<std::vector<int>> Cat(GraphBuilder& b, const ir::Node& node) {
  std::vector<int> parts;
  DType dtype = b.type(node.inputs[0]).dtype;
  for (const int part : node.inputs) {
    const ir::TensorType type = b.type(part);
    dtype = PromoteTensors(dtype, type.dtype);
    if (type.rank() != 1 || type.sizes[0] != ir::Dim::Constant(0)) parts.push_back(part);
  }
  if (parts.empty()) parts = node.inputs;
  ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), b.type(parts[0]).rank()));
  ASSIGN_OR_RETURN(const int result, b.Add("kiln.concat.default", parts, {{"dim", int64_t{dim}}}));
  ASSIGN_OR_RETURN(const int cast, b.Cast(result, dtype));
  return std::vector<int>{cast};
}

}  // namespace

void RegisterRearrangeOps(OpTable& table) {
  const ArgSpec dim_zero{"dim", ArgKind::kInt, ir::ArgValue(int64_t{0})};
  AddComposite(table, "aten.cat.default", 1, 1 << 16, {dim_zero}, Cat, kAllTypes);
  AddComposite(table, "aten.stack.default", 1, 1 << 16, {dim_zero}, Stack, kAllTypes);
  AddComposite(table, "aten.repeat.default", 1, 1, {{"repeats", ArgKind::kIntList, std::nullopt}},
               Repeat, kAllTypes);
  AddComposite(table, "aten.pixel_shuffle.default", 1, 1,
               {{"upscale_factor", ArgKind::kInt, std::nullopt}}, PixelShuffle, kAllTypes);
  AddComposite(table, "aten.pixel_unshuffle.default", 1, 1,
               {{"downscale_factor", ArgKind::kInt, std::nullopt}}, PixelShuffle, kAllTypes);
}

}  // namespace kiln::ops
