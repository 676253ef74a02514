// View ops: a new index map onto the same data. Never a copy.
#include <numeric>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

// The permutation a node applies: result dim d is input dim perm[d].
absl::StatusOr<std::vector<int>> Permutation(const ir::Node& node, int64_t rank) {
  std::vector<int> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  if (node.op == "aten.permute.default") {
    const std::vector<int64_t> dims = IntListArg(node, "dims");
    if (static_cast<int64_t>(dims.size()) != rank) {
      return absl::InvalidArgumentError(absl::StrCat("dims has ", dims.size(),
                                                     " entries for a tensor of rank ", rank));
    }
    std::vector<bool> seen(rank, false);
    for (int64_t d = 0; d < rank; ++d) {
      ASSIGN_OR_RETURN(perm[d], WrapDim(dims[d], rank));
      if (seen[perm[d]]) {
        return absl::InvalidArgumentError(absl::StrCat("dims repeats dim ", perm[d]));
      }
      seen[perm[d]] = true;
    }
  } else if (node.op == "aten.t.default") {
    if (rank > 2) {
      return absl::InvalidArgumentError(absl::StrCat("t() expects rank <= 2, got rank ", rank));
    }
    if (rank == 2) std::swap(perm[0], perm[1]);
  } else {  // aten.transpose.int
    if (rank == 0) return perm;
    ASSIGN_OR_RETURN(const int dim0, WrapDim(IntArg(node, "dim0"), rank));
    ASSIGN_OR_RETURN(const int dim1, WrapDim(IntArg(node, "dim1"), rank));
    std::swap(perm[dim0], perm[dim1]);
  }
  return perm;
}

void AddPermutation(OpTable& table, const std::string& op, std::vector<ArgSpec> args) {
  OpDef def;
  def.name = op;
  def.family = "view";
  def.dtypes = {ir::DType::kFloat32, ir::DType::kFloat64};
  def.args = std::move(args);
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& input = *inputs[0];
    ASSIGN_OR_RETURN(const std::vector<int> perm, Permutation(node, input.rank()));
    ir::TensorType result = input;
    for (size_t d = 0; d < perm.size(); ++d) {
      result.sizes[d] = input.sizes[perm[d]];
      result.strides[d] = input.strides[perm[d]];
    }
    return std::vector<ir::TensorType>{std::move(result)};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int64_t rank = graph.values[node.inputs[0]].rank();
    ASSIGN_OR_RETURN(const std::vector<int> perm, Permutation(node, rank));
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kView;
    definition.source = node.inputs[0];
    definition.map = ir::AffineMap::Identity(static_cast<int>(rank));
    for (int64_t d = 0; d < rank; ++d) {
      std::fill(definition.map.coefficients[perm[d]].begin(),
                definition.map.coefficients[perm[d]].end(), 0);
    }
    for (int64_t d = 0; d < rank; ++d) definition.map.coefficients[perm[d]][d] = 1;
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

}  // namespace

void RegisterViewOps(OpTable& table) {
  AddPermutation(table, "aten.permute.default", {{"dims", ArgKind::kIntList, std::nullopt}});
  AddPermutation(table, "aten.t.default", {});
  AddPermutation(table, "aten.transpose.int",
                 {{"dim0", ArgKind::kInt, std::nullopt}, {"dim1", ArgKind::kInt, std::nullopt}});
}

}  // namespace kiln::ops
