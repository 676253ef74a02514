// The accuracy Kiln states for its transcendentals: the largest distance, in
// units in the last place (ulp) of the result dtype, between Kiln's result
// and eager PyTorch's on the same input. tests/ops checks every bound over a
// sweep of random, huge, tiny, denormal and exceptional inputs; docs/OPS.md
// prints the table.
//
// Kiln's transcendentals come from one named source, the client runtime's
// table (glibc's libm, abi/kiln_abi.h). Eager's come from SLEEF
// (vectorized, contiguous inputs), its own polynomials (erf) or libm
// (strided inputs), so the two can differ by a few ulp either way.
// NaN, infinities and the sign of zero must match eager exactly.
#ifndef KILN_CODEGEN_OPS_NUMERICS_H_
#define KILN_CODEGEN_OPS_NUMERICS_H_

#include <optional>
#include <string>
#include <vector>

#include "codegen/ir.h"

namespace kiln::ops {

struct UlpBound {
  std::string function;  // "exp", or the op it is part of ("gelu")
  int float32 = 0;
  int float64 = 0;
  // 16-bit results are float32's rounded: a 1-ulp difference in float32
  // can round either way, so 1 (most measure 0).
  int float16 = 0;
  int bfloat16 = 0;
};

// In the order docs/OPS.md lists them.
const std::vector<UlpBound>& UlpBounds();

// The bound for `function` in `dtype`; nullopt when none is stated.
std::optional<int> UlpBoundFor(const std::string& function, ir::DType dtype);

}  // namespace kiln::ops

#endif  // KILN_CODEGEN_OPS_NUMERICS_H_
