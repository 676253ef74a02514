#include "codegen/ops/ops_doc.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/ops/op_table.h"

namespace kiln::ops {
namespace {

std::string ArgText(const ArgSpec& arg) {
  if (arg.kind == ArgKind::kOptionalTensor) return absl::StrCat(arg.name, " (optional tensor)");
  if (!arg.default_value.has_value()) return arg.name;
  ir::Graph no_symbols;
  return absl::StrCat(arg.name, "=", ir::ToString(*arg.default_value, no_symbols));
}

}  // namespace

std::string OpsMarkdown() {
  std::string text =
      "# Supported ops\n\n"
      "Generated from the op table (`codegen/ops/`) by `kiln ops`; a test fails when this\n"
      "file and the table disagree. Regenerate: `bazel run //tools/kiln -- ops > docs/OPS.md`.\n\n"
      "An op not listed here is refused with `Unimplemented`, naming the node and the op.\n"
      "Composites are rewritten into other ops before lowering; `kiln.*` ops are internal.\n"
      "16-bit floats compute in float32 inside a kernel and are rounded when stored.\n\n"
      "| op | family | tensor inputs | arguments (default) | dtypes |\n"
      "| --- | --- | --- | --- | --- |\n";
  for (const auto& [name, op] : OpTable::Get().ops()) {
    const std::string inputs = op.min_inputs == op.max_inputs
                                   ? absl::StrCat(op.min_inputs)
                                   : absl::StrCat(op.min_inputs, "–", op.max_inputs);
    std::vector<std::string> args;
    for (const ArgSpec& arg : op.args) args.push_back(ArgText(arg));
    std::vector<std::string> dtypes;
    for (ir::DType dtype : op.dtypes) dtypes.push_back(ir::DTypeName(dtype));
    absl::StrAppend(&text, "| `", name, "` | ", op.family, " | ", inputs, " | ",
                    args.empty() ? "" : absl::StrCat("`", absl::StrJoin(args, "`, `"), "`"), " | ",
                    absl::StrJoin(dtypes, ", "), " |\n");
  }
  return text;
}

}  // namespace kiln::ops
