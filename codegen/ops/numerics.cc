#include "codegen/ops/numerics.h"

namespace kiln::ops {

const std::vector<UlpBound>& UlpBounds() {
  // Measured by tests/ops (ops_test prints the worst distance per function
  // and dtype): float32 and float64 bounds are the largest measured;
  // reciprocal is correctly rounded on both sides, sqrt on Kiln's (eager's
  // float32 and float64 sqrt is 1 ulp off at times, so 16-bit results may
  // round either way); rsqrt is 1 / sqrt on both sides, but eager's 16-bit scalar loop
  // rounds sqrt first.
  static const auto* const bounds = new std::vector<UlpBound>{
      {"sqrt", 1, 1, 1, 1},    {"reciprocal", 0, 0, 0, 0}, {"rsqrt", 0, 0, 1, 1},
      {"exp", 1, 1, 1, 1},     {"expm1", 1, 1, 1, 1},      {"log", 1, 1, 1, 1},
      {"log1p", 1, 1, 1, 1},   {"tanh", 2, 2, 1, 1},       {"erf", 1, 1, 1, 1},
      {"sin", 1, 1, 1, 1},     {"cos", 1, 1, 1, 1},        {"pow", 1, 1, 1, 1},
      {"sigmoid", 2, 2, 1, 1}, {"silu", 2, 2, 1, 1},       {"tan", 1, 1, 1, 1},
      {"asin", 1, 1, 1, 1},    {"acos", 1, 1, 1, 1},       {"atan", 1, 1, 1, 1},
      {"sinh", 1, 1, 1, 1},    {"cosh", 1, 1, 1, 1},       {"asinh", 1, 1, 1, 1},
      {"acosh", 1, 1, 1, 1},   {"atanh", 1, 1, 1, 1},      {"log2", 1, 1, 1, 1},
      {"log10", 2, 1, 1, 1},   {"exp2", 1, 1, 1, 1},
  };
  return *bounds;
}

std::optional<int> UlpBoundFor(const std::string& function, ir::DType dtype) {
  for (const UlpBound& bound : UlpBounds()) {
    if (bound.function != function) continue;
    switch (dtype) {
      case ir::DType::kFloat32:
        return bound.float32;
      case ir::DType::kFloat64:
        return bound.float64;
      case ir::DType::kFloat16:
        return bound.float16;
      case ir::DType::kBFloat16:
        return bound.bfloat16;
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace kiln::ops
