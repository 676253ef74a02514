// Pass: verify (the pipeline's entry check).
//
// Requires: a graph from ImportGraph (value ids resolved, topological order).
// Guarantees, or returns the first violation naming the node:
//   - every op name has the form <namespace>.<op>.<overload> (else
//     InvalidArgument) and is in the op table (else Unimplemented: a real
//     op Kiln lacks, ATen's or a library's own);
//   - input counts and arguments match the op's schema (InvalidArgument);
//   - each declared result dtype and shape equals what the inputs imply
//     (InvalidArgument) — later passes trust graph.values.
#ifndef KILN_CODEGEN_PASSES_VERIFY_H_
#define KILN_CODEGEN_PASSES_VERIFY_H_

#include "absl/status/status.h"
#include "codegen/ir.h"

namespace kiln {

absl::Status VerifyGraph(const ir::Graph& graph);

}  // namespace kiln

#endif  // KILN_CODEGEN_PASSES_VERIFY_H_
