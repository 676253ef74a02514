#include "cache/request_key.h"

#include <utility>

#include "codegen/guards.h"
#include "codegen/pipeline.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<KeyedRequest> KeyRequest(const kiln::v1::CompileRequest& request,
                                        const kiln::v1::Toolchain& toolchain) {
  KeyedRequest keyed;
  ASSIGN_OR_RETURN(keyed.inputs.graph, PrepareGraph(request.graph()));
  ASSIGN_OR_RETURN(keyed.inputs.guards, ResolveGuards(keyed.inputs.graph, request.guards()));
  keyed.inputs.options = request.options();
  keyed.inputs.toolchain = toolchain;
  keyed.key = ComputeCacheKey(keyed.inputs);
  return keyed;
}

}  // namespace kiln
