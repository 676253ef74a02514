// The pipeline's first stage, before keying (codegen/pipeline.h has the
// whole list):
//
//   import -> verify -> canonicalize        (PrepareGraph)
//
// The cache key hashes the canonical graph, so clients run this too; it
// links the op table but no later pass and no emitter. A pure function of
// its input.
#ifndef KILN_CODEGEN_PREPARE_H_
#define KILN_CODEGEN_PREPARE_H_

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "proto/graph.pb.h"

namespace kiln {

// Wire graph -> verified, canonical IR. InvalidArgument / Unimplemented name
// the offending node.
absl::StatusOr<ir::Graph> PrepareGraph(const kiln::v1::Graph& graph);

}  // namespace kiln

#endif  // KILN_CODEGEN_PREPARE_H_
