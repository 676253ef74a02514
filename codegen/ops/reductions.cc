// Reductions: sum, prod, amax, amin, argmax, argmin over any dims, with
// keepdim, max.dim / min.dim (values and positions), and max() / min(). Each is one
// Definition whose body loads the input at (kept coordinates, reduced
// coordinates); pointwise producers are later inlined into that body.
// mean/var/std are composites (composites.cc). And cumsum and cumprod,
// scans: one running sum or product along the dim, linear in its length.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// Which input dims a node reduces: `dim` (an int, a list, or None/absent
// meaning all dims).
absl::StatusOr<std::vector<bool>> ReducedDims(const ir::Node& node, int64_t rank) {
  std::vector<bool> reduced(rank, false);
  const std::vector<int64_t> dims = DimsArg(node);
  if (dims.empty()) {
    std::fill(reduced.begin(), reduced.end(), true);
    return reduced;
  }
  for (int64_t dim : dims) {
    ASSIGN_OR_RETURN(const int d, WrapDim(dim, std::max<int64_t>(rank, 1)));
    if (rank == 0) continue;
    if (reduced[d]) return absl::InvalidArgumentError(absl::StrCat("dim ", d, " appears twice"));
    reduced[d] = true;
  }
  return reduced;
}

DType ResultType(const std::string& combiner, const ir::Node& node, DType input) {
  if (combiner == "argmax" || combiner == "argmin") return DType::kInt64;
  if (Present(node, "dtype")) return DTypeArg(node, input);
  if ((combiner == "sum" || combiner == "prod") && !ir::IsFloatingPoint(input)) {
    return DType::kInt64;  // integer and bool sums promote, as in PyTorch
  }
  return input;
}

// The result type of `combiner` over node's input (dims and keepdim from
// the node), or why it cannot be taken.
absl::StatusOr<ir::TensorType> InferReduction(const std::string& combiner, const ir::Node& node,
                                              const ir::TensorType& input) {
  ASSIGN_OR_RETURN(const std::vector<bool> reduced, ReducedDims(node, input.rank()));
  std::vector<ir::Dim> sizes;
  for (int64_t d = 0; d < input.rank(); ++d) {
    if (!reduced[d]) {
      sizes.push_back(input.sizes[d]);
    } else if (BoolArg(node, "keepdim")) {
      sizes.push_back(ir::Dim::Constant(1));
    }
  }
  // An empty result has no element to give an identity to (softmax over
  // [N, 0, 0] takes its max over an empty dim into an empty [N, 0, 1]).
  const bool empty_result = std::any_of(
      sizes.begin(), sizes.end(), [](const ir::Dim& size) { return size == ir::Dim::Constant(0); });
  if (combiner != "sum" && combiner != "prod" && !empty_result) {
    for (int64_t d = 0; d < input.rank(); ++d) {
      if (reduced[d] && input.sizes[d] == ir::Dim::Constant(0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot take ", combiner == "max_nan_unspecified" ? "max" : combiner,
                         " over dim ", d, " of size 0 (no identity)"));
      }
    }
  }
  return ContiguousType(ResultType(combiner, node, input.dtype), std::move(sizes));
}

// The Definition of node's output `output` as `combiner` over its input.
absl::StatusOr<ir::Definition> LowerReduction(const std::string& combiner, const ir::Graph& graph,
                                              const ir::Node& node, int output) {
  const ir::TensorType& input = graph.values[node.inputs[0]];
  const ir::TensorType& result = graph.values[node.outputs[output]];
  ASSIGN_OR_RETURN(const std::vector<bool> reduced, ReducedDims(node, input.rank()));
  ir::Definition definition;
  definition.kind = ir::Definition::Kind::kReduction;
  definition.combiner = combiner;
  const int out_rank = static_cast<int>(result.rank());
  int reductions = 0;
  for (int64_t d = 0; d < input.rank(); ++d) {
    if (reduced[d]) {
      definition.reduction_sizes.push_back(input.sizes[d]);
      ++reductions;
    }
  }
  // The input's coordinates from (result coordinates, reduced coordinates).
  ir::AffineMap map;
  map.num_variables = out_rank + reductions;
  map.coefficients.assign(input.rank(), std::vector<int64_t>(map.num_variables, 0));
  map.offsets.assign(input.rank(), 0);
  int kept = 0, reduction = 0;
  for (int64_t d = 0; d < input.rank(); ++d) {
    if (reduced[d]) {
      map.coefficients[d][out_rank + reduction++] = 1;
      if (BoolArg(node, "keepdim")) ++kept;  // the size-1 result dim stays unused
    } else {
      map.coefficients[d][kept++] = 1;
    }
  }
  const bool arg = combiner == "argmax" || combiner == "argmin";
  DType accumulate = arg ? ComputeType(input.dtype) : ComputeType(result.dtype);
  // A bool max/min folds in int64: the emitter starts a max at the
  // literal for -inf, which as a bool is `true`.
  if (accumulate == DType::kBool) accumulate = DType::kInt64;
  ir::Expr load;
  load.kind = ir::Expr::Kind::kLoad;
  load.dtype = accumulate;
  load.value = node.inputs[0];
  load.index = std::move(map);
  definition.exprs.push_back(std::move(load));
  definition.root = 0;
  return definition;
}

// An op whose outputs are reductions of its one input, one combiner per
// output (max.dim: the max and its position). `refused`: input dtypes
// eager refuses too (argmax of bool).
void AddReduction(OpTable& table, const std::string& op, std::vector<std::string> combiners,
                  std::vector<ArgSpec> args, std::vector<DType> refused = {}) {
  OpDef def;
  def.name = op;
  def.family = "reduction";
  for (DType dtype : kAllTypes) {
    if (std::find(refused.begin(), refused.end(), dtype) == refused.end()) {
      def.dtypes.push_back(dtype);
    }
  }
  def.args = std::move(args);
  def.infer = [combiners, refused](
                  const ir::Node& node,
                  const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& input = *inputs[0];
    if (std::find(refused.begin(), refused.end(), input.dtype) != refused.end()) {
      return absl::InvalidArgumentError(absl::StrCat("does not take ", ir::DTypeName(input.dtype),
                                                     " inputs (neither does eager PyTorch)"));
    }
    std::vector<ir::TensorType> types;
    for (const std::string& combiner : combiners) {
      ASSIGN_OR_RETURN(ir::TensorType type, InferReduction(combiner, node, input));
      types.push_back(std::move(type));
    }
    return types;
  };
  def.lower = [combiners](const ir::Graph& graph,
                          const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    std::vector<ir::Definition> definitions;
    for (size_t i = 0; i < combiners.size(); ++i) {
      ASSIGN_OR_RETURN(ir::Definition definition,
                       LowerReduction(combiners[i], graph, node, static_cast<int>(i)));
      definitions.push_back(std::move(definition));
    }
    return definitions;
  };
  table.Add(std::move(def));
}

// cumsum(x, dim, dtype?) and cumprod: element i along `dim` is the sum
// (product) of elements 0..i, one running sum (product) per line
// (Definition::Kind::kScan, its combiner "sum" or "prod"), accumulated as
// eager's CPU kernels do: in double for float32, in float for 16-bit
// floats, in int64 for integers and bools (whose results are int64). A
// 0-dim x is its own.
void AddScan(OpTable& table, const std::string& op, const std::string& combiner) {
  OpDef def;
  def.name = op;
  def.family = "scan";
  def.dtypes = kAllTypes;
  def.args = {{"dim", ArgKind::kInt, std::nullopt},
              {"dtype", ArgKind::kDType, ir::ArgValue(ir::None{})}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& input = *inputs[0];
    RETURN_IF_ERROR(WrapDim(IntArg(node, "dim"), std::max<int64_t>(input.rank(), 1)).status());
    const DType result =
        DTypeArg(node, ir::IsFloatingPoint(input.dtype) ? input.dtype : DType::kInt64);
    if (result == DType::kBool) {
      return absl::InvalidArgumentError("does not make bool results (neither does eager PyTorch)");
    }
    return std::vector<ir::TensorType>{ContiguousType(result, input.sizes)};
  };
  def.lower = [combiner](const ir::Graph& graph,
                         const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const ir::TensorType& input = graph.values[node.inputs[0]];
    const DType result = graph.values[node.outputs[0]].dtype;
    const int rank = static_cast<int>(input.rank());
    const DType accumulate = result == DType::kFloat32 ? DType::kFloat64 : ComputeType(result);
    ExprBuilder b(rank == 0 ? ir::Definition::Kind::kPointwise : ir::Definition::Kind::kScan);
    const int element = b.Load(graph, node.inputs[0], rank, ComputeType(result));
    ir::Definition definition = b.Finish(rank == 0 ? element : b.Cast(element, accumulate));
    if (rank > 0) {
      ASSIGN_OR_RETURN(definition.axis, WrapDim(IntArg(node, "dim"), rank));
      definition.combiner = combiner;
    }
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

}  // namespace

void RegisterReductionOps(OpTable& table) {
  AddScan(table, "aten.cumsum.default", "sum");
  AddScan(table, "aten.cumprod.default", "prod");
  const ArgSpec keepdim{"keepdim", ArgKind::kBool, ir::ArgValue(false)};
  const ArgSpec dtype{"dtype", ArgKind::kDType, ir::ArgValue(ir::None{})};
  const ArgSpec dim_list{"dim", ArgKind::kIntList, ir::ArgValue(ir::None{})};
  const ArgSpec dim_one{"dim", ArgKind::kInt, ir::ArgValue(ir::None{})};
  AddReduction(table, "aten.sum.dim_IntList", {"sum"}, {dim_list, keepdim, dtype});
  AddReduction(table, "aten.sum.default", {"sum"}, {dtype});
  AddReduction(table, "aten.prod.dim_int", {"prod"}, {dim_one, keepdim, dtype});
  AddReduction(table, "aten.prod.default", {"prod"}, {dtype});
  AddReduction(table, "aten.amax.default", {"max"}, {dim_list, keepdim});
  // softmax's row max, which only shifts exp's argument: with a NaN in the
  // row its value is unspecified, as the NaN reaches every result through
  // the sum anyway. A plain compare per element instead of eager's NaN test.
  AddReduction(table, "kiln.softmax_max.default", {"max_nan_unspecified"}, {dim_list, keepdim});
  AddReduction(table, "aten.amin.default", {"min"}, {dim_list, keepdim});
  AddReduction(table, "aten.argmax.default", {"argmax"}, {dim_one, keepdim}, {DType::kBool});
  AddReduction(table, "aten.argmin.default", {"argmin"}, {dim_one, keepdim}, {DType::kBool});
  // x.max(dim): the values and their positions (the first of equal ones, a
  // NaN's where there is one), as amax and argmax; bool too, as in eager.
  const ArgSpec dim_required{"dim", ArgKind::kInt, std::nullopt};
  AddReduction(table, "aten.max.dim", {"max", "argmax"}, {dim_required, keepdim});
  AddReduction(table, "aten.min.dim", {"min", "argmin"}, {dim_required, keepdim});
  // x.max() and x.min(): over every element, as amax and amin.
  AddReduction(table, "aten.max.default", {"max"}, {});
  AddReduction(table, "aten.min.default", {"min"}, {});
}

}  // namespace kiln::ops
