// kiln.check_index(index, op, dim, size, from_the_end): eager's bounds
// check of a lookup's index (embedding, index_select, gather, x[index];
// passes/check_lookups.h adds one per lookup of the user's graph). It lowers
// to a loop in kiln_run over the index that stops the run at the first entry
// outside [0, size) ([-size, size) with from_the_end):
// the runtime's index_error hears op, dim, the entry and size, and kiln_run
// returns KILN_RUN_INDEX_ERROR (abi/kiln_abi.h). Its result, a 0-dim int32
// zero, is read by nothing: the op is an effect (OpDef::effect), kept for
// the error it can raise.
#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"

namespace kiln::ops {

void RegisterIndexCheckOps(OpTable& table) {
  OpDef def;
  def.name = "kiln.check_index.default";
  def.family = "lookup";
  def.dtypes = {ir::DType::kInt64, ir::DType::kInt32};
  def.effect = true;
  def.args = {{"op", ArgKind::kString, std::nullopt},
              {"dim", ArgKind::kInt, std::nullopt},
              {"size", ArgKind::kSize, std::nullopt},
              {"from_the_end", ArgKind::kBool, false}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::DType dtype = inputs[0]->dtype;
    if (dtype != ir::DType::kInt64 && dtype != ir::DType::kInt32) {
      return absl::InvalidArgumentError(
          absl::StrCat("the index is ", ir::DTypeName(dtype), ", not int64 or int32"));
    }
    // The name goes into the artifact's source as a string literal.
    const std::string& op = std::get<std::string>(Arg(node, "op"));
    if (op.empty() || op.size() > 64 || !std::all_of(op.begin(), op.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
        })) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", op, "' is not an op's name (letters, digits and '_')"));
    }
    return std::vector<ir::TensorType>{ContiguousType(ir::DType::kInt32, {})};
  };
  def.lower = [](const ir::Graph&,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kExtern;
    definition.function = "index_check";
    definition.operands = node.inputs;
    return std::vector<ir::Definition>{definition};
  };
  table.Add(std::move(def));
}

}  // namespace kiln::ops
