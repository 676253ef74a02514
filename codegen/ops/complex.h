// Complex numbers: how each op Kiln runs on complex64 / complex128 values
// computes, as real ops over (real, imaginary) pairs.
//
// A complex value of sizes [d...] stands, after passes/split_complex.h, for
// a real value of sizes [d..., 2] in its part type (float32 for complex64):
// the memory torch gives (interleaved pairs), so inputs and outputs need no
// conversion, and the real ops the pairs become fuse and vectorize as any
// other (a kernel of std::complex would call libgcc's __mulsc3 per product
// and keep every loop scalar). FFTs are one call each through the runtime
// (client/runtime/fft.h, FFTW).
#ifndef KILN_CODEGEN_OPS_COMPLEX_H_
#define KILN_CODEGEN_OPS_COMPLEX_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codegen/graph_builder.h"
#include "codegen/ir.h"
#include "codegen/ops/op_table.h"

namespace kiln::ops {

struct ComplexRule {
  // The result types of a node with a complex input or result (arguments
  // checked and defaults filled in, as for OpDef::infer).
  std::function<absl::StatusOr<std::vector<ir::TensorType>>(const ir::Node&, const InputTypes&)>
      infer;
  // Rewrites the node into real ops. `node.inputs` are the values standing
  // for its inputs (a complex input's pair); `types` are the inputs' types
  // before the rewrite. Returns the values standing for its results.
  std::function<absl::StatusOr<std::vector<int>>(GraphBuilder&, const ir::Node&,
                                                 const InputTypes& types)>
      split;
};

// The rule for `op` on complex values, or null when Kiln has none.
const ComplexRule* FindComplexRule(absl::string_view op);

// Whether any input or declared result of node `index` is complex.
bool TouchesComplex(const ir::Graph& graph, int index);

// The real value that stands for a value of `type`: a complex one as its
// pairs [..., 2] in its part type, strides in parts; others as they are.
ir::TensorType PairType(const ir::TensorType& type);

}  // namespace kiln::ops

#endif  // KILN_CODEGEN_OPS_COMPLEX_H_
