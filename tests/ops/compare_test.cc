#include "tests/ops/compare.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace kiln {
namespace {

uint64_t Bits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  return bits;
}

Tensor Floats(std::vector<float> values) {
  Tensor tensor(kiln::v1::FLOAT32, {static_cast<int64_t>(values.size())});
  memcpy(tensor.data<float>(), values.data(), values.size() * sizeof(float));
  return tensor;
}

TEST(UlpDistanceTest, CountsRepresentableStepsAcrossZero) {
  EXPECT_EQ(UlpDistance(kiln::v1::FLOAT32, Bits(1.0f), Bits(std::nextafter(1.0f, 2.0f))), 1);
  EXPECT_EQ(UlpDistance(kiln::v1::FLOAT32, Bits(0.0f), Bits(-0.0f)), 0);
  // The smallest denormals either side of zero are two steps apart.
  const float denormal = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(UlpDistance(kiln::v1::FLOAT32, Bits(denormal), Bits(-denormal)), 2);
  // bfloat16 1.0 (0x3f80) and the next value up (0x3f81).
  EXPECT_EQ(UlpDistance(kiln::v1::BFLOAT16, 0x3f80, 0x3f81), 1);
  // float16 -1.0 (0xbc00) and 1.0 (0x3c00): 2 * 0x3c00 steps.
  EXPECT_EQ(UlpDistance(kiln::v1::FLOAT16, 0xbc00, 0x3c00), 2 * 0x3c00);
}

TEST(MaxUlpDistanceTest, ReturnsTheWorstElement) {
  const float one_up = std::nextafter(1.0f, 2.0f);
  const float three_up = std::nextafter(std::nextafter(one_up, 2.0f), 2.0f);
  auto ulps = MaxUlpDistance("t", Floats({1.0f, three_up, NAN}), Floats({one_up, 1.0f, NAN}));
  ASSERT_TRUE(ulps.ok()) << ulps.status();
  EXPECT_EQ(ulps->ulps, 3);
  EXPECT_EQ(ulps->index, 1);
}

TEST(MaxUlpDistanceTest, ExceptionalValuesMustMatchExactly) {
  auto nan = MaxUlpDistance("t", Floats({1.0f, NAN}), Floats({1.0f, 2.0f}));
  EXPECT_EQ(nan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(nan.status().message().find("t: element 1 is nan"), std::string::npos) << nan.status();
  auto zero = MaxUlpDistance("t", Floats({0.0f}), Floats({-0.0f}));
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kFailedPrecondition);
  auto infinity = MaxUlpDistance("t", Floats({INFINITY}), Floats({3.4e38f}));
  EXPECT_EQ(infinity.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CompareBitsTest, NegativeZeroDiffersAnyNanMatches) {
  EXPECT_TRUE(CompareBits("t", Floats({NAN, 1.0f}), Floats({-NAN, 1.0f})).ok());
  const absl::Status status = CompareBits("t", Floats({1.0f, 0.0f}), Floats({1.0f, -0.0f}));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("t: 1 of 2 elements differ from eager bit for bit; first at 1"),
            std::string::npos)
      << status;
}

TEST(CompareBitsTest, ShapesMustMatch) {
  const absl::Status status = CompareBits("t", Floats({1.0f}), Floats({1.0f, 2.0f}));
  EXPECT_EQ(status.message(), "t is FLOAT32[1]; eager gave FLOAT32[2]");
}

}  // namespace
}  // namespace kiln
