// IEEE 754's maxNum and minNum: fmax and fmin, which, unlike maximum and
// minimum, ignore a NaN beside a number.
#include <string>
#include <vector>

#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise.h"

namespace kiln::ops {

void RegisterIeeeOps(OpTable& table) {
  for (const char* function : {"fmax", "fmin"}) {
    const std::string name = function;
    AddPointwise(table, {"aten." + name + ".default",
                         2,
                         2,
                         {},
                         Result::kPromoted,
                         "",
                         [name](ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                                Types types) -> absl::StatusOr<int> {
                           // Of -0.0 and 0.0, eager's bfloat16 kernel gives
                           // the second, its others the first.
                           if (types.operand == ir::DType::kBFloat16) {
                             return b.Call(name, {operands[1], operands[0]}, types.compute);
                           }
                           return b.Call(name, operands, types.compute);
                         }});
  }
}

}  // namespace kiln::ops
