#include "codegen/prepare.h"

#include "codegen/import.h"
#include "codegen/passes/canonicalize.h"
#include "codegen/passes/verify.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<ir::Graph> PrepareGraph(const kiln::v1::Graph& graph) {
  ASSIGN_OR_RETURN(ir::Graph imported, ImportGraph(graph));
  RETURN_IF_ERROR(VerifyGraph(imported));
  return Canonicalize(imported);
}

}  // namespace kiln
