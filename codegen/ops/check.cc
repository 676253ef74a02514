// kiln_check.check(ok, error, message): a check eager makes on values (a
// negative weight, a start outside its dim), as the tracer's forms of those
// ops write it (client/python/kiln/_checks.py). Every element of the bool
// tensor `ok` must be true; at the first false one the run stops: the
// runtime's check_error hears `error` (the exception eager raises:
// RuntimeError, ValueError or IndexError) and `message`, and kiln_run
// returns KILN_RUN_CHECK_ERROR (abi/kiln_abi.h). Its result, a 0-dim int32
// zero, is read by nothing: the op is an effect (OpDef::effect).
#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"

namespace kiln::ops {

void RegisterCheckOps(OpTable& table) {
  OpDef def;
  def.name = "kiln_check.check.default";
  def.family = "check";
  def.dtypes = {ir::DType::kBool};
  def.effect = true;
  def.args = {{"error", ArgKind::kString, std::nullopt},
              {"message", ArgKind::kString, std::nullopt}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    if (inputs[0]->dtype != ir::DType::kBool) {
      return absl::InvalidArgumentError(
          absl::StrCat("the condition is ", ir::DTypeName(inputs[0]->dtype), ", not bool"));
    }
    const std::string& error = std::get<std::string>(Arg(node, "error"));
    if (error != "RuntimeError" && error != "ValueError" && error != "IndexError") {
      return absl::InvalidArgumentError(absl::StrCat(
          "error '", error, "' is not one a check raises (RuntimeError, ValueError, IndexError)"));
    }
    if (std::get<std::string>(Arg(node, "message")).size() > 256) {
      return absl::InvalidArgumentError("a check's message has more than 256 characters");
    }
    return std::vector<ir::TensorType>{ContiguousType(ir::DType::kInt32, {})};
  };
  def.lower = [](const ir::Graph&,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kExtern;
    definition.function = "check";
    definition.operands = node.inputs;
    return std::vector<ir::Definition>{definition};
  };
  table.Add(std::move(def));
}

}  // namespace kiln::ops
