// What complex.cc and fft.cc share: the rule table and the pair helpers.
#ifndef KILN_CODEGEN_OPS_COMPLEX_RULES_H_
#define KILN_CODEGEN_OPS_COMPLEX_RULES_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/graph_builder.h"
#include "codegen/ir.h"
#include "codegen/ops/complex.h"
#include "codegen/ops/op_table.h"

namespace kiln::ops {

using ComplexRules = std::map<std::string, ComplexRule, std::less<>>;

// The complex dtype of `part`'s pairs: complex64 for float32, complex128
// for float64; Unimplemented for any other.
absl::StatusOr<ir::DType> ComplexOf(ir::DType part);

// A pair's parts, each of its sizes without the last dim.
struct Parts {
  int re = -1;
  int im = -1;
};
absl::StatusOr<Parts> Split(GraphBuilder& b, int pair);
absl::StatusOr<int> Pair(GraphBuilder& b, int re, int im);
// `value` (of `type` before the split) as pairs of `part`: a real value
// gains a zero imaginary part.
absl::StatusOr<int> AsPair(GraphBuilder& b, int value, const ir::TensorType& type, ir::DType part);

// The op's own type rule (of the op table's `op`).
absl::StatusOr<std::vector<ir::TensorType>> InferAs(const std::string& op, const ir::Node& node,
                                                    const InputTypes& inputs);
// The op's own type rule on the inputs' part types; a floating result of
// an op with a complex input is complex (complex64 * float64 is
// complex128, as torch promotes).
absl::StatusOr<std::vector<ir::TensorType>> InferOnParts(const ir::Node& node,
                                                         const InputTypes& inputs);
// The part type of the one result of `node`, computing on pairs.
absl::StatusOr<ir::DType> ResultPart(const ir::Node& node, const InputTypes& types);
// Every tensor input as pairs of `part`.
absl::StatusOr<std::vector<int>> InputsAsPairs(GraphBuilder& b, const ir::Node& node,
                                               const InputTypes& types, ir::DType part);
inline absl::StatusOr<std::vector<int>> One(absl::StatusOr<int> value) {
  if (!value.ok()) return value.status();
  return std::vector<int>{*value};
}

// complex_shapes.cc: the rules of shape ops, reductions and factories.
void AddShapeRules(ComplexRules& rules);

// Registers an op only complex values have (its schema; FindComplexRule
// gives its rule): name, inputs, arguments, input dtypes, family.
using AddComplexOp = std::function<void(const std::string&, int, std::vector<ArgSpec>,
                                        std::vector<ir::DType>, const std::string&)>;

// fft.cc: the rules of _fft_r2c, _fft_c2r and _fft_c2c, their schemas, and
// the core op kiln.fft they become.
void AddFftRules(ComplexRules& rules);
void RegisterFftOps(OpTable& table, const AddComplexOp& add);

// eig.cc: the rule of linalg_eig, whose results are complex.
void AddEigRules(ComplexRules& rules);

}  // namespace kiln::ops

#endif  // KILN_CODEGEN_OPS_COMPLEX_RULES_H_
