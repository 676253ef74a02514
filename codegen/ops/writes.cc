// Indexed writes: index_copy and scatter. Each result is self with the
// elements an index tensor names replaced (`x[:, :, pos] = k` and
// index_put_ trace to index_copy, client/python/kiln/_decompositions.py).
//
// Each is a scatter (loop_ir.h, Definition::Kind::kScatter) with the
// combiner "assign": its loops run over the source's points, not over self,
// so written in self's storage (an output that is an input, plan_buffers.h)
// a step writes only the rows it names. Where several points name one
// element, the last in row-major order wins: eager leaves that unspecified,
// Kiln makes it deterministic. An index outside [0, size) stops the run
// before anything is written, naming the op, the index and the size (eager
// raises an IndexError there).
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

absl::Status CheckInt64Index(const ir::TensorType& index, absl::string_view op) {
  if (index.dtype == DType::kInt64) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, " takes int64 indices, not ",
                                                 ir::DTypeName(index.dtype),
                                                 " (neither does eager PyTorch)"));
}

// Sizes that must be equal, or (`at_most`) `size` no larger than `bound`:
// constants compare (InvalidArgument, as eager), symbolic sizes must be
// the same expression (else Unimplemented).
absl::Status Fits(const ir::Dim& size, const ir::Dim& bound, bool at_most,
                  const std::string& what) {
  if (size == bound) return absl::OkStatus();
  if (size.is_symbolic() || bound.is_symbolic()) {
    return absl::UnimplementedError(absl::StrCat(what, " differ symbolically"));
  }
  if (at_most && size.constant <= bound.constant) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " are ", size.constant, " and ",
                                                 bound.constant, at_most ? ": too large" : ""));
}

// A map with `num_variables` variables and `rows` coordinates, all zero.
ir::AffineMap ZeroMap(int num_variables, int rows) {
  ir::AffineMap map;
  map.num_variables = num_variables;
  map.coefficients.assign(rows, std::vector<int64_t>(num_variables, 0));
  map.offsets.assign(rows, 0);
  return map;
}

// The scatter of `b`'s exprs[element] over `points` onto `self`: point p
// writes at p's coordinates but `dim`, which is exprs[position] (a 0-dim
// self has no points dims: its one element is index 0).
ir::Definition Assign(ExprBuilder& b, int element, int position, std::vector<ir::Dim> points,
                      int self, int dim, const std::string& op) {
  ir::Definition definition = b.Finish(element);
  definition.combiner = "assign";
  definition.position = position;
  definition.map = ir::AffineMap::Identity(static_cast<int>(points.size()));
  if (!points.empty()) definition.map.coefficients[dim].assign(definition.map.num_variables, 0);
  definition.reduction_sizes = std::move(points);
  definition.axis = dim;
  definition.source = self;
  definition.checked_op = op;
  return definition;
}

// index_copy(self, dim, index [N] or [], source) -> self's type: self with
// self[.., index[i], ..] = source[.., i, ..] for each i.
void AddIndexCopy(OpTable& table) {
  OpDef def;
  def.name = "aten.index_copy.default";
  def.family = "write";
  def.dtypes = kAllTypes;
  def.min_inputs = def.max_inputs = 3;
  def.args = {{"dim", ArgKind::kInt, std::nullopt}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& self = *inputs[0];
    const ir::TensorType& index = *inputs[1];
    const ir::TensorType& source = *inputs[2];
    RETURN_IF_ERROR(CheckDTypes({inputs[0], inputs[2]}, kAllTypes, {}));
    RETURN_IF_ERROR(CheckInt64Index(index, "index_copy"));
    if (source.dtype != self.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("index_copy's source is ", ir::DTypeName(source.dtype), ", not self's ",
                       ir::DTypeName(self.dtype), " (neither does eager PyTorch)"));
    }
    if (index.rank() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("index_copy's index must be a vector, got rank ", index.rank()));
    }
    if (source.rank() != self.rank()) {
      return absl::UnimplementedError(absl::StrCat("index_copy with source rank ", source.rank(),
                                                   " and self rank ", self.rank(),
                                                   ": Kiln takes equal ranks"));
    }
    // A 0-dim self is one element along dim 0 (or -1), as in eager.
    ASSIGN_OR_RETURN(const int dim,
                     WrapDim(IntArg(node, "dim"), std::max<int64_t>(self.rank(), 1)));
    const ir::Dim count = index.rank() == 0 ? ir::Dim::Constant(1) : index.sizes[0];
    const ir::Dim rows = self.rank() == 0 ? ir::Dim::Constant(1) : source.sizes[dim];
    RETURN_IF_ERROR(Fits(count, rows, /*at_most=*/false,
                         absl::StrCat("index_copy's index length and source's size at dim ", dim)));
    for (int d = 0; d < static_cast<int>(self.rank()); ++d) {
      if (d == dim) continue;
      RETURN_IF_ERROR(Fits(source.sizes[d], self.sizes[d], /*at_most=*/false,
                           absl::StrCat("index_copy's source and self sizes at dim ", d)));
    }
    return std::vector<ir::TensorType>{ContiguousType(self.dtype, self.sizes)};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int self = node.inputs[0], index = node.inputs[1], source = node.inputs[2];
    const int rank = static_cast<int>(graph.values[self].rank());
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), std::max(rank, 1)));
    ExprBuilder b(ir::Definition::Kind::kScatter);
    ir::AffineMap index_map = ZeroMap(rank, static_cast<int>(graph.values[index].rank()));
    if (graph.values[index].rank() == 1 && rank > 0) index_map.coefficients[0][dim] = 1;
    const int position = b.LoadAt(index, std::move(index_map), DType::kInt64);
    const int element =
        b.LoadAt(source, ir::AffineMap::Identity(rank), ComputeType(graph.values[self].dtype));
    return std::vector<ir::Definition>{
        Assign(b, element, position, graph.values[source].sizes, self, dim, "index_copy")};
  };
  table.Add(std::move(def));
}

// scatter(self, dim, index, src) and scatter(self, dim, index, value) ->
// self's type: self with self[c with c[dim] = index[c]] = src[c] (or value)
// for each c of index's shape. index has self's rank and sizes no larger
// than src's, nor off `dim` than self's.
void AddScatter(OpTable& table, const std::string& overload) {
  const bool from_tensor = overload == "src";
  OpDef def;
  def.name = absl::StrCat("aten.scatter.", overload);
  def.family = "write";
  def.dtypes = kAllTypes;
  def.min_inputs = def.max_inputs = from_tensor ? 3 : 2;
  def.args = {{"dim", ArgKind::kInt, std::nullopt}};
  if (!from_tensor) def.args.push_back({"value", ArgKind::kScalar, std::nullopt});
  def.infer = [from_tensor](
                  const ir::Node& node,
                  const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& self = *inputs[0];
    const ir::TensorType& index = *inputs[1];
    RETURN_IF_ERROR(CheckDTypes({inputs[0]}, kAllTypes, {}));
    RETURN_IF_ERROR(CheckInt64Index(index, "scatter"));
    if (self.rank() == 0) {
      return absl::UnimplementedError("scatter of a 0-dim tensor: Kiln takes rank 1 and up");
    }
    if (index.rank() != self.rank()) {
      return absl::InvalidArgumentError(
          absl::StrCat("scatter's index has rank ", index.rank(), ", not self's ", self.rank()));
    }
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), self.rank()));
    for (int d = 0; d < static_cast<int>(self.rank()); ++d) {
      if (from_tensor) {
        const ir::TensorType& source = *inputs[2];
        if (source.dtype != self.dtype || source.rank() != self.rank()) {
          return absl::InvalidArgumentError(
              absl::StrCat("scatter's src is ", ir::DTypeName(source.dtype), " of rank ",
                           source.rank(), ", not self's ", ir::DTypeName(self.dtype), " of rank ",
                           self.rank(), " (neither does eager PyTorch)"));
        }
        RETURN_IF_ERROR(Fits(index.sizes[d], source.sizes[d], /*at_most=*/true,
                             absl::StrCat("scatter's index and src sizes at dim ", d)));
      }
      if (d == dim) continue;
      RETURN_IF_ERROR(Fits(index.sizes[d], self.sizes[d], /*at_most=*/true,
                           absl::StrCat("scatter's index and self sizes at dim ", d)));
    }
    return std::vector<ir::TensorType>{ContiguousType(self.dtype, self.sizes)};
  };
  def.lower = [from_tensor](const ir::Graph& graph,
                            const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int self = node.inputs[0], index = node.inputs[1];
    const int rank = static_cast<int>(graph.values[self].rank());
    const DType dtype = graph.values[self].dtype;
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), rank));
    ExprBuilder b(ir::Definition::Kind::kScatter);
    const int position = b.LoadAt(index, ir::AffineMap::Identity(rank), DType::kInt64);
    const double value = from_tensor ? 0 : ScalarArgAsDouble(node, "value");
    const int element =
        from_tensor
            ? b.LoadAt(node.inputs[2], ir::AffineMap::Identity(rank), ComputeType(dtype))
            : b.Constant(ir::IsFloatingPoint(dtype) ? RoundScalar(value, dtype) : std::trunc(value),
                         ComputeType(dtype));
    return std::vector<ir::Definition>{
        Assign(b, element, position, graph.values[index].sizes, self, dim, "scatter")};
  };
  table.Add(std::move(def));
}

}  // namespace

void RegisterWriteOps(OpTable& table) {
  AddIndexCopy(table);
  AddScatter(table, "src");
  AddScatter(table, "value");
}

}  // namespace kiln::ops
