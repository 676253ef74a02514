// The pointwise family's op spec, shared by the files that register
// pointwise ops (pointwise.cc, activations.cc). Every entry is a Spec: its
// schema, its result dtype, and the expression that computes one element;
// AddPointwise turns it into an op-table entry (type rule, dtype checks,
// operand loads). The emitter's function table (emit/functions.cc) says how
// each named function is computed.
#ifndef KILN_CODEGEN_OPS_POINTWISE_H_
#define KILN_CODEGEN_OPS_POINTWISE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"

namespace kiln::ops {

// The types one element is computed with: `operand` is the promoted dtype
// of the operands as stored (scalars are rounded to it, as eager does),
// `compute` what the arithmetic runs in (float32 for 16-bit floats).
struct Types {
  ir::DType operand;
  ir::DType compute;
};

// The element of a pointwise op, given its operands (tensor loads in tensor
// order, then a scalar `other` if the node has one).
using Body = std::function<absl::StatusOr<int>(ExprBuilder&, const ir::Node&,
                                               const std::vector<int>& operands, Types types)>;

enum class Result {
  kPromoted,  // the promoted type of the operands (add, mul, where)
  kFloating,  // promoted, then integers become float32 (exp, div)
  kBool,      // comparisons and logical ops
  kFirst,     // the first operand's dtype (masked_fill: the value takes it)
};

struct Spec {
  std::string op;
  int min_inputs = 1;
  int max_inputs = 1;
  std::vector<ArgSpec> args;
  Result result = Result::kPromoted;
  // Name of a scalar argument standing in for the last tensor operand when
  // the node has fewer inputs ("other" for add(t, 1.0)); empty if none.
  std::string scalar_operand;
  Body body;
  // The operand dtypes Kiln computes (docs/OPS.md), and those eager itself
  // refuses (-bool, bool - bool): refused ones are InvalidArgument, others
  // outside `dtypes` Unimplemented.
  std::vector<ir::DType> dtypes = kAllTypes;
  std::vector<ir::DType> refused = {};
  // Scalar arguments that take part in type promotion (clamp's bounds).
  std::vector<std::string> promoting_scalars = {};
};

// Adds `spec` to `table` as an op of family "pointwise".
void AddPointwise(OpTable& table, Spec spec);

// A scalar argument as a constant of the computation, rounded to the
// operand dtype first, as eager rounds a scalar next to a tensor.
int ScalarConstant(ExprBuilder& b, const ir::Node& node, const std::string& name, Types types);

// The emitter's function that rounds a float32 value to `dtype` (16-bit).
std::string RoundingFunction(ir::DType dtype);

}  // namespace kiln::ops

#endif  // KILN_CODEGEN_OPS_POINTWISE_H_
