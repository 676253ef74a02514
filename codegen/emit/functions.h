// The pointwise function table: how each function named in the loop IR is
// computed, as C text. One line per function; adding a pointwise op adds a
// line here and an entry in ops/pointwise.cc.
//
// Numerics follow eager PyTorch, without fast-math: relu(-0.0) is -0.0 and
// relu(nan) is nan, which is `x < 0 ? 0 : x` (neither `x > 0 ? x : 0` nor
// fmaxf(x, 0) gets both right).
#ifndef KILN_CODEGEN_EMIT_FUNCTIONS_H_
#define KILN_CODEGEN_EMIT_FUNCTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kiln {

// The C expression for `function` applied to the named operands, computing
// in `dtype`. NotFound for a function the table does not have.
absl::StatusOr<std::string> EmitFunction(const std::string& function,
                                         const std::vector<std::string>& operands, ir::DType dtype);

bool HasFunction(const std::string& function);

// Whether `function` in `dtype` computes one of kiln_math.h's polynomials
// (float32 exp, log, tanh, gelu's erf): a long body.
bool CallsPolynomial(const std::string& function, ir::DType dtype);

// A C literal of `dtype` with exactly `value` (hex floats, never decimal).
std::string EmitLiteral(double value, ir::DType dtype);

// The C type that stores `dtype` in memory.
const char* StorageCType(ir::DType dtype);

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_FUNCTIONS_H_
