#include "codegen/emit/functions.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace kiln {
namespace {

struct Function {
  int arity;
  const char* text;  // {0}, {1}: operands; {zero}: 0 in the compute type
};

const std::map<std::string, Function>& Table() {
  static const auto* const table = new std::map<std::string, Function>{
      {"add", {2, "({0} + {1})"}},
      {"sub", {2, "({0} - {1})"}},
      {"mul", {2, "({0} * {1})"}},
      {"div", {2, "({0} / {1})"}},
      {"relu", {1, "({0} < {zero} ? {zero} : {0})"}},
  };
  return *table;
}

}  // namespace

std::string EmitLiteral(double value, ir::DType dtype) {
  const bool single = dtype == ir::DType::kFloat32;
  if (std::isnan(value)) return single ? "__builtin_nanf(\"\")" : "__builtin_nan(\"\")";
  if (std::isinf(value)) {
    return absl::StrCat(value < 0 ? "-" : "", single ? "__builtin_inff()" : "__builtin_inf()");
  }
  if (single) return absl::StrFormat("%af", static_cast<double>(static_cast<float>(value)));
  return absl::StrFormat("%a", value);
}

const char* StorageCType(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kFloat32: return "float";
    case ir::DType::kFloat64: return "double";
    case ir::DType::kInt64: return "long long";
    case ir::DType::kInt32: return "int";
    case ir::DType::kBool: return "unsigned char";
    case ir::DType::kFloat16:
    case ir::DType::kBFloat16: return "unsigned short";
  }
  return "void";
}

absl::StatusOr<std::string> EmitFunction(const std::string& function,
                                         const std::vector<std::string>& operands,
                                         ir::DType dtype) {
  auto it = Table().find(function);
  if (it == Table().end()) {
    return absl::NotFoundError(absl::StrCat("no pointwise function '", function, "'"));
  }
  if (static_cast<int>(operands.size()) != it->second.arity) {
    return absl::InternalError(absl::StrCat("function '", function, "' takes ", it->second.arity,
                                            " operands, got ", operands.size()));
  }
  std::vector<std::pair<std::string, std::string>> replacements = {
      {"{zero}", EmitLiteral(0.0, dtype)}};
  for (size_t i = 0; i < operands.size(); ++i) {
    replacements.push_back({absl::StrCat("{", i, "}"), operands[i]});
  }
  return absl::StrReplaceAll(it->second.text, replacements);
}

}  // namespace kiln
