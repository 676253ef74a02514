// Lookups: embedding, index_select and gather. Each result element reads
// one element of a table at a position along one dim that an index tensor
// holds: a gathered load (loop_ir.h, Expr::gathered), the index loaded
// affinely and widened to int64.
//
// Out-of-range indices: eager raises an IndexError; an artifact cannot, so
// an index outside [0, size) of the dim (negative ones too) yields 0 and
// reads no memory.
#include <optional>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// What the gathered values may be: the floats, and int64 (a copy).
const std::vector<DType>& TableTypes() { return kNoBool; }

// An index tensor's dtype: int64, or int32 where eager takes it too.
absl::Status CheckIndex(const ir::TensorType& index, bool int32_allowed, absl::string_view op) {
  if (index.dtype == DType::kInt64 || (int32_allowed && index.dtype == DType::kInt32)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(op, " takes ", int32_allowed ? "int64 or int32" : "int64", " indices, not ",
                   ir::DTypeName(index.dtype), " (neither does eager PyTorch)"));
}

// The table read at coordinates (variables ...) except `dim`, which is the
// index loaded at `index_map`; `table_map` gives the other coordinates.
ir::Definition Gather(const ir::Graph& graph, int table, int index, ir::AffineMap table_map,
                      int dim, ir::AffineMap index_map) {
  ExprBuilder b;
  const DType compute = ComputeType(graph.values[table].dtype);
  const int position =
      b.Cast(b.LoadAt(index, std::move(index_map), graph.values[index].dtype), DType::kInt64);
  return b.Finish(b.GatheredLoad(table, std::move(table_map), dim, position, compute, 0.0));
}

// A map with `num_variables` variables and `rows` coordinates, all zero.
ir::AffineMap ZeroMap(int num_variables, int rows) {
  ir::AffineMap map;
  map.num_variables = num_variables;
  map.coefficients.assign(rows, std::vector<int64_t>(num_variables, 0));
  map.offsets.assign(rows, 0);
  return map;
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
    RETURN_IF_ERROR(CheckIndex(*inputs[1], /*int32_allowed=*/true, "embedding"));
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
    RETURN_IF_ERROR(CheckIndex(*inputs[1], /*int32_allowed=*/true, "index_select"));
    if (inputs[1]->rank() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("index_select's index must be a vector, got rank ", inputs[1]->rank()));
    }
    if (inputs[0]->rank() == 0) {
      return absl::UnimplementedError("index_select of a 0-dim tensor is not supported yet");
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
// than self's.
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
    RETURN_IF_ERROR(CheckIndex(index, /*int32_allowed=*/false, "gather"));
    if (self.rank() == 0) {
      return absl::UnimplementedError("gather of a 0-dim tensor is not supported yet");
    }
    if (index.rank() != self.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("gather's index has rank ", index.rank(),
                                                     ", not the input's ", self.rank()));
    }
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), self.rank()));
    for (int d = 0; d < static_cast<int>(self.rank()); ++d) {
      if (d == dim || index.sizes[d] == self.sizes[d]) continue;
      if (index.sizes[d].is_symbolic() || self.sizes[d].is_symbolic()) {
        return absl::UnimplementedError(
            absl::StrCat("gather's index and input differ symbolically at dim ", d));
      }
      if (index.sizes[d].constant > self.sizes[d].constant) {
        return absl::InvalidArgumentError(
            absl::StrCat("gather's index has size ", index.sizes[d].constant, " at dim ", d,
                         ", larger than the input's ", self.sizes[d].constant));
      }
    }
    return std::vector<ir::TensorType>{ContiguousType(self.dtype, index.sizes)};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int self = node.inputs[0], index = node.inputs[1];
    const int rank = static_cast<int>(graph.values[self].rank());
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), rank));
    return std::vector<ir::Definition>{Gather(graph, self, index, ir::AffineMap::Identity(rank),
                                              dim, ir::AffineMap::Identity(rank))};
  };
  table.Add(std::move(def));
}

}  // namespace

void RegisterLookupOps(OpTable& table) {
  AddEmbedding(table);
  AddIndexSelect(table);
  AddGather(table);
}

}  // namespace kiln::ops
