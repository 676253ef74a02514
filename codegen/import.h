// The boundary between the wire format and codegen: kiln.v1.Graph -> ir::Graph.
//
// Checks what only the proto can get wrong (dangling or duplicate value ids,
// use before definition, unset dtypes, duplicate argument names); op-level
// checks (unknown op, arity, shapes) are the verifier's (passes/verify.h).
#ifndef KILN_CODEGEN_IMPORT_H_
#define KILN_CODEGEN_IMPORT_H_

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "proto/graph.pb.h"

namespace kiln {

// InvalidArgument naming the node or input on malformed graphs.
absl::StatusOr<ir::Graph> ImportGraph(const kiln::v1::Graph& graph);

// The declared type, converted. Symbols are looked up (or added) in `graph`.
// Callers hold the result to limits::CheckTensorType: contiguous strides
// that would overflow int64 are left empty, for that check to refuse.
absl::StatusOr<ir::TensorType> ImportTensorType(const kiln::v1::TensorType& type, ir::Graph& graph);

kiln::v1::TensorType ExportTensorType(const ir::TensorType& type, const ir::Graph& graph);
kiln::v1::DType ExportDType(ir::DType dtype);

// "node 3 'add_1' (aten.add.Tensor)": how errors name a node.
std::string NodeLabel(const ir::Graph& graph, int node_index);

}  // namespace kiln

#endif  // KILN_CODEGEN_IMPORT_H_
