// A naive reference evaluator for Kiln graphs: one obviously-correct loop
// per op, in double precision, with no fusion, views or buffer reuse. Tests,
// the demo and `kiln run --check` compare generated kernels against it.
#ifndef KILN_TOOLS_REFERENCE_REFERENCE_H_
#define KILN_TOOLS_REFERENCE_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kiln {

// A dense row-major tensor of doubles.
struct RefTensor {
  std::vector<int64_t> sizes;
  std::vector<double> values;
};

// Evaluates a prepared graph (PrepareGraph) on inputs given as dense
// row-major values. Unimplemented for ops it does not know.
absl::StatusOr<std::vector<RefTensor>> EvaluateReference(const ir::Graph& graph,
                                                         const std::vector<RefTensor>& inputs);

}  // namespace kiln

#endif  // KILN_TOOLS_REFERENCE_REFERENCE_H_
