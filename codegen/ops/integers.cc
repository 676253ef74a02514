// Bitwise ops and shifts on integer tensors (and bitwise and, or, xor and
// not on bools, where they are the logical ops), and gcd and lcm. Eager
// refuses them on floating tensors, and shifts, gcd and lcm on bools, as
// Kiln does (InvalidArgument).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise.h"
#include "codegen/ops/pointwise_util.h"

namespace kiln::ops {
namespace {

using ir::DType;

const ArgSpec kOther{"other", ArgKind::kScalarOrSize, ir::ArgValue(ir::None{})};

Body Apply(const std::string& function) {
  return [function](ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                    Types types) -> absl::StatusOr<int> {
    return b.Call(function, operands, types.compute);
  };
}

}  // namespace

void RegisterIntegerOps(OpTable& table) {
  std::vector<DType> floats_and_bool = kFloatTypes;
  floats_and_bool.push_back(DType::kBool);
  for (const char* name : {"and", "or", "xor"}) {
    for (const char* overload : {"Tensor", "Scalar"}) {
      AddPointwise(table, {absl::StrCat("aten.bitwise_", name, ".", overload),
                           1,
                           2,
                           {kOther},
                           Result::kPromoted,
                           "other",
                           Apply(absl::StrCat("bitwise_", name)),
                           kIntegral,
                           kFloatTypes});
    }
  }
  AddPointwise(table, {"aten.bitwise_not.default",
                       1,
                       1,
                       {},
                       Result::kPromoted,
                       "",
                       [](ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                          Types types) -> absl::StatusOr<int> {
                         // ~true is -2, which as a bool is true again.
                         if (types.compute == DType::kBool) {
                           return b.Call("logical_not", operands, DType::kBool);
                         }
                         return b.Call("bitwise_not", operands, types.compute);
                       },
                       kIntegral,
                       kFloatTypes});
  // x << n and x >> n: eager's results for a count that is negative or not
  // below the width too (0, and the sign for a right shift).
  const struct {
    const char* op;
    const char* function;
  } shifts[] = {{"aten.bitwise_left_shift.Tensor", "shift_left"},
                {"aten.bitwise_left_shift.Tensor_Scalar", "shift_left"},
                {"aten.bitwise_right_shift.Tensor", "shift_right"},
                {"aten.bitwise_right_shift.Tensor_Scalar", "shift_right"}};
  for (const auto& shift : shifts) {
    AddPointwise(table, {shift.op,
                         1,
                         2,
                         {kOther},
                         Result::kPromoted,
                         "other",
                         Apply(shift.function),
                         kIntegers,
                         floats_and_bool});
  }
  // Euclid's algorithm on the magnitudes, as eager (kiln_math.h).
  for (const char* name : {"gcd", "lcm"}) {
    AddPointwise(table, {absl::StrCat("aten.", name, ".default"),
                         2,
                         2,
                         {},
                         Result::kPromoted,
                         "",
                         Apply(name),
                         {DType::kInt64},
                         floats_and_bool});
  }
}

}  // namespace kiln::ops
