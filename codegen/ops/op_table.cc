#include "codegen/ops/op_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "common/status_macros.h"

namespace kiln::ops {

const OpTable& OpTable::Get() {
  static const OpTable* const table = [] {
    auto* built = new OpTable();
    RegisterPointwiseOps(*built);
    RegisterActivationOps(*built);
    RegisterViewOps(*built);
    RegisterGemmOps(*built);
    RegisterConvolutionOps(*built);
    RegisterReductionOps(*built);
    RegisterCreationOps(*built);
    RegisterCompositeOps(*built);
    RegisterRearrangeOps(*built);
    RegisterPoolingOps(*built);
    RegisterNormalizationOps(*built);
    RegisterLookupOps(*built);
    RegisterComplexOps(*built);
    RegisterWriteOps(*built);
    RegisterSpecialOps(*built);
    RegisterLinalgOps(*built);
    RegisterQrOps(*built);
    RegisterLstsqOps(*built);
    RegisterMatrixExpOps(*built);
    RegisterLdlOps(*built);
    RegisterEigOps(*built);
    RegisterSpectralOps(*built);
    RegisterLinalgCheckOps(*built);
    RegisterScatterOps(*built);
    RegisterSortingOps(*built);
    RegisterIntegerOps(*built);
    RegisterIeeeOps(*built);
    RegisterAttentionOps(*built);
    RegisterRandomOps(*built);
    RegisterIndexCheckOps(*built);
    RegisterFractionalMaxPoolOps(*built);
    RegisterCheckOps(*built);
    return built;
  }();
  return *table;
}

const OpDef* OpTable::Find(absl::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

void OpTable::Add(OpDef op) {
  const std::string name = op.name;
  ops_.emplace(name, std::move(op));
}

std::string Shape(const ir::TensorType& type) {
  std::string text;
  for (const ir::Dim& dim : type.sizes) {
    absl::StrAppend(&text, text.empty() ? "" : ", ",
                    ir::ToString(ir::SymExpr::Of(dim), ir::Graph()));
  }
  return absl::StrCat("[", text, "]");
}

const ir::ArgValue& Arg(const ir::Node& node, const std::string& name) {
  // The verifier has checked presence (and filled defaults) before any type
  // rule or lowering runs.
  return node.args.at(name);
}

bool Present(const ir::Node& node, const std::string& name) {
  auto it = node.args.find(name);
  return it != node.args.end() && !std::holds_alternative<ir::None>(it->second);
}

int64_t IntArg(const ir::Node& node, const std::string& name) {
  return std::get<int64_t>(Arg(node, name));
}

double ScalarArgAsDouble(const ir::Node& node, const std::string& name) {
  const ir::ArgValue& value = Arg(node, name);
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? 1.0 : 0.0;
  return std::get<double>(value);
}

std::vector<int64_t> IntListArg(const ir::Node& node, const std::string& name) {
  return std::get<std::vector<int64_t>>(Arg(node, name));
}

ir::SymExpr SizeArg(const ir::Node& node, const std::string& name) {
  const ir::ArgValue& value = Arg(node, name);
  if (const auto* expr = std::get_if<ir::SymExpr>(&value)) return expr->Canonicalized();
  return ir::SymExpr::Constant(std::get<int64_t>(value));
}

std::vector<ir::SymExpr> SizeListArg(const ir::Node& node, const std::string& name) {
  const ir::ArgValue& value = Arg(node, name);
  if (const auto* list = std::get_if<std::vector<ir::SymExpr>>(&value)) {
    std::vector<ir::SymExpr> sizes;
    for (const ir::SymExpr& size : *list) sizes.push_back(size.Canonicalized());
    return sizes;
  }
  std::vector<ir::SymExpr> sizes;
  for (int64_t size : std::get<std::vector<int64_t>>(value)) {
    sizes.push_back(ir::SymExpr::Constant(size));
  }
  return sizes;
}

bool BoolArg(const ir::Node& node, const std::string& name) {
  auto it = node.args.find(name);
  return it != node.args.end() && std::holds_alternative<bool>(it->second) &&
         std::get<bool>(it->second);
}

ir::DType DTypeArg(const ir::Node& node, ir::DType fallback) {
  auto it = node.args.find("dtype");
  if (it != node.args.end() && std::holds_alternative<ir::DType>(it->second)) {
    return std::get<ir::DType>(it->second);
  }
  return fallback;
}

std::vector<int64_t> DimsArg(const ir::Node& node) {
  auto it = node.args.find("dim");
  if (it == node.args.end()) return {};
  if (const auto* list = std::get_if<std::vector<int64_t>>(&it->second)) return *list;
  if (const auto* one = std::get_if<int64_t>(&it->second)) return {*one};
  return {};
}

absl::StatusOr<int> WrapDim(int64_t dim, int64_t rank) {
  const int64_t wrapped = dim < 0 ? dim + rank : dim;
  if (wrapped < 0 || wrapped >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim ", dim, " is out of range for a tensor of rank ", rank));
  }
  return static_cast<int>(wrapped);
}

namespace {

bool Matches(ArgKind kind, const ir::ArgValue& value) {
  switch (kind) {
    case ArgKind::kInt:
      return std::holds_alternative<int64_t>(value);
    case ArgKind::kFloat:
      return std::holds_alternative<double>(value) || std::holds_alternative<int64_t>(value);
    case ArgKind::kScalar:
      return std::holds_alternative<double>(value) || std::holds_alternative<int64_t>(value) ||
             std::holds_alternative<bool>(value);
    case ArgKind::kBool:
      return std::holds_alternative<bool>(value);
    case ArgKind::kIntList:
      return std::holds_alternative<std::vector<int64_t>>(value);
    case ArgKind::kSizeList:
      return std::holds_alternative<std::vector<int64_t>>(value) ||
             std::holds_alternative<std::vector<ir::SymExpr>>(value);
    case ArgKind::kSize:
      return std::holds_alternative<int64_t>(value) || std::holds_alternative<ir::SymExpr>(value);
    case ArgKind::kScalarOrSize:
      return std::holds_alternative<double>(value) || std::holds_alternative<int64_t>(value) ||
             std::holds_alternative<bool>(value) || std::holds_alternative<ir::SymExpr>(value);
    case ArgKind::kBoolList:
      return std::holds_alternative<std::vector<bool>>(value);
    case ArgKind::kDType:
      return std::holds_alternative<ir::DType>(value);
    case ArgKind::kString:
      return std::holds_alternative<std::string>(value);
    case ArgKind::kOptionalTensor:
      return std::holds_alternative<ir::None>(value) || std::holds_alternative<bool>(value);
  }
  return false;
}

const char* KindName(ArgKind kind) {
  switch (kind) {
    case ArgKind::kInt:
      return "an int";
    case ArgKind::kFloat:
      return "a float";
    case ArgKind::kScalar:
      return "a scalar";
    case ArgKind::kBool:
      return "a bool";
    case ArgKind::kIntList:
      return "an int list";
    case ArgKind::kSizeList:
      return "a size list";
    case ArgKind::kSize:
      return "a size";
    case ArgKind::kScalarOrSize:
      return "a scalar or a size";
    case ArgKind::kBoolList:
      return "a bool list";
    case ArgKind::kDType:
      return "a dtype";
    case ArgKind::kString:
      return "a string";
    case ArgKind::kOptionalTensor:
      return "none (an absent optional tensor)";
  }
  return "?";
}

}  // namespace

absl::StatusOr<ir::Node> WithDefaults(const ir::Node& node, const OpDef& op) {
  ir::Node result = node;
  for (const auto& [name, value] : node.args) {
    auto spec = std::find_if(op.args.begin(), op.args.end(),
                             [&name = name](const ArgSpec& arg) { return arg.name == name; });
    if (spec == op.args.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", name, "'"));
    }
    const bool none_allowed =
        spec->default_value.has_value() && std::holds_alternative<ir::None>(*spec->default_value);
    if (!Matches(spec->kind, value) && !(none_allowed && std::holds_alternative<ir::None>(value))) {
      if (std::holds_alternative<ir::SymExpr>(value)) {
        return absl::UnimplementedError(
            absl::StrCat("argument '", name, "' follows a symbolic size, and ", node.op, " takes ",
                         KindName(spec->kind),
                         " there: trace the dims it follows static, or compute it "
                         "outside the function and pass the result as an input"));
      }
      return absl::InvalidArgumentError(
          absl::StrCat("argument '", name, "' must be ", KindName(spec->kind)));
    }
  }
  for (const ArgSpec& spec : op.args) {
    if (result.args.count(spec.name)) continue;
    if (!spec.default_value.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("missing argument '", spec.name, "'"));
    }
    result.args.emplace(spec.name, *spec.default_value);
  }
  // Optional tensors follow the required ones, one input each when present
  // (found by fuzzing: a layer norm with a bias and no weight input).
  int optional = 0, present = 0;
  for (const ArgSpec& spec : op.args) {
    if (spec.kind != ArgKind::kOptionalTensor) continue;
    ++optional;
    present += Present(result, spec.name);
  }
  const size_t expected = op.max_inputs - optional + present;
  if (optional > 0 && node.inputs.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("has ", node.inputs.size(), " tensor inputs, but its arguments say ", expected,
                     " (", present, " of ", optional, " optional tensors present)"));
  }
  return result;
}

absl::Status RequireStatic(const ir::TensorType& type, absl::string_view what) {
  if (!type.is_static()) {
    return absl::UnimplementedError(absl::StrCat(what, " has symbolic sizes, not supported yet"));
  }
  return absl::OkStatus();
}

absl::Status CheckDTypes(const InputTypes& inputs, const std::vector<ir::DType>& dtypes,
                         const std::vector<ir::DType>& refused) {
  for (const ir::TensorType* input : inputs) {
    if (std::find(refused.begin(), refused.end(), input->dtype) != refused.end()) {
      return absl::InvalidArgumentError(absl::StrCat("does not take ", ir::DTypeName(input->dtype),
                                                     " inputs (neither does eager PyTorch)"));
    }
    if (std::find(dtypes.begin(), dtypes.end(), input->dtype) == dtypes.end()) {
      return absl::UnimplementedError(
          absl::StrCat(ir::DTypeName(input->dtype), " inputs are not supported yet"));
    }
  }
  return absl::OkStatus();
}

ir::SymExpr ElementCount(const ir::TensorType& type, const std::vector<int64_t>& dims) {
  ir::SymExpr count = ir::SymExpr::Constant(1);
  // A 0-dim tensor's dim 0 (as reductions wrap it) is the one element.
  if (type.rank() == 0) return count;
  for (int64_t d : dims) count = count * ir::SymExpr::Of(type.sizes[d]);
  return count;
}

absl::StatusOr<int> ByCount(GraphBuilder& b, const char* op, int x, const ir::SymExpr& count) {
  if (count.is_constant()) {
    return b.Add(op, {x}, {{"other", static_cast<double>(count.constant())}});
  }
  ASSIGN_OR_RETURN(const int size,
                   b.Add("kiln.size.default", {}, {{"size", count}, {"dtype", b.type(x).dtype}}));
  return b.Add(op, {x, size});
}

void AddComposite(OpTable& table, const std::string& op, int min_inputs, int max_inputs,
                  std::vector<ArgSpec> args, Decomposition decompose, std::vector<ir::DType> dtypes,
                  std::vector<ir::DType> refused, std::string family, int checked_inputs) {
  OpDef def;
  def.name = op;
  def.family = std::move(family);
  def.dtypes = dtypes;
  def.min_inputs = min_inputs;
  def.max_inputs = max_inputs;
  def.args = std::move(args);
  def.infer = [decompose, dtypes, refused, checked_inputs](
                  const ir::Node& node,
                  const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const InputTypes checked(inputs.begin(),
                             checked_inputs < 0 || checked_inputs > static_cast<int>(inputs.size())
                                 ? inputs.end()
                                 : inputs.begin() + checked_inputs);
    RETURN_IF_ERROR(CheckDTypes(checked, dtypes, refused));
    ir::Graph scratch;
    ir::Node copy = node;
    copy.inputs.clear();
    for (const ir::TensorType* type : inputs) {
      copy.inputs.push_back(scratch.AddValue(*type, -1));
      scratch.inputs.push_back(copy.inputs.back());
    }
    GraphBuilder builder(scratch);
    ASSIGN_OR_RETURN(const std::vector<int> results, decompose(builder, copy));
    std::vector<ir::TensorType> types;
    for (int result : results) {
      ir::TensorType type = scratch.values[result];
      type.strides = ir::ContiguousStrides(type.sizes);
      types.push_back(std::move(type));
    }
    return types;
  };
  def.decompose = std::move(decompose);
  table.Add(std::move(def));
}

}  // namespace kiln::ops
