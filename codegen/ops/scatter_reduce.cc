// The index and scatter family beyond lookups.cc: scatter_reduce (sum,
// prod, mean, amax, amin, with or without self), scatter with a reduce,
// index_reduce, put, masked_scatter, diagonal_scatter, as_strided_scatter
// and segment_reduce.
//
// All but diagonal_scatter and masked_scatter are composites over one core
// op, kiln.scatter_fold: a scatter kernel (loop_ir.h,
// Definition::Kind::kScatter) that starts from self and folds each source
// element into the element its index names, one point after another in
// row-major order on one thread, as eager's CPU kernels do. So duplicate
// indices fold in eager's order, and the result does not depend on how the
// work would have been split: a parallel kernel would need atomics for
// every reduction, or one pass per output region, for shapes this small.
// An index outside [0, size) of its dim folds nothing and touches no memory
// (eager raises an IndexError there; an artifact cannot raise).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

constexpr char kFold[] = "kiln.scatter_fold.default";

// What the family's ops take (16-bit floats are not supported yet).
const std::vector<DType> kScatterTypes = {DType::kFloat32, DType::kFloat64, DType::kInt64};

bool IsIndexType(DType dtype) { return dtype == DType::kInt64 || dtype == DType::kInt32; }

std::vector<ir::SymExpr> SymSizes(const std::vector<ir::Dim>& sizes) {
  std::vector<ir::SymExpr> out;
  for (const ir::Dim& size : sizes) out.push_back(ir::SymExpr::Of(size));
  return out;
}

absl::StatusOr<int> Reshape(GraphBuilder& b, int value, std::vector<ir::SymExpr> sizes) {
  return b.Add("aten.reshape.default", {value}, {{"size", std::move(sizes)}});
}

absl::StatusOr<int> Flat(GraphBuilder& b, int value) {
  return b.Add("aten.reshape.default", {value}, {{"size", std::vector<int64_t>{-1}}});
}

// kiln.scatter_fold(self, index, src; dim, reduce) -> self's type: self, then
// for each c of index's shape in row-major order, the element at c with
// c[dim] = index[c] becomes reduce(it, src[c]); reduce is "sum", "prod",
// "amax", "amin" (a NaN on either side wins, as eager's) or "assign".
// index has self's rank (at least 1) and sizes no larger than src's, nor
// off `dim` than self's.
void AddScatterFold(OpTable& table) {
  OpDef def;
  def.name = kFold;
  def.family = "scatter";
  def.dtypes = kNoBool;
  def.min_inputs = def.max_inputs = 3;
  def.args = {{"dim", ArgKind::kInt, std::nullopt}, {"reduce", ArgKind::kString, std::nullopt}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& self = *inputs[0];
    const ir::TensorType& index = *inputs[1];
    const ir::TensorType& src = *inputs[2];
    RETURN_IF_ERROR(CheckDTypes({inputs[0], inputs[2]}, kNoBool, {}));
    const std::string& reduce = std::get<std::string>(Arg(node, "reduce"));
    if (reduce != "sum" && reduce != "prod" && reduce != "amax" && reduce != "amin" &&
        reduce != "assign") {
      return absl::InvalidArgumentError(
          absl::StrCat("reduce must be sum, prod, amax, amin or assign, got '", reduce, "'"));
    }
    if (!IsIndexType(index.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the index is ", ir::DTypeName(index.dtype), ": it must be int64 or int32"));
    }
    if (src.dtype != self.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("src is ", ir::DTypeName(src.dtype),
                                                     ", not self's ", ir::DTypeName(self.dtype)));
    }
    if (self.rank() == 0 || index.rank() != self.rank() || src.rank() != self.rank()) {
      return absl::InvalidArgumentError(
          absl::StrCat("self, index and src must have one rank of at least 1, got ", self.rank(),
                       ", ", index.rank(), " and ", src.rank()));
    }
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), self.rank()));
    for (int d = 0; d < static_cast<int>(self.rank()); ++d) {
      for (const ir::Dim* bound : {&src.sizes[d], d == dim ? nullptr : &self.sizes[d]}) {
        if (bound == nullptr || index.sizes[d] == *bound) continue;
        if (index.sizes[d].is_symbolic() || bound->is_symbolic()) {
          return absl::UnimplementedError(
              absl::StrCat("the index's size at dim ", d, " differs symbolically from its bound"));
        }
        if (index.sizes[d].constant > bound->constant) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the index has size ", index.sizes[d].constant, " at dim ", d, ", larger than ",
              bound == &src.sizes[d] ? "src" : "self", "'s ", bound->constant));
        }
      }
    }
    return std::vector<ir::TensorType>{ContiguousType(self.dtype, self.sizes)};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int self = node.inputs[0], index = node.inputs[1], src = node.inputs[2];
    const int rank = static_cast<int>(graph.values[self].rank());
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), rank));
    ExprBuilder b(ir::Definition::Kind::kScatter);
    const ir::AffineMap identity = ir::AffineMap::Identity(rank);
    const int position =
        b.Cast(b.LoadAt(index, identity, graph.values[index].dtype), DType::kInt64);
    const int element = b.LoadAt(src, identity, ComputeType(graph.values[self].dtype));
    ir::Definition definition = b.Finish(element);
    const std::string& reduce = std::get<std::string>(Arg(node, "reduce"));
    definition.combiner = reduce == "sum" ? "sum_rounded_once" : reduce;
    definition.position = position;
    definition.reduction_sizes = graph.values[index].sizes;
    definition.map = identity;
    definition.map.coefficients[dim].assign(rank, 0);
    definition.axis = dim;
    definition.source = self;
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

// What a reduction starts from where self is left out: its identity.
ir::ArgValue Identity(const std::string& reduce, DType dtype) {
  const bool floating = ir::IsFloatingPoint(dtype);
  const int64_t lowest = dtype == DType::kInt32 ? std::numeric_limits<int32_t>::lowest()
                                                : std::numeric_limits<int64_t>::lowest();
  const int64_t highest = dtype == DType::kInt32 ? std::numeric_limits<int32_t>::max()
                                                 : std::numeric_limits<int64_t>::max();
  if (reduce == "prod") return int64_t{1};
  if (reduce == "amax") {
    return floating ? ir::ArgValue(-std::numeric_limits<double>::infinity()) : lowest;
  }
  if (reduce == "amin") {
    return floating ? ir::ArgValue(std::numeric_limits<double>::infinity()) : highest;
  }
  return int64_t{0};
}

// scatter_reduce(self, dim, index, src, reduce, include_self) for reduce
// sum, prod, mean, amax or amin. Without self, the elements some index
// names start from the reduction's identity; a mean divides by how many
// elements were folded in (for integers, floored as eager).
absl::StatusOr<int> ScatterReduce(GraphBuilder& b, int self, int64_t dim, int index, int src,
                                  const std::string& reduce, bool include_self) {
  if (reduce != "sum" && reduce != "prod" && reduce != "mean" && reduce != "amax" &&
      reduce != "amin") {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce must be one of sum, prod, mean, amax, amin, got '", reduce, "'"));
  }
  const ir::TensorType type = b.type(self);
  if (type.rank() == 0) {  // as a 1-element vector
    if (b.type(index).rank() > 1 || b.type(src).rank() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("a 0-dim self takes an index and a source of at most 1 dim, got ",
                       b.type(index).rank(), " and ", b.type(src).rank()));
    }
    ASSIGN_OR_RETURN(const int self_vector, Flat(b, self));
    ASSIGN_OR_RETURN(const int index_vector, Flat(b, index));
    ASSIGN_OR_RETURN(const int src_vector, Flat(b, src));
    ASSIGN_OR_RETURN(const int result, ScatterReduce(b, self_vector, 0, index_vector, src_vector,
                                                     reduce, include_self));
    return Reshape(b, result, {});
  }
  if (b.type(src).dtype != type.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("src is ", ir::DTypeName(b.type(src).dtype),
                                                   ", not self's ", ir::DTypeName(type.dtype)));
  }
  std::optional<int> count;  // how many elements each one folds in
  if (reduce == "mean" || !include_self) {
    ASSIGN_OR_RETURN(const int zeros, b.Add("aten.zeros_like.default", {self}));
    ASSIGN_OR_RETURN(const int ones, b.Add("aten.ones_like.default", {src}));
    ASSIGN_OR_RETURN(
        count, b.Add(kFold, {zeros, index, ones}, {{"dim", dim}, {"reduce", std::string("sum")}}));
  }
  int start = self;
  if (!include_self) {
    ASSIGN_OR_RETURN(const int named, b.Add("aten.gt.Scalar", {*count}, {{"other", int64_t{0}}}));
    ASSIGN_OR_RETURN(start, b.Add("aten.masked_fill.Scalar", {self, named},
                                  {{"value", Identity(reduce, type.dtype)}}));
  }
  ASSIGN_OR_RETURN(
      const int folded,
      b.Add(kFold, {start, index, src},
            {{"dim", dim}, {"reduce", reduce == "mean" ? std::string("sum") : reduce}}));
  if (reduce != "mean") return folded;
  int divisor;
  if (include_self) {
    ASSIGN_OR_RETURN(divisor, b.Add("aten.add.Scalar", {*count}, {{"other", int64_t{1}}}));
  } else {
    ASSIGN_OR_RETURN(const int none, b.Add("aten.eq.Scalar", {*count}, {{"other", int64_t{0}}}));
    ASSIGN_OR_RETURN(divisor,
                     b.Add("aten.masked_fill.Scalar", {*count, none}, {{"value", int64_t{1}}}));
  }
  if (ir::IsFloatingPoint(type.dtype)) return b.Add("aten.div.Tensor", {folded, divisor});
  // Integers: the floor of the float64 quotient, eager's floor division for
  // sums of magnitude below 2^53 (the divisor is at least 1).
  ASSIGN_OR_RETURN(const int sum, b.Cast(folded, DType::kFloat64));
  ASSIGN_OR_RETURN(const int by, b.Cast(divisor, DType::kFloat64));
  ASSIGN_OR_RETURN(int mean, b.Add("aten.div.Tensor", {sum, by}));
  ASSIGN_OR_RETURN(mean, b.Add("aten.floor.default", {mean}));
  return b.Cast(mean, type.dtype);
}

const ArgSpec kDim{"dim", ArgKind::kInt, std::nullopt};
const ArgSpec kReduce{"reduce", ArgKind::kString, std::nullopt};
const ArgSpec kIncludeSelf{"include_self", ArgKind::kBool, true};

absl::StatusOr<std::vector<int>> One(absl::StatusOr<int> value) {
  if (!value.ok()) return value.status();
  return std::vector<int>{*value};
}

// scatter.reduce and scatter.value_reduce: "add" and "multiply" onto self.
absl::StatusOr<std::string> ScatterReduceName(const ir::Node& node) {
  const std::string& reduce = std::get<std::string>(Arg(node, "reduce"));
  if (reduce == "add") return std::string("sum");
  if (reduce == "multiply") return std::string("prod");
  return absl::InvalidArgumentError(
      absl::StrCat("scatter's reduce must be 'add' or 'multiply', got '", reduce, "'"));
}

// index_reduce(self, dim, index [N] or [], source, reduce, include_self):
// scatter_reduce with the index along `dim` expanded to source's shape.
absl::StatusOr<std::vector<int>> IndexReduce(GraphBuilder& b, const ir::Node& node) {
  const int self = node.inputs[0], source = node.inputs[2];
  int index = node.inputs[1];
  const ir::TensorType source_type = b.type(source);
  if (b.type(index).rank() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("index_reduce's index must be a vector, got rank ", b.type(index).rank()));
  }
  if (source_type.rank() != b.type(self).rank()) {
    return absl::InvalidArgumentError(absl::StrCat("index_reduce's source has rank ",
                                                   source_type.rank(), ", not self's ",
                                                   b.type(self).rank()));
  }
  int64_t dim = 0;
  if (source_type.rank() > 0) {
    ASSIGN_OR_RETURN(dim, WrapDim(IntArg(node, "dim"), source_type.rank()));
    std::vector<ir::SymExpr> along(source_type.rank(), ir::SymExpr::Constant(1));
    along[dim] = ir::SymExpr::Constant(-1);
    ASSIGN_OR_RETURN(index, Reshape(b, index, along));
    ASSIGN_OR_RETURN(
        index, b.Add("aten.expand.default", {index}, {{"size", SymSizes(source_type.sizes)}}));
  }
  return One(ScatterReduce(b, self, dim, index, source, std::get<std::string>(Arg(node, "reduce")),
                           std::get<bool>(Arg(node, "include_self"))));
}

// put(self, index, source, accumulate): self flattened, source's elements
// written (or added) at the flat positions index holds, negative ones
// counting from the end.
absl::StatusOr<std::vector<int>> Put(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType type = b.type(node.inputs[0]);
  RETURN_IF_ERROR(RequireStatic(type, "put's self"));
  int64_t numel = 1;
  for (const ir::Dim& size : type.sizes) numel *= size.constant;
  ASSIGN_OR_RETURN(const int flat, Flat(b, node.inputs[0]));
  ASSIGN_OR_RETURN(int index, Flat(b, node.inputs[1]));
  ASSIGN_OR_RETURN(index, b.Cast(index, DType::kInt64));
  ASSIGN_OR_RETURN(const int negative, b.Add("aten.lt.Scalar", {index}, {{"other", int64_t{0}}}));
  ASSIGN_OR_RETURN(const int wrapped, b.Add("aten.add.Scalar", {index}, {{"other", numel}}));
  ASSIGN_OR_RETURN(index, b.Add("aten.where.self", {negative, wrapped, index}));
  ASSIGN_OR_RETURN(const int source, Flat(b, node.inputs[2]));
  const std::string reduce = std::get<bool>(Arg(node, "accumulate")) ? "sum" : "assign";
  ASSIGN_OR_RETURN(const int folded,
                   b.Add(kFold, {flat, index, source}, {{"dim", int64_t{0}}, {"reduce", reduce}}));
  return One(Reshape(b, folded, SymSizes(type.sizes)));
}

// masked_scatter(self, mask, source): where mask (broadcast with self) is
// true, source's elements in order: the k-th true element takes source's
// flat element k, its position a running count of the mask.
absl::StatusOr<std::vector<int>> MaskedScatter(GraphBuilder& b, const ir::Node& node) {
  const int self = node.inputs[0], mask = node.inputs[1], source = node.inputs[2];
  if (b.type(mask).dtype != DType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat(
        "masked_scatter's mask is ", ir::DTypeName(b.type(mask).dtype), ": it must be bool"));
  }
  if (b.type(source).dtype != b.type(self).dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("masked_scatter's source is ", ir::DTypeName(b.type(source).dtype),
                     ", not self's ", ir::DTypeName(b.type(self).dtype)));
  }
  ASSIGN_OR_RETURN(const std::vector<ir::Dim> sizes,
                   BroadcastShapes(b.type(self).sizes, b.type(mask).sizes));
  const std::vector<ir::SymExpr> shape = SymSizes(sizes);
  ASSIGN_OR_RETURN(const int whole_mask, b.Add("aten.expand.default", {mask}, {{"size", shape}}));
  ASSIGN_OR_RETURN(const int whole_self, b.Add("aten.expand.default", {self}, {{"size", shape}}));
  ASSIGN_OR_RETURN(int position, Flat(b, whole_mask));
  ASSIGN_OR_RETURN(position, b.Cast(position, DType::kInt64));
  ASSIGN_OR_RETURN(position, b.Add("aten.cumsum.default", {position}, {{"dim", int64_t{0}}}));
  ASSIGN_OR_RETURN(position, b.Add("aten.sub.Scalar", {position}, {{"other", int64_t{1}}}));
  ASSIGN_OR_RETURN(const int flat_source, Flat(b, source));
  ASSIGN_OR_RETURN(int taken, b.Add("aten.index_select.default", {flat_source, position},
                                    {{"dim", int64_t{0}}}));
  ASSIGN_OR_RETURN(taken, Reshape(b, taken, shape));
  return One(b.Add("aten.where.self", {whole_mask, taken, whole_self}));
}

// as_strided_scatter(self, src, size, stride, storage_offset): self
// flattened, src's element i written at storage_offset + sum stride[d] *
// i[d], in row-major order (a later write wins where positions repeat).
absl::StatusOr<std::vector<int>> AsStridedScatter(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType type = b.type(node.inputs[0]);
  const std::vector<int64_t> size = IntListArg(node, "size");
  const std::vector<int64_t> stride = IntListArg(node, "stride");
  if (size.size() != stride.size()) {
    return absl::InvalidArgumentError(absl::StrCat("as_strided_scatter's size has ", size.size(),
                                                   " dims and its stride ", stride.size()));
  }
  const int64_t offset = Present(node, "storage_offset") ? IntArg(node, "storage_offset") : 0;
  std::vector<int64_t> src_sizes;
  for (const ir::Dim& dim : b.type(node.inputs[1]).sizes) {
    src_sizes.push_back(dim.is_symbolic() ? -1 : dim.constant);
  }
  if (src_sizes != size) {
    return absl::InvalidArgumentError("as_strided_scatter's src must have the shape `size` names");
  }
  ASSIGN_OR_RETURN(
      int position,
      b.Add("aten.full.default", {},
            {{"size", std::vector<int64_t>{}}, {"fill_value", offset}, {"dtype", DType::kInt64}}));
  for (size_t d = 0; d < size.size(); ++d) {
    ASSIGN_OR_RETURN(
        int along, b.Add("aten.arange.default", {}, {{"end", size[d]}, {"dtype", DType::kInt64}}));
    ASSIGN_OR_RETURN(along, b.Add("aten.mul.Scalar", {along}, {{"other", stride[d]}}));
    std::vector<int64_t> shape(size.size(), 1);
    shape[d] = size[d];
    ASSIGN_OR_RETURN(along, b.Add("aten.reshape.default", {along}, {{"size", shape}}));
    ASSIGN_OR_RETURN(position, b.Add("aten.add.Tensor", {position, along}));
  }
  ASSIGN_OR_RETURN(position, Flat(b, position));
  ASSIGN_OR_RETURN(const int flat, Flat(b, node.inputs[0]));
  ASSIGN_OR_RETURN(const int source, Flat(b, node.inputs[1]));
  ASSIGN_OR_RETURN(const int folded,
                   b.Add(kFold, {flat, position, source},
                         {{"dim", int64_t{0}}, {"reduce", std::string("assign")}}));
  return One(Reshape(b, folded, SymSizes(type.sizes)));
}

// segment_reduce(data [B..., N, ...], reduce, lengths [B..., S] or offsets
// [B..., S + 1], axis (B's count), unsafe, initial) -> [B..., S, ...]:
// segment s reduces data's rows (along `axis`) offsets[s] to offsets[s + 1]
// (lengths: their running sums from 0), onto
// `initial` when given. A row's segment is how many segments end at or
// before it: a running count of the ends marked on the rows (a scatter, then
// a cumsum), linear in N + S; rows outside every segment fold nowhere. An
// empty segment is `initial`, else the reduction's identity (NaN for mean).
absl::StatusOr<std::vector<int>> SegmentReduce(GraphBuilder& b, const ir::Node& node) {
  const int data = node.inputs[0];
  const ir::TensorType type = b.type(data);
  if (Present(node, "indices") || Present(node, "lengths") == Present(node, "offsets")) {
    return absl::InvalidArgumentError(
        "segment_reduce takes exactly one of lengths and offsets (indices are not supported, as "
        "in eager)");
  }
  const int given = node.inputs[1];
  const ir::TensorType given_type = b.type(given);
  RETURN_IF_ERROR(RequireStatic(type, "segment_reduce's data"));
  RETURN_IF_ERROR(RequireStatic(given_type, "segment_reduce's lengths or offsets"));
  if (!IsIndexType(given_type.dtype)) {
    return absl::InvalidArgumentError("segment_reduce's lengths and offsets must be integers");
  }
  // The leading dims of lengths (offsets) are data's batch dims before `axis`.
  const int64_t axis = static_cast<int64_t>(given_type.rank()) - 1;
  if (axis < 0 || IntArg(node, "axis") != axis || type.rank() <= static_cast<size_t>(axis) ||
      !std::equal(given_type.sizes.begin(), given_type.sizes.end() - 1, type.sizes.begin())) {
    return absl::InvalidArgumentError(
        "segment_reduce's axis must be the last dim of lengths (offsets), whose other dims are "
        "data's before it");
  }
  const int64_t rows = type.sizes[axis].constant;
  const int64_t count = given_type.sizes[axis].constant;
  ASSIGN_OR_RETURN(int bounds, b.Cast(given, DType::kInt64));
  int first = -1;  // the first row of the first segment, when it may not be 0
  if (Present(node, "lengths")) {
    ASSIGN_OR_RETURN(bounds, b.Add("aten.cumsum.default", {bounds}, {{"dim", axis}}));
  } else {
    if (count == 0) return absl::InvalidArgumentError("segment_reduce's offsets are empty");
    ASSIGN_OR_RETURN(first, b.Add("aten.slice.Tensor", {bounds},
                                  {{"dim", axis}, {"start", int64_t{0}}, {"end", int64_t{1}}}));
    ASSIGN_OR_RETURN(bounds, b.Add("aten.slice.Tensor", {bounds},
                                   {{"dim", axis}, {"start", int64_t{1}}, {"end", count}}));
  }
  const int64_t segments = b.type(bounds).sizes[axis].constant;
  std::vector<int64_t> marks_sizes;  // data's sizes up to and with `axis`
  for (int64_t d = 0; d <= axis; ++d) marks_sizes.push_back(type.sizes[d].constant);
  ASSIGN_OR_RETURN(const int zeros, b.Add("aten.zeros.default", {},
                                          {{"size", marks_sizes}, {"dtype", DType::kInt64}}));
  ASSIGN_OR_RETURN(const int ones, b.Add("aten.ones_like.default", {bounds}));
  ASSIGN_OR_RETURN(int segment, b.Add(kFold, {zeros, bounds, ones},
                                      {{"dim", axis}, {"reduce", std::string("sum")}}));
  ASSIGN_OR_RETURN(segment, b.Add("aten.cumsum.default", {segment}, {{"dim", axis}}));
  if (first >= 0) {
    ASSIGN_OR_RETURN(const int row,
                     b.Add("aten.arange.default", {}, {{"end", rows}, {"dtype", DType::kInt64}}));
    ASSIGN_OR_RETURN(const int before, b.Add("aten.lt.Tensor", {row, first}));
    ASSIGN_OR_RETURN(segment,
                     b.Add("aten.masked_fill.Scalar", {segment, before}, {{"value", int64_t{-1}}}));
  }
  std::vector<ir::SymExpr> along(type.rank(), ir::SymExpr::Constant(1));
  for (int64_t d = 0; d <= axis; ++d) along[d] = ir::SymExpr::Constant(marks_sizes[d]);
  ASSIGN_OR_RETURN(segment, Reshape(b, segment, along));
  ASSIGN_OR_RETURN(segment,
                   b.Add("aten.expand.default", {segment}, {{"size", SymSizes(type.sizes)}}));

  const std::string& reduce = std::get<std::string>(Arg(node, "reduce"));
  const std::map<std::string, std::string> folds = {
      {"sum", "sum"}, {"prod", "prod"}, {"mean", "sum"}, {"max", "amax"}, {"min", "amin"}};
  const auto fold = folds.find(reduce);
  if (fold == folds.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment_reduce's reduce must be one of sum, prod, mean, max, min, got '", reduce, "'"));
  }
  const bool has_initial = Present(node, "initial");
  std::vector<int64_t> out_sizes;
  for (const ir::Dim& size : type.sizes) out_sizes.push_back(size.constant);
  out_sizes[axis] = segments;
  ASSIGN_OR_RETURN(const int start,
                   b.Add("aten.full.default", {},
                         {{"size", out_sizes},
                          {"fill_value",
                           has_initial ? Arg(node, "initial") : Identity(fold->second, type.dtype)},
                          {"dtype", type.dtype}}));
  ASSIGN_OR_RETURN(const int folded,
                   b.Add(kFold, {start, segment, data}, {{"dim", axis}, {"reduce", fold->second}}));
  if (reduce != "mean") return std::vector<int>{folded};
  ASSIGN_OR_RETURN(const int no_rows, b.Add("aten.zeros_like.default", {start}));
  ASSIGN_OR_RETURN(const int row_ones, b.Add("aten.ones_like.default", {data}));
  ASSIGN_OR_RETURN(const int folded_rows, b.Add(kFold, {no_rows, segment, row_ones},
                                                {{"dim", axis}, {"reduce", std::string("sum")}}));
  ASSIGN_OR_RETURN(const int mean, b.Add("aten.div.Tensor", {folded, folded_rows}));
  ASSIGN_OR_RETURN(const int empty,
                   b.Add("aten.eq.Scalar", {folded_rows}, {{"other", int64_t{0}}}));
  const ir::ArgValue fill =
      has_initial ? Arg(node, "initial") : ir::ArgValue(std::numeric_limits<double>::quiet_NaN());
  return One(b.Add("aten.masked_fill.Scalar", {mean, empty}, {{"value", fill}}));
}

// diagonal_scatter(self, src, offset, dim1, dim2) -> self's type: element c
// is src's element k of the diagonal where c[dim2] - c[dim1] = offset (k =
// c[dim1] for offset >= 0, else c[dim2]), self's elsewhere. One pointwise
// kernel; src is read through a bounded load, so off the diagonal it reads
// nothing.
void AddDiagonalScatter(OpTable& table) {
  OpDef def;
  def.name = "aten.diagonal_scatter.default";
  def.family = "scatter";
  def.dtypes = kScatterTypes;
  def.min_inputs = def.max_inputs = 2;
  def.args = {{"offset", ArgKind::kInt, int64_t{0}},
              {"dim1", ArgKind::kInt, int64_t{0}},
              {"dim2", ArgKind::kInt, int64_t{1}}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& self = *inputs[0];
    const ir::TensorType& src = *inputs[1];
    RETURN_IF_ERROR(CheckDTypes(inputs, kScatterTypes, {}));
    if (src.dtype != self.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("src is ", ir::DTypeName(src.dtype),
                                                     ", not self's ", ir::DTypeName(self.dtype)));
    }
    if (self.rank() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("diagonal_scatter needs at least 2 dims, got ", self.rank()));
    }
    ASSIGN_OR_RETURN(const int dim1, WrapDim(IntArg(node, "dim1"), self.rank()));
    ASSIGN_OR_RETURN(const int dim2, WrapDim(IntArg(node, "dim2"), self.rank()));
    if (dim1 == dim2) return absl::InvalidArgumentError("dim1 and dim2 must differ");
    RETURN_IF_ERROR(RequireStatic(self, "diagonal_scatter's self"));
    const int64_t offset = IntArg(node, "offset");
    const int64_t length =
        std::max<int64_t>(0, std::min(self.sizes[dim1].constant - std::max<int64_t>(0, -offset),
                                      self.sizes[dim2].constant - std::max<int64_t>(0, offset)));
    std::vector<ir::Dim> diagonal;
    for (int d = 0; d < static_cast<int>(self.rank()); ++d) {
      if (d != dim1 && d != dim2) diagonal.push_back(self.sizes[d]);
    }
    diagonal.push_back(ir::Dim::Constant(length));
    if (src.sizes != diagonal) {
      return absl::InvalidArgumentError(
          "diagonal_scatter's src must have the shape of self's diagonal (self.diagonal(offset, "
          "dim1, dim2))");
    }
    return std::vector<ir::TensorType>{ContiguousType(self.dtype, self.sizes)};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int self = node.inputs[0], src = node.inputs[1];
    const int rank = static_cast<int>(graph.values[self].rank());
    ASSIGN_OR_RETURN(const int dim1, WrapDim(IntArg(node, "dim1"), rank));
    ASSIGN_OR_RETURN(const int dim2, WrapDim(IntArg(node, "dim2"), rank));
    const int64_t offset = IntArg(node, "offset");
    ir::AffineMap src_map;
    src_map.num_variables = rank;
    for (int d = 0; d < rank; ++d) {
      if (d == dim1 || d == dim2) continue;
      src_map.coefficients.emplace_back(rank, 0);
      src_map.coefficients.back()[d] = 1;
      src_map.offsets.push_back(0);
    }
    src_map.coefficients.emplace_back(rank, 0);
    src_map.coefficients.back()[offset >= 0 ? dim1 : dim2] = 1;
    src_map.offsets.push_back(0);
    ExprBuilder b;
    const DType compute = ComputeType(graph.values[self].dtype);
    const int on_src = b.BoundedLoad(src, std::move(src_map), compute, 0);
    const int on_self = b.LoadAt(self, ir::AffineMap::Identity(rank), compute);
    const int apart =
        b.Call("sub", {b.Index(dim2, DType::kInt64), b.Index(dim1, DType::kInt64)}, DType::kInt64);
    const int on_diagonal =
        b.Call("eq", {apart, b.Constant(static_cast<double>(offset), DType::kInt64)}, DType::kBool);
    return std::vector<ir::Definition>{
        b.Finish(b.Call("where", {on_diagonal, on_src, on_self}, compute))};
  };
  table.Add(std::move(def));
}

}  // namespace

void RegisterScatterOps(OpTable& table) {
  AddScatterFold(table);
  AddDiagonalScatter(table);
  AddComposite(
      table, "aten.scatter_reduce.two", 3, 3, {kDim, kReduce, kIncludeSelf},
      [](GraphBuilder& b, const ir::Node& node) {
        return One(ScatterReduce(b, node.inputs[0], IntArg(node, "dim"), node.inputs[1],
                                 node.inputs[2], std::get<std::string>(Arg(node, "reduce")),
                                 std::get<bool>(Arg(node, "include_self"))));
      },
      kScatterTypes, {}, "scatter", /*checked_inputs=*/1);
  AddComposite(
      table, "aten.scatter.reduce", 3, 3, {kDim, kReduce},
      [](GraphBuilder& b, const ir::Node& node) -> absl::StatusOr<std::vector<int>> {
        ASSIGN_OR_RETURN(const std::string reduce, ScatterReduceName(node));
        return One(ScatterReduce(b, node.inputs[0], IntArg(node, "dim"), node.inputs[1],
                                 node.inputs[2], reduce, true));
      },
      kScatterTypes, {}, "scatter", /*checked_inputs=*/1);
  AddComposite(
      table, "aten.scatter.value_reduce", 2, 2,
      {kDim, {"value", ArgKind::kScalar, std::nullopt}, kReduce},
      [](GraphBuilder& b, const ir::Node& node) -> absl::StatusOr<std::vector<int>> {
        ASSIGN_OR_RETURN(const std::string reduce, ScatterReduceName(node));
        ASSIGN_OR_RETURN(const int src, b.Add("aten.full_like.default", {node.inputs[1]},
                                              {{"fill_value", Arg(node, "value")},
                                               {"dtype", b.type(node.inputs[0]).dtype}}));
        return One(ScatterReduce(b, node.inputs[0], IntArg(node, "dim"), node.inputs[1], src,
                                 reduce, true));
      },
      kScatterTypes, {}, "scatter", /*checked_inputs=*/1);
  AddComposite(table, "aten.index_reduce.default", 3, 3, {kDim, kReduce, kIncludeSelf}, IndexReduce,
               kScatterTypes, {}, "scatter", /*checked_inputs=*/1);
  AddComposite(table, "aten.put.default", 3, 3, {{"accumulate", ArgKind::kBool, false}}, Put,
               kScatterTypes, {}, "scatter", /*checked_inputs=*/1);
  AddComposite(table, "aten.masked_scatter.default", 3, 3, {}, MaskedScatter, kScatterTypes, {},
               "scatter", /*checked_inputs=*/1);
  AddComposite(table, "aten.segment_reduce.default", 1, 4,
               {kReduce,
                {"lengths", ArgKind::kOptionalTensor, ir::ArgValue(true)},
                {"indices", ArgKind::kOptionalTensor, ir::ArgValue(true)},
                {"offsets", ArgKind::kOptionalTensor, ir::ArgValue(true)},
                {"axis", ArgKind::kInt, int64_t{0}},
                {"unsafe", ArgKind::kBool, false},
                {"initial", ArgKind::kScalar, ir::ArgValue(ir::None{})}},
               SegmentReduce, {DType::kFloat32, DType::kFloat64}, {}, "scatter",
               /*checked_inputs=*/1);
  AddComposite(table, "aten.as_strided_scatter.default", 2, 2,
               {{"size", ArgKind::kIntList, std::nullopt},
                {"stride", ArgKind::kIntList, std::nullopt},
                {"storage_offset", ArgKind::kInt, ir::ArgValue(ir::None{})}},
               AsStridedScatter, kScatterTypes, {}, "scatter", /*checked_inputs=*/1);
}

}  // namespace kiln::ops
