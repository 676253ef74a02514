#include "codegen/ops/batched_matrices.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

std::vector<ir::SymExpr> Sizes(const std::vector<ir::Dim>& dims) {
  std::vector<ir::SymExpr> sizes;
  for (const ir::Dim& dim : dims) sizes.push_back(ir::SymExpr::Of(dim));
  return sizes;
}

}  // namespace

const std::vector<ir::DType> kLapackTypes = {ir::DType::kFloat32, ir::DType::kFloat64};

OpDef LapackCallOp(std::string name, int min_inputs, int max_inputs, std::optional<int64_t> routine,
                   decltype(OpDef::infer) infer) {
  OpDef def;
  def.name = std::move(name);
  def.family = "linalg";
  def.dtypes = kLapackTypes;
  def.min_inputs = min_inputs;
  def.max_inputs = max_inputs;
  def.args = {{"routine", ArgKind::kInt,
               routine ? std::optional<ir::ArgValue>(ir::ArgValue(*routine)) : std::nullopt},
              {"flags", ArgKind::kInt, ir::ArgValue(int64_t{0})}};
  def.infer = std::move(infer);
  def.lower = [](const ir::Graph&,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    std::vector<ir::Definition> definitions(node.outputs.size());
    for (ir::Definition& definition : definitions) {
      definition.kind = ir::Definition::Kind::kExtern;
      definition.function = "linalg";
      definition.operands = node.inputs;
    }
    return definitions;
  };
  return def;
}

std::vector<ir::Dim> BatchDims(const ir::TensorType& type, int matrix_rank) {
  return std::vector<ir::Dim>(type.sizes.begin(), type.sizes.end() - matrix_rank);
}

absl::StatusOr<int> Flatten(GraphBuilder& b, int value, int matrix_rank) {
  const ir::TensorType type = b.type(value);
  std::vector<ir::SymExpr> sizes = {ir::SymExpr::Constant(1)};
  for (int64_t d = 0; d < type.rank(); ++d) {
    if (d < type.rank() - matrix_rank) {
      sizes[0] = sizes[0] * ir::SymExpr::Of(type.sizes[d]);
    } else {
      sizes.push_back(ir::SymExpr::Of(type.sizes[d]));
    }
  }
  return b.Add("aten.reshape.default", {value}, {{"size", sizes}});
}

absl::StatusOr<int> Unflatten(GraphBuilder& b, int value, const std::vector<ir::Dim>& batch) {
  const ir::TensorType type = b.type(value);
  std::vector<ir::Dim> dims = batch;
  dims.insert(dims.end(), type.sizes.begin() + 1, type.sizes.end());
  return b.Add("aten.reshape.default", {value}, {{"size", Sizes(dims)}});
}

absl::StatusOr<std::vector<ir::Dim>> BroadcastBatch(const GraphBuilder& b,
                                                    const std::vector<int>& values,
                                                    const std::vector<int>& matrix_ranks) {
  std::vector<ir::Dim> batch;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::vector<ir::Dim> dims = BatchDims(b.type(values[i]), matrix_ranks[i]);
    if (dims.size() > batch.size()) batch.insert(batch.begin(), dims.size() - batch.size(), {1});
    for (size_t d = 0; d < dims.size(); ++d) {
      ir::Dim& into = batch[batch.size() - dims.size() + d];
      if (dims[d] == into || dims[d] == ir::Dim::Constant(1)) continue;
      if (into != ir::Dim::Constant(1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("the batch dims of ", Shape(b.type(values[0])), " and ",
                         Shape(b.type(values[i])), " do not broadcast"));
      }
      into = dims[d];
    }
  }
  return batch;
}

absl::StatusOr<int> ExpandAndFlatten(GraphBuilder& b, int value, int matrix_rank,
                                     const std::vector<ir::Dim>& batch) {
  const ir::TensorType type = b.type(value);
  std::vector<ir::Dim> sizes = batch;
  sizes.insert(sizes.end(), type.sizes.end() - matrix_rank, type.sizes.end());
  if (sizes != type.sizes) {
    ASSIGN_OR_RETURN(value, b.Add("aten.expand.default", {value}, {{"size", Sizes(sizes)}}));
  }
  return Flatten(b, value, matrix_rank);
}

absl::StatusOr<int> Transpose(GraphBuilder& b, int value) {
  return b.Add("aten.transpose.int", {value}, {{"dim0", int64_t{-2}}, {"dim1", int64_t{-1}}});
}

absl::Status RequireMatrix(const ir::TensorType& type, const char* what) {
  if (type.rank() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " expects a matrix or a batch of them, got ", Shape(type)));
  }
  return absl::OkStatus();
}

absl::StatusOr<ir::Dim> MinDim(const ir::Dim& a, const ir::Dim& b, const ir::TensorType& type,
                               const char* what) {
  if (a == b) return a;
  if (a.is_symbolic() || b.is_symbolic()) {
    return absl::UnimplementedError(
        absl::StrCat(what, " of ", Shape(type), ": a non-square matrix needs static sizes"));
  }
  return ir::Dim::Constant(std::min(a.constant, b.constant));
}

bool AtLeast(const ir::Dim& a, const ir::Dim& b) {
  return a == b || (!a.is_symbolic() && !b.is_symbolic() && a.constant >= b.constant);
}

}  // namespace kiln::ops
