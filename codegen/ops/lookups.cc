// Lookups: embedding, index_select and gather. Each result element reads
// one element of a table at a position along one dim that an index tensor
// holds: a gathered load (loop_ir.h, Expr::gathered), the index loaded
// affinely and widened to int64.
//
// Their backward ops scatter instead: embedding_dense_backward, and the
// index_add and scatter_add that index_select's and gather's backward make.
// Each is a scatter-add (loop_ir.h, Definition::Kind::kScatter): a start
// (self, or zeros), then every element of the source added at the position
// its index names, one after another in eager's order.
//
// Out-of-range indices (outside [0, size) of the dim, negative ones too):
// eager raises an IndexError, but for embedding_dense_backward, which skips
// them. index_add stops the run with that error (loop_ir.h, checked_op),
// and so does the check before each lookup of the user's graph
// (passes/check_lookups.h); the lookup itself reads 0 there (what Kiln's
// own decompositions rely on) and a scatter adds nothing, neither touching
// memory out of bounds.
#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// What the gathered (or scattered) values may be: the floats, and int64.
const std::vector<DType>& TableTypes() {
  static const auto* const types = new std::vector<DType>{
      DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt64};
  return *types;
}

// An index tensor's dtype: int64 or int32, as eager takes.
absl::Status CheckIndex(const ir::TensorType& index, absl::string_view op) {
  if (index.dtype == DType::kInt64 || index.dtype == DType::kInt32) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(op, " takes int64 or int32 indices, not ",
                                                 ir::DTypeName(index.dtype),
                                                 " (neither does eager PyTorch)"));
}

// gather's and scatter's index: eager checks its dtype only when it has
// elements (an empty one reads nothing).
absl::Status CheckGatherIndex(const ir::TensorType& index, absl::string_view op) {
  if (HasNoElements(index.sizes)) return absl::OkStatus();
  return CheckIndex(index, op);
}

// An index tensor's dim `d` may be no larger than `what`'s (`bound`): equal
// sizes pass, constant ones compare, others are Unimplemented.
absl::Status IndexFits(absl::string_view op, const ir::Dim& index, const ir::Dim& bound, int d,
                       absl::string_view what) {
  if (index == bound) return absl::OkStatus();
  if (index.is_symbolic() || bound.is_symbolic()) {
    return absl::UnimplementedError(
        absl::StrCat(op, "'s index and ", what, " differ symbolically at dim ", d));
  }
  if (index.constant > bound.constant) {
    return absl::InvalidArgumentError(absl::StrCat(op, "'s index has size ", index.constant,
                                                   " at dim ", d, ", larger than ", what, "'s ",
                                                   bound.constant));
  }
  return absl::OkStatus();
}

// Sizes that must be equal: InvalidArgument where they are constants that
// differ (eager refuses those too), Unimplemented where they differ
// symbolically (they may be equal at run time). `what` names them.
absl::Status SameSize(const ir::Dim& a, const ir::Dim& b, const std::string& what) {
  if (a == b) return absl::OkStatus();
  if (a.is_symbolic() || b.is_symbolic()) {
    return absl::UnimplementedError(absl::StrCat(what, " differ symbolically"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " differ: ", a.constant, " and ", b.constant));
}

// The index loaded at `index_map`, widened to int64.
int LoadIndex(ExprBuilder& b, const ir::Graph& graph, int index, ir::AffineMap index_map) {
  return b.Cast(b.LoadAt(index, std::move(index_map), graph.values[index].dtype), DType::kInt64);
}

// The table read at coordinates (variables ...) except `dim`, which is the
// index loaded at `index_map`; `table_map` gives the other coordinates.
ir::Definition Gather(const ir::Graph& graph, int table, int index, ir::AffineMap table_map,
                      int dim, ir::AffineMap index_map) {
  ExprBuilder b;
  const DType compute = ComputeType(graph.values[table].dtype);
  const int position = LoadIndex(b, graph, index, std::move(index_map));
  return b.Finish(b.GatheredLoad(table, std::move(table_map), dim, position, compute, 0.0));
}

// A scatter-add (ir::Definition::Kind::kScatter) onto `start` (-1: zeros):
// each point of `points` adds exprs[element] of `b` at `target_map`(point),
// whose coordinate `dim` is exprs[position] instead. `combiner` says how
// 16-bit sums round (loop_ir.h).
ir::Definition ScatterAdd(ExprBuilder& b, int element, int position, std::vector<ir::Dim> points,
                          ir::AffineMap target_map, int dim, int start,
                          const std::string& combiner) {
  ir::Definition definition = b.Finish(element);
  definition.combiner = combiner;
  definition.position = position;
  definition.reduction_sizes = std::move(points);
  target_map.coefficients[dim].assign(target_map.num_variables, 0);
  target_map.offsets[dim] = 0;
  definition.map = std::move(target_map);
  definition.axis = dim;
  definition.source = start;
  return definition;
}

// A map with `num_variables` variables and `rows` coordinates, all zero.
ir::AffineMap ZeroMap(int num_variables, int rows) {
  ir::AffineMap map;
  map.num_variables = num_variables;
  map.coefficients.assign(rows, std::vector<int64_t>(num_variables, 0));
  map.offsets.assign(rows, 0);
  return map;
}

// A lookup in a 0-dim table at an index of one element, over `rank` (0 or
// 1) result dims: the table where the index is 0, else 0 (out of range).
ir::Definition ScalarLookup(const ir::Graph& graph, int table, int index, int rank) {
  ExprBuilder b;
  const DType compute = ComputeType(graph.values[table].dtype);
  const int position =
      LoadIndex(b, graph, index, ZeroMap(rank, static_cast<int>(graph.values[index].rank())));
  const int inside = b.Call("eq", {position, b.Constant(0, DType::kInt64)}, DType::kBool);
  return b.Finish(b.Call(
      "where", {inside, b.Load(graph, table, rank, compute), b.Constant(0, compute)}, compute));
}

// embedding(weight [V, D], indices [...]) -> [..., D]: row indices[...] of
// weight. padding_idx, scale_grad_by_freq and sparse change only the
// backward.
void AddEmbedding(OpTable& table) {
  OpDef def;
  def.name = "aten.embedding.default";
  def.family = "lookup";
  def.dtypes = TableTypes();
  def.min_inputs = def.max_inputs = 2;
  def.args = {{"padding_idx", ArgKind::kInt, int64_t{-1}},
              {"scale_grad_by_freq", ArgKind::kBool, false},
              {"sparse", ArgKind::kBool, false}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    RETURN_IF_ERROR(CheckDTypes({inputs[0]}, TableTypes(), {}));
    RETURN_IF_ERROR(CheckIndex(*inputs[1], "embedding"));
    if (inputs[0]->rank() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("'weight' must be 2-D, got rank ", inputs[0]->rank()));
    }
    std::vector<ir::Dim> sizes = inputs[1]->sizes;
    sizes.push_back(inputs[0]->sizes[1]);
    return std::vector<ir::TensorType>{ContiguousType(inputs[0]->dtype, std::move(sizes))};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int weight = node.inputs[0], indices = node.inputs[1];
    const int rank = static_cast<int>(graph.values[indices].rank()) + 1;
    ir::AffineMap weight_map = ZeroMap(rank, 2);
    weight_map.coefficients[1][rank - 1] = 1;
    ir::AffineMap index_map = ZeroMap(rank, rank - 1);
    for (int d = 0; d < rank - 1; ++d) index_map.coefficients[d][d] = 1;
    return std::vector<ir::Definition>{
        Gather(graph, weight, indices, std::move(weight_map), 0, std::move(index_map))};
  };
  table.Add(std::move(def));
}

// index_select(self, dim, index [N] or []) -> self with size N (1) at dim:
// element [.., i, ..] is self[.., index[i], ..].
void AddIndexSelect(OpTable& table) {
  OpDef def;
  def.name = "aten.index_select.default";
  def.family = "lookup";
  def.dtypes = TableTypes();
  def.min_inputs = def.max_inputs = 2;
  def.args = {{"dim", ArgKind::kInt, std::nullopt}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    RETURN_IF_ERROR(CheckDTypes({inputs[0]}, TableTypes(), {}));
    RETURN_IF_ERROR(CheckIndex(*inputs[1], "index_select"));
    if (inputs[1]->rank() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("index_select's index must be a vector, got rank ", inputs[1]->rank()));
    }
    if (inputs[0]->rank() == 0) {
      RETURN_IF_ERROR(WrapDim(IntArg(node, "dim"), 1).status());
      if (inputs[1]->rank() == 1)
        RETURN_IF_ERROR(
            IndexFits("index_select", inputs[1]->sizes[0], ir::Dim::Constant(1), 0, "the input"));
      return std::vector<ir::TensorType>{ContiguousType(inputs[0]->dtype, {})};
    }
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), inputs[0]->rank()));
    std::vector<ir::Dim> sizes = inputs[0]->sizes;
    sizes[dim] = inputs[1]->rank() == 0 ? ir::Dim::Constant(1) : inputs[1]->sizes[0];
    return std::vector<ir::TensorType>{ContiguousType(inputs[0]->dtype, std::move(sizes))};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int self = node.inputs[0], index = node.inputs[1];
    const int rank = static_cast<int>(graph.values[self].rank());
    if (rank == 0) return std::vector<ir::Definition>{ScalarLookup(graph, self, index, 0)};
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), rank));
    ir::AffineMap self_map = ir::AffineMap::Identity(rank);
    ir::AffineMap index_map = ZeroMap(rank, static_cast<int>(graph.values[index].rank()));
    if (graph.values[index].rank() == 1) index_map.coefficients[0][dim] = 1;
    return std::vector<ir::Definition>{
        Gather(graph, self, index, std::move(self_map), dim, std::move(index_map))};
  };
  table.Add(std::move(def));
}

// gather(self, dim, index) -> index's shape: element c is self[c with
// c[dim] = index[c]]. index has self's rank and, off `dim`, sizes no larger
// than self's, unless it is empty: eager then checks only `dim`, and the
// result is empty in the index's shape.
void AddGather(OpTable& table) {
  OpDef def;
  def.name = "aten.gather.default";
  def.family = "lookup";
  def.dtypes = TableTypes();
  def.min_inputs = def.max_inputs = 2;
  def.args = {{"dim", ArgKind::kInt, std::nullopt}, {"sparse_grad", ArgKind::kBool, false}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& self = *inputs[0];
    const ir::TensorType& index = *inputs[1];
    RETURN_IF_ERROR(CheckDTypes({inputs[0]}, TableTypes(), {}));
    RETURN_IF_ERROR(CheckGatherIndex(index, "gather"));
    if (self.rank() == 0) {  // an index of one element, 0-dim or not
      RETURN_IF_ERROR(WrapDim(IntArg(node, "dim"), 1).status());
      if (index.rank() > 1 || (index.rank() == 1 && index.sizes[0] != ir::Dim::Constant(1))) {
        return absl::InvalidArgumentError(
            absl::StrCat("gather from a 0-dim tensor takes one index, got ", Shape(index)));
      }
      return std::vector<ir::TensorType>{ContiguousType(self.dtype, index.sizes)};
    }
    if (HasNoElements(index.sizes)) {
      RETURN_IF_ERROR(WrapDim(IntArg(node, "dim"), self.rank()).status());
      return std::vector<ir::TensorType>{ContiguousType(self.dtype, index.sizes)};
    }
    if (index.rank() != self.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("gather's index has rank ", index.rank(),
                                                     ", not the input's ", self.rank()));
    }
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), self.rank()));
    for (int d = 0; d < static_cast<int>(self.rank()); ++d) {
      if (d == dim) continue;
      RETURN_IF_ERROR(IndexFits("gather", index.sizes[d], self.sizes[d], d, "the input"));
    }
    return std::vector<ir::TensorType>{ContiguousType(self.dtype, index.sizes)};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int self = node.inputs[0], index = node.inputs[1];
    const int rank = static_cast<int>(graph.values[self].rank());
    if (rank == 0) {
      const int index_rank = static_cast<int>(graph.values[index].rank());
      return std::vector<ir::Definition>{ScalarLookup(graph, self, index, index_rank)};
    }
    if (HasNoElements(
            graph.values[index].sizes)) {  // nothing to read: the empty result's definition
      ExprBuilder b;
      return std::vector<ir::Definition>{
          b.Finish(b.Constant(0, ComputeType(graph.values[self].dtype)))};
    }
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), rank));
    return std::vector<ir::Definition>{Gather(graph, self, index, ir::AffineMap::Identity(rank),
                                              dim, ir::AffineMap::Identity(rank))};
  };
  table.Add(std::move(def));
}

// embedding_dense_backward(grad_output [..., D], indices [...], num_weights,
// padding_idx, scale_grad_by_freq) -> [num_weights, D]: zeros, then row
// indices[j] += grad_output[j] for each position j in order. Rows named by
// padding_idx (when it is not -1) get nothing: their indices are turned
// into -1, which the scatter skips as it skips every out-of-range index.
void AddEmbeddingDenseBackward(OpTable& table) {
  OpDef def;
  def.name = "aten.embedding_dense_backward.default";
  def.family = "lookup";
  def.dtypes = TableTypes();
  def.min_inputs = def.max_inputs = 2;
  def.args = {{"num_weights", ArgKind::kInt, std::nullopt},
              {"padding_idx", ArgKind::kInt, std::nullopt},
              {"scale_grad_by_freq", ArgKind::kBool, std::nullopt}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& grad = *inputs[0];
    const ir::TensorType& indices = *inputs[1];
    RETURN_IF_ERROR(CheckDTypes({inputs[0]}, TableTypes(), {}));
    RETURN_IF_ERROR(CheckIndex(indices, "embedding_dense_backward"));
    if (BoolArg(node, "scale_grad_by_freq")) {
      return absl::UnimplementedError(
          "embedding_dense_backward with scale_grad_by_freq=True is not supported yet");
    }
    if (IntArg(node, "num_weights") < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_weights must not be negative, got ", IntArg(node, "num_weights")));
    }
    // Eager views grad_output as [indices.numel(), D]; traced graphs give it
    // the indices' sizes followed by D, the only form taken here.
    if (grad.rank() != indices.rank() + 1 ||
        !std::equal(indices.sizes.begin(), indices.sizes.end(), grad.sizes.begin())) {
      return absl::UnimplementedError(
          "embedding_dense_backward's grad_output must have the indices' sizes followed by the "
          "embedding dim");
    }
    return std::vector<ir::TensorType>{ContiguousType(
        grad.dtype, {ir::Dim::Constant(IntArg(node, "num_weights")), grad.sizes.back()})};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int grad = node.inputs[0], indices = node.inputs[1];
    const int rank = static_cast<int>(graph.values[grad].rank());
    ExprBuilder b(ir::Definition::Kind::kScatter);
    ir::AffineMap index_map = ZeroMap(rank, rank - 1);
    for (int d = 0; d < rank - 1; ++d) index_map.coefficients[d][d] = 1;
    int position = LoadIndex(b, graph, indices, std::move(index_map));
    const int64_t padding_idx = IntArg(node, "padding_idx");
    if (padding_idx >= 0) {
      const int padding =
          b.Call("eq", {position, b.Constant(padding_idx, DType::kInt64)}, DType::kBool);
      position = b.Call("where", {padding, b.Constant(-1, DType::kInt64), position}, DType::kInt64);
    }
    const int element =
        b.LoadAt(grad, ir::AffineMap::Identity(rank), ComputeType(graph.values[grad].dtype));
    ir::AffineMap target_map = ZeroMap(rank, 2);
    target_map.coefficients[1][rank - 1] = 1;
    return std::vector<ir::Definition>{ScatterAdd(b, element, position, graph.values[grad].sizes,
                                                  std::move(target_map), 0, -1, "sum")};
  };
  table.Add(std::move(def));
}

// index_add(self, dim, index [N] or [], source, alpha) -> self's type: self,
// then self[.., index[i], ..] += alpha * source[.., i, ..] for each i in
// order (index_select's backward, onto zeros).
void AddIndexAdd(OpTable& table) {
  OpDef def;
  def.name = "aten.index_add.default";
  def.family = "lookup";
  def.dtypes = TableTypes();
  def.min_inputs = def.max_inputs = 3;
  def.args = {{"dim", ArgKind::kInt, std::nullopt},
              {"alpha", ArgKind::kScalar, ir::ArgValue(int64_t{1})}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& self = *inputs[0];
    const ir::TensorType& index = *inputs[1];
    const ir::TensorType& source = *inputs[2];
    RETURN_IF_ERROR(CheckDTypes({inputs[0], inputs[2]}, TableTypes(), {}));
    RETURN_IF_ERROR(CheckIndex(index, "index_add"));
    if (source.dtype != self.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("index_add's source is ", ir::DTypeName(source.dtype), ", not self's ",
                       ir::DTypeName(self.dtype), " (neither does eager PyTorch)"));
    }
    if (index.rank() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("index_add's index must be a vector, got rank ", index.rank()));
    }
    if (self.rank() == 0 || source.rank() == 0) {
      return absl::UnimplementedError("index_add of 0-dim tensors is not supported yet");
    }
    if (source.rank() != self.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("index_add's source has rank ", source.rank(),
                                                     ", not self's ", self.rank()));
    }
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), self.rank()));
    const ir::Dim count = index.rank() == 0 ? ir::Dim::Constant(1) : index.sizes[0];
    RETURN_IF_ERROR(
        SameSize(count, source.sizes[dim],
                 absl::StrCat("index_add's index length and source's size at dim ", dim)));
    for (int d = 0; d < static_cast<int>(self.rank()); ++d) {
      if (d == dim) continue;
      if (source.sizes[d] == ir::Dim::Constant(1) && self.sizes[d] != ir::Dim::Constant(1)) {
        return absl::UnimplementedError(absl::StrCat(
            "index_add's source broadcast along self's dim ", d, " is not supported yet"));
      }
      RETURN_IF_ERROR(SameSize(source.sizes[d], self.sizes[d],
                               absl::StrCat("index_add's source and self sizes at dim ", d)));
    }
    return std::vector<ir::TensorType>{ContiguousType(self.dtype, self.sizes)};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int self = node.inputs[0], index = node.inputs[1], source = node.inputs[2];
    const ir::TensorType& type = graph.values[self];
    const int rank = static_cast<int>(type.rank());
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), rank));
    ExprBuilder b(ir::Definition::Kind::kScatter);
    ir::AffineMap index_map = ZeroMap(rank, static_cast<int>(graph.values[index].rank()));
    if (graph.values[index].rank() == 1) index_map.coefficients[0][dim] = 1;
    const int position = LoadIndex(b, graph, index, std::move(index_map));
    const DType compute = ComputeType(type.dtype);
    int element = b.LoadAt(source, ir::AffineMap::Identity(rank), compute);
    // Eager converts alpha to the tensors' dtype: rounded, or truncated
    // for integers.
    const double given = ScalarArgAsDouble(node, "alpha");
    const double alpha =
        ir::IsFloatingPoint(type.dtype) ? RoundScalar(given, type.dtype) : std::trunc(given);
    if (alpha != 1) element = b.Call("mul", {element, b.Constant(alpha, compute)}, compute);
    ir::Definition definition =
        ScatterAdd(b, element, position, graph.values[source].sizes, ir::AffineMap::Identity(rank),
                   dim, self, "sum_rounded_once");
    definition.checked_op = "index_add";  // x[pos] += v (index_put_ with accumulate) too
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

// scatter_add(self, dim, index, src) -> self's type: self, then
// self[c with c[dim] = index[c]] += src[c] for each c of index's shape in
// order (gather's backward, onto zeros). index has self's rank and sizes
// no larger than src's, nor off `dim` than self's.
void AddScatterAdd(OpTable& table) {
  OpDef def;
  def.name = "aten.scatter_add.default";
  def.family = "lookup";
  def.dtypes = TableTypes();
  def.min_inputs = def.max_inputs = 3;
  def.args = {{"dim", ArgKind::kInt, std::nullopt}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& self = *inputs[0];
    const ir::TensorType& index = *inputs[1];
    const ir::TensorType& source = *inputs[2];
    RETURN_IF_ERROR(CheckDTypes({inputs[0], inputs[2]}, TableTypes(), {}));
    RETURN_IF_ERROR(CheckGatherIndex(index, "scatter_add"));
    if (source.dtype != self.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("scatter_add's src is ", ir::DTypeName(source.dtype), ", not self's ",
                       ir::DTypeName(self.dtype), " (neither does eager PyTorch)"));
    }
    if (self.rank() == 0) {
      return absl::UnimplementedError("scatter_add of a 0-dim tensor is not supported yet");
    }
    if (index.rank() != self.rank() || source.rank() != self.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("scatter_add's index and src have ranks ",
                                                     index.rank(), " and ", source.rank(),
                                                     ", not self's ", self.rank()));
    }
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), self.rank()));
    for (int d = 0; d < static_cast<int>(self.rank()); ++d) {
      RETURN_IF_ERROR(IndexFits("scatter_add", index.sizes[d], source.sizes[d], d, "src"));
      if (d == dim) continue;
      RETURN_IF_ERROR(IndexFits("scatter_add", index.sizes[d], self.sizes[d], d, "self"));
    }
    return std::vector<ir::TensorType>{ContiguousType(self.dtype, self.sizes)};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int self = node.inputs[0], index = node.inputs[1], source = node.inputs[2];
    const int rank = static_cast<int>(graph.values[self].rank());
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), rank));
    ExprBuilder b(ir::Definition::Kind::kScatter);
    const int position = LoadIndex(b, graph, index, ir::AffineMap::Identity(rank));
    const int element =
        b.LoadAt(source, ir::AffineMap::Identity(rank), ComputeType(graph.values[self].dtype));
    return std::vector<ir::Definition>{ScatterAdd(b, element, position, graph.values[index].sizes,
                                                  ir::AffineMap::Identity(rank), dim, self,
                                                  "sum_rounded_once")};
  };
  table.Add(std::move(def));
}

}  // namespace

void RegisterLookupOps(OpTable& table) {
  AddEmbedding(table);
  AddIndexSelect(table);
  AddGather(table);
  AddEmbeddingDenseBackward(table);
  AddIndexAdd(table);
  AddScatterAdd(table);
}

}  // namespace kiln::ops
