#include "codegen/ops/pointwise_util.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kiln::ops {
namespace {

using ir::DType;

std::string Promoted(DType a, DType b) { return ir::DTypeName(PromoteTensors(a, b)); }

// c10's promotion table (torch.promote_types), both ways round.
TEST(PromoteTensorsTest, SmallIntegersPromoteAsInTorch) {
  const struct {
    DType a, b;
    const char* result;
  } cases[] = {
      {DType::kUInt8, DType::kInt8, "int16"},      {DType::kUInt8, DType::kInt16, "int16"},
      {DType::kInt8, DType::kInt16, "int16"},      {DType::kInt8, DType::kInt64, "int64"},
      {DType::kUInt8, DType::kInt32, "int32"},     {DType::kInt16, DType::kInt32, "int32"},
      {DType::kBool, DType::kUInt8, "uint8"},      {DType::kBool, DType::kInt8, "int8"},
      {DType::kUInt8, DType::kFloat16, "float16"}, {DType::kInt16, DType::kBFloat16, "bfloat16"},
      {DType::kInt8, DType::kInt8, "int8"},        {DType::kUInt8, DType::kUInt8, "uint8"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Promoted(c.a, c.b), c.result) << ir::DTypeName(c.a) << ", " << ir::DTypeName(c.b);
    EXPECT_EQ(Promoted(c.b, c.a), c.result) << ir::DTypeName(c.b) << ", " << ir::DTypeName(c.a);
  }
}

// A 0-dim tensor takes part only when its category (bool < integer <
// floating) is higher: int8 beside a 0-dim int64 stays int8; a 0-dim uint8
// beside bool makes uint8.
TEST(PromoteOperandsTest, ZeroDimSmallIntegers) {
  const ir::TensorType int8_vector = ContiguousType(DType::kInt8, {ir::Dim::Constant(3)});
  const ir::TensorType int64_scalar = ContiguousType(DType::kInt64, {});
  const ir::TensorType bool_vector = ContiguousType(DType::kBool, {ir::Dim::Constant(3)});
  const ir::TensorType uint8_scalar = ContiguousType(DType::kUInt8, {});
  EXPECT_EQ(ir::DTypeName(PromoteOperands({&int8_vector, &int64_scalar})), std::string("int8"));
  EXPECT_EQ(ir::DTypeName(PromoteOperands({&bool_vector, &uint8_scalar})), std::string("uint8"));
}

}  // namespace
}  // namespace kiln::ops
