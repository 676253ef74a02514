// Sorting and selection: sort, topk, kthvalue, median, nanmedian and mode
// along one dim. Each is a composite over kiln.select_rows, one extern
// call through the runtime table (client/runtime/sort.h: std::stable_sort,
// std::partial_sort, std::nth_element and torch's quickselect per row, rows
// spread across the runtime's pool), which returns the positions eager
// returns; the values are a gather of the input at those positions, so
// they are the input's elements bit for bit.
//
// The rows reach the runtime as a [rows, n] tensor: the dim moved last and
// the others merged (a reshape, which copies unless the dim is already
// last). 16-bit floats are compared in float32, which orders them alike.
#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

// kiln.select_rows(x [rows, n], select, k, descending, sorted): int64
// [rows, width], the positions of kiln_abi.h's kiln_select.
absl::StatusOr<std::vector<ir::TensorType>> InferSelectRows(const ir::Node& node,
                                                            const InputTypes& inputs) {
  const ir::TensorType& x = *inputs[0];
  if (x.rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("select_rows needs [rows, n], got rank ", x.rank()));
  }
  const std::string& select = std::get<std::string>(Arg(node, "select"));
  ir::Dim width = ir::Dim::Constant(1);
  if (select == "sort") {
    width = x.sizes[1];
  } else if (select == "topk") {
    width = ir::Dim::Constant(IntArg(node, "k"));
  } else if (select != "kthvalue" && select != "median" && select != "nanmedian" &&
             select != "mode") {
    return absl::InvalidArgumentError(absl::StrCat("select_rows has no selection '", select, "'"));
  }
  return std::vector<ir::TensorType>{ContiguousType(ir::DType::kInt64, {x.sizes[0], width})};
}

void AddSelectRows(OpTable& table) {
  OpDef def;
  def.name = "kiln.select_rows.default";
  def.family = "sorting";
  def.dtypes = {ir::DType::kFloat32, ir::DType::kFloat64, ir::DType::kInt64, ir::DType::kBool};
  def.args = {{"select", ArgKind::kString, std::nullopt},
              {"k", ArgKind::kInt, int64_t{0}},
              {"descending", ArgKind::kBool, false},
              {"sorted", ArgKind::kBool, true}};
  def.infer = InferSelectRows;
  def.lower = [](const ir::Graph&,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kExtern;
    definition.function = "select_rows";
    definition.operands = node.inputs;
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

struct Selection {
  std::string select;
  int64_t k = 0;
  bool descending = false;
  bool sorted = true;
  bool keepdim = true;  // false: the dim is dropped (width 1)
};

// (values, indices) of `selection` along `dim` of x.
absl::StatusOr<std::vector<int>> SelectAlong(GraphBuilder& b, int x, int64_t dim,
                                             const Selection& selection) {
  const ir::TensorType type = b.type(x);
  if (type.rank() == 0) {  // one row of one element; the results are 0-d, kept dim or not
    ASSIGN_OR_RETURN(const int row, b.Add("aten.unsqueeze.default", {x}, {{"dim", int64_t{0}}}));
    Selection kept = selection;
    kept.keepdim = true;
    ASSIGN_OR_RETURN(std::vector<int> results, SelectAlong(b, row, 0, kept));
    for (int& result : results) {
      ASSIGN_OR_RETURN(result,
                       b.Add("aten.squeeze.dims", {result}, {{"dim", std::vector<int64_t>{0}}}));
    }
    return results;
  }
  ASSIGN_OR_RETURN(const int axis, WrapDim(dim, type.rank()));
  const ir::SymExpr n = ir::SymExpr::Of(type.sizes[axis]);
  const bool one = selection.select != "sort" && selection.select != "topk";
  if (one && n.is_constant() && n.constant() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(selection.select, " along dim ", axis,
                                                   " of length 0: there is no element to select"));
  }
  if (selection.select == "topk" || selection.select == "kthvalue") {
    if (!n.is_constant()) {
      return absl::UnimplementedError(absl::StrCat(selection.select, " along a symbolic dim"));
    }
    const int64_t low = selection.select == "topk" ? 0 : 1;
    if (selection.k < low || selection.k > n.constant()) {
      return absl::InvalidArgumentError(absl::StrCat(
          selection.select, " with k=", selection.k, " along dim ", axis, " of length ",
          n.constant(), ": k must be in [", low, ", ", n.constant(), "]"));
    }
  }
  // [others..., n] -> [rows, n].
  std::vector<int64_t> order;
  std::vector<int64_t> others;
  for (int64_t d = 0; d < type.rank(); ++d) {
    if (d != axis) others.push_back(d);
  }
  order = others;
  order.push_back(axis);
  int rows = x;
  if (axis != type.rank() - 1) {
    ASSIGN_OR_RETURN(rows, b.Add("aten.permute.default", {x}, {{"dims", order}}));
  }
  ASSIGN_OR_RETURN(rows,
                   b.Add("aten.reshape.default", {rows},
                         {{"size", std::vector<ir::SymExpr>{ElementCount(type, others), n}}}));
  const ir::DType dtype = type.dtype;
  if (dtype == ir::DType::kFloat16 || dtype == ir::DType::kBFloat16) {
    ASSIGN_OR_RETURN(rows, b.Cast(rows, ir::DType::kFloat32));
  }
  ASSIGN_OR_RETURN(int indices, b.Add("kiln.select_rows.default", {rows},
                                      {{"select", selection.select},
                                       {"k", selection.k},
                                       {"descending", selection.descending},
                                       {"sorted", selection.sorted}}));
  // [rows, width] -> x's shape with `width` at the dim.
  std::vector<ir::SymExpr> sizes;
  for (int64_t d : others) sizes.push_back(ir::SymExpr::Of(type.sizes[d]));
  sizes.push_back(ir::SymExpr::Of(b.type(indices).sizes[1]));
  ASSIGN_OR_RETURN(indices, b.Add("aten.reshape.default", {indices}, {{"size", sizes}}));
  if (axis != type.rank() - 1) {
    std::vector<int64_t> inverse(order.size());
    for (size_t d = 0; d < order.size(); ++d) inverse[order[d]] = static_cast<int64_t>(d);
    ASSIGN_OR_RETURN(indices, b.Add("aten.permute.default", {indices}, {{"dims", inverse}}));
  }
  // gather takes no bools: those are gathered as int64.
  const bool flags = dtype == ir::DType::kBool;
  ASSIGN_OR_RETURN(const int source, b.Cast(x, flags ? ir::DType::kInt64 : dtype));
  ASSIGN_OR_RETURN(int values, b.Add("aten.gather.default", {source, indices}, {{"dim", axis}}));
  ASSIGN_OR_RETURN(values, b.Cast(values, dtype));
  if (!selection.keepdim) {
    const std::vector<int64_t> squeezed = {axis};
    ASSIGN_OR_RETURN(values, b.Add("aten.squeeze.dims", {values}, {{"dim", squeezed}}));
    ASSIGN_OR_RETURN(indices, b.Add("aten.squeeze.dims", {indices}, {{"dim", squeezed}}));
  }
  return std::vector<int>{values, indices};
}

// sort.default(x, dim, descending) and sort.stable(x, stable, dim,
// descending): always stable (eager's unstable sort leaves the order of
// equal elements unspecified).
absl::StatusOr<std::vector<int>> Sort(GraphBuilder& b, const ir::Node& node) {
  Selection selection{"sort"};
  selection.descending = BoolArg(node, "descending");
  return SelectAlong(b, node.inputs[0], IntArg(node, "dim"), selection);
}

absl::StatusOr<std::vector<int>> Topk(GraphBuilder& b, const ir::Node& node) {
  Selection selection{"topk", IntArg(node, "k"), BoolArg(node, "largest"), BoolArg(node, "sorted")};
  return SelectAlong(b, node.inputs[0], IntArg(node, "dim"), selection);
}

// kthvalue, median.dim, nanmedian.dim, mode: one element per row.
absl::StatusOr<std::vector<int>> OnePerRow(GraphBuilder& b, const ir::Node& node) {
  Selection selection;
  selection.select = node.op.substr(5, node.op.find('.', 5) - 5);  // "aten.<select>.<overload>"
  if (selection.select == "kthvalue") selection.k = IntArg(node, "k");
  selection.keepdim = BoolArg(node, "keepdim");
  return SelectAlong(b, node.inputs[0], IntArg(node, "dim"), selection);
}

// median.default, nanmedian.default: over every element, the value alone.
// Of no elements: NaN, or the lowest int64 (eager's).
absl::StatusOr<std::vector<int>> FlatMedian(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType type = b.type(node.inputs[0]);
  std::vector<int64_t> all(type.rank());
  std::iota(all.begin(), all.end(), 0);
  if (type.is_static() && type.NumElements() == 0) {
    const ir::ArgValue fill = type.dtype == ir::DType::kInt64
                                  ? ir::ArgValue(std::numeric_limits<int64_t>::min())
                                  : ir::ArgValue(std::numeric_limits<double>::quiet_NaN());
    ASSIGN_OR_RETURN(
        const int empty,
        b.Add("aten.full.default", {},
              {{"size", std::vector<int64_t>{}}, {"fill_value", fill}, {"dtype", type.dtype}}));
    return std::vector<int>{empty};
  }
  ASSIGN_OR_RETURN(const int flat,
                   b.Add("aten.reshape.default", {node.inputs[0]},
                         {{"size", std::vector<ir::SymExpr>{ElementCount(type, all)}}}));
  Selection selection;
  selection.select = node.op == "aten.median.default" ? "median" : "nanmedian";
  selection.keepdim = false;
  ASSIGN_OR_RETURN(const std::vector<int> results, SelectAlong(b, flat, 0, selection));
  return std::vector<int>{results[0]};
}

}  // namespace

void RegisterSortingOps(OpTable& table) {
  AddSelectRows(table);
  const ArgSpec dim_last{"dim", ArgKind::kInt, int64_t{-1}};
  const ArgSpec descending{"descending", ArgKind::kBool, false};
  const ArgSpec keepdim{"keepdim", ArgKind::kBool, false};
  // sort and mode take bools; the others refuse them, as eager does. Not int8, uint8,
  // int16 or int32 yet: the gather that reads the values does not take them.
  const std::vector<ir::DType> refused;
  auto gatherable = [](std::vector<ir::DType> dtypes) {
    for (const ir::DType small :
         {ir::DType::kInt8, ir::DType::kUInt8, ir::DType::kInt16, ir::DType::kInt32}) {
      dtypes.erase(std::remove(dtypes.begin(), dtypes.end(), small), dtypes.end());
    }
    return dtypes;
  };
  const std::vector<ir::DType> all = gatherable(kAllTypes);
  const std::vector<ir::DType> ordered = gatherable(kNoBool);
  const std::vector<ir::DType> no_bool = {ir::DType::kBool};
  AddComposite(table, "aten.sort.default", 1, 1, {dim_last, descending}, Sort, all, refused,
               "sorting");
  AddComposite(table, "aten.sort.stable", 1, 1,
               {{"stable", ArgKind::kBool, ir::ArgValue(ir::None{})}, dim_last, descending}, Sort,
               all, refused, "sorting");
  AddComposite(table, "aten.topk.default", 1, 1,
               {{"k", ArgKind::kInt, std::nullopt},
                dim_last,
                {"largest", ArgKind::kBool, true},
                {"sorted", ArgKind::kBool, true}},
               Topk, ordered, no_bool, "sorting");
  AddComposite(table, "aten.kthvalue.default", 1, 1,
               {{"k", ArgKind::kInt, std::nullopt}, dim_last, keepdim}, OnePerRow, ordered, no_bool,
               "sorting");
  AddComposite(table, "aten.mode.default", 1, 1, {dim_last, keepdim}, OnePerRow, all, refused,
               "sorting");
  for (const char* op : {"aten.median.dim", "aten.nanmedian.dim"}) {
    AddComposite(table, op, 1, 1, {{"dim", ArgKind::kInt, std::nullopt}, keepdim}, OnePerRow,
                 ordered, no_bool, "sorting");
  }
  for (const char* op : {"aten.median.default", "aten.nanmedian.default"}) {
    AddComposite(table, op, 1, 1, {}, FlatMedian, ordered, no_bool, "sorting");
  }
}

}  // namespace kiln::ops
