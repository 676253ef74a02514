// aten._linalg_check_errors(info, api_name, is_matrix): eager's check of a
// LAPACK call's info, which raises when a matrix was singular (or not
// positive definite, or the algorithm did not converge). It lowers to a
// loop in kiln_run over the info that stops the run at the first nonzero
// one: the runtime's linalg_error hears api_name, the matrix's position in
// the batch (-1 when is_matrix) and the info, and kiln_run returns
// KILN_RUN_LINALG_ERROR (abi/kiln_abi.h). Its result, a 0-dim int32 zero,
// is read by nothing: the op is an effect (OpDef::effect), kept for the
// error it can raise.
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/linalg_util.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"

namespace kiln::ops {

absl::Status CheckErrors(GraphBuilder& b, bool check_errors, int a, int info,
                         const char* api_name) {
  if (!check_errors) return absl::OkStatus();
  return b
      .Add("aten._linalg_check_errors.default", {info},
           {{"api_name", std::string(api_name)}, {"is_matrix", b.type(a).rank() == 2}})
      .status();
}

void RegisterLinalgCheckOps(OpTable& table) {
  OpDef def;
  def.name = "aten._linalg_check_errors.default";
  def.family = "linalg";
  def.dtypes = {ir::DType::kInt32};
  def.effect = true;
  def.args = {{"api_name", ArgKind::kString, std::nullopt},
              {"is_matrix", ArgKind::kBool, std::nullopt}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    if (inputs[0]->dtype != ir::DType::kInt32) {
      return absl::InvalidArgumentError(
          absl::StrCat("the info is ", ir::DTypeName(inputs[0]->dtype), ", not int32"));
    }
    // The name goes into the artifact's source as a string literal.
    const std::string& api_name = std::get<std::string>(Arg(node, "api_name"));
    if (api_name.empty() || api_name.size() > 64 ||
        !std::all_of(api_name.begin(), api_name.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
        })) {
      return absl::InvalidArgumentError(absl::StrCat(
          "api_name '", api_name, "' is not an op's name (letters, digits, '_' and '.')"));
    }
    return std::vector<ir::TensorType>{ContiguousType(ir::DType::kInt32, {})};
  };
  def.lower = [](const ir::Graph&,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kExtern;
    definition.function = "linalg_check";
    definition.operands = node.inputs;
    return std::vector<ir::Definition>{definition};
  };
  table.Add(std::move(def));
}

}  // namespace kiln::ops
