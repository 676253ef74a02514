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
                           return b.Call(name, operands, types.compute);
                         }});
  }
}

}  // namespace kiln::ops
