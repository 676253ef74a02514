// kiln ops: the supported ops, as Markdown (docs/OPS.md).
#include <iostream>

#include "absl/flags/flag.h"
#include "codegen/ops/ops_doc.h"
#include "common/status_macros.h"
#include "tools/kiln/commands/command.h"

namespace kiln {
namespace {

absl::Status Ops(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln ops"));
  std::cout << ops::OpsMarkdown();
  return absl::OkStatus();
}

}  // namespace

const Command kOpsCommand = {
    "ops", "", "the supported ops, as Markdown (docs/OPS.md)", {}, "kiln ops > ops.md", Ops};

}  // namespace kiln
