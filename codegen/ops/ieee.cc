// IEEE 754 operations: fmax and fmin (maxNum and minNum, which, unlike
// maximum and minimum, ignore a NaN beside a number), copysign, and the bit
// operations nextafter and frexp, exact as eager's (kiln_math.h).
#include <string>
#include <vector>

#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// The floats whose bits these ops step through: a 16-bit float's neighbours
// are not its float32 neighbours.
const std::vector<DType> kBitExactFloats = {DType::kFloat32, DType::kFloat64};

Body Apply(const std::string& function) {
  return [function](ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                    Types types) -> absl::StatusOr<int> {
    return b.Call(function, operands, types.compute);
  };
}

// frexp(x) -> (mantissa, exponent): x = mantissa * 2^exponent, 0.5 <=
// |mantissa| < 1, the exponent int32; a zero, an infinity or NaN is its own
// mantissa with exponent 0.
void AddFrexp(OpTable& table) {
  OpDef def;
  def.name = "aten.frexp.Tensor";
  def.family = "pointwise";
  def.dtypes = kBitExactFloats;
  def.infer = [](const ir::Node&,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    RETURN_IF_ERROR(CheckDTypes(inputs, kBitExactFloats, kIntegral));
    return std::vector<ir::TensorType>{ContiguousType(inputs[0]->dtype, inputs[0]->sizes),
                                       ContiguousType(DType::kInt32, inputs[0]->sizes)};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const DType dtype = graph.values[node.inputs[0]].dtype;
    const int rank = static_cast<int>(graph.values[node.inputs[0]].rank());
    std::vector<ir::Definition> definitions;
    for (const char* part : {"frexp_mantissa", "frexp_exponent"}) {
      ExprBuilder b;
      const int x = b.Load(graph, node.inputs[0], rank, dtype);
      int result = b.Call(part, {x}, dtype);
      if (definitions.size() == 1) result = b.Cast(result, DType::kInt32);
      definitions.push_back(b.Finish(result));
    }
    return definitions;
  };
  table.Add(std::move(def));
}

}  // namespace

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
  // |x| with y's sign bit (-0.0 and a NaN's sign included); integers and
  // bools compute in float32, as eager.
  const ArgSpec other{"other", ArgKind::kScalar, std::nullopt};
  AddPointwise(table, {"aten.copysign.Tensor", 2, 2, {}, Result::kFloating, "", Apply("copysign")});
  AddPointwise(
      table,
      {"aten.copysign.Scalar", 1, 2, {other}, Result::kFloating, "other", Apply("copysign")});
  // The next representable value after x towards y.
  AddPointwise(table, {"aten.nextafter.default",
                       2,
                       2,
                       {},
                       Result::kPromoted,
                       "",
                       Apply("nextafter"),
                       kBitExactFloats,
                       kIntegral});
  AddFrexp(table);
}

}  // namespace kiln::ops
