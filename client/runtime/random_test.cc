// Expected values are eager PyTorch's (torch 2.x on the CPU) for the same
// seeds and calls, as hex floats; the state fields are
// torch.get_rng_state()'s after those calls.
#include "client/runtime/random.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

struct StateFields {
  int32_t left;
  uint64_t next;
  uint64_t first_word, last_word;
  double cached_normal;
  int32_t cached_valid;
};

StateFields Fields(const CpuGenerator& generator) {
  std::vector<unsigned char> state(kGeneratorStateBytes);
  generator.WriteState(state.data());
  StateFields fields;
  memcpy(&fields.left, &state[8], 4);
  memcpy(&fields.next, &state[16], 8);
  memcpy(&fields.first_word, &state[24], 8);
  memcpy(&fields.last_word, &state[24 + 8 * 623], 8);
  memcpy(&fields.cached_normal, &state[5024], 8);
  memcpy(&fields.cached_valid, &state[5040], 4);
  return fields;
}

CpuGenerator Seeded(uint64_t seed) {
  CpuGenerator generator;
  generator.Seed(seed);
  return generator;
}

TEST(RandomTest, SeedIsTorchsManualSeed) {
  const StateFields fields = Fields(Seeded(42));
  EXPECT_EQ(fields.left, 1);
  EXPECT_EQ(fields.next, 0u);
  EXPECT_EQ(fields.first_word, 42u);
  EXPECT_EQ(fields.last_word, 26719530u);
  EXPECT_EQ(fields.cached_valid, 0);
}

TEST(RandomTest, UniformDrawsEagersBits) {
  CpuGenerator generator = Seeded(42);
  float single[5];
  generator.Uniform(single, 5, 0.0, 1.0);  // torch.rand(5)
  const float want_single[] = {0x1.c3b8ccp-1f, 0x1.d47b66p-1f, 0x1.880d7p-2f, 0x1.eb2a1cp-1f,
                               0x1.8fd1a8p-2f};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(single[i], want_single[i]) << i;
  double wide[3];
  generator.Uniform(wide, 3, -1.0, 2.0);  // uniform_(-1, 2), float64
  const double want_wide[] = {0x1.6be6b65e2861ap+0, 0x1.843c77d28332p-5, -0x1.9b69488323a8ap-1};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(wide[i], want_wide[i]) << i;
}

TEST(RandomTest, FewNormalsCacheTheSecondOfAPair) {
  CpuGenerator generator = Seeded(42);
  float skipped[5];
  double skipped_wide[3];
  generator.Uniform(skipped, 5, 0.0, 1.0);
  generator.Uniform(skipped_wide, 3, -1.0, 2.0);
  float normal[3];
  generator.Normal(normal, 3, 1.0, 2.0);  // normal_(1, 2) of 3 float32 values
  const float want[] = {0x1.f50cp-1f, -0x1.7f9458p+0f, -0x1.74f068p+0f};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(normal[i], want[i], 1e-6) << i;
  const StateFields fields = Fields(generator);
  EXPECT_EQ(fields.left, 606);
  EXPECT_EQ(fields.next, 19u);
  EXPECT_EQ(fields.cached_valid, 1);
  EXPECT_NEAR(fields.cached_normal, 0.5294110767800142, 1e-15);
}

TEST(RandomTest, SixteenNormalsOrMoreAreBoxMullerChunks) {
  CpuGenerator generator = Seeded(42);
  float skipped[5], skipped_normal[3];
  double skipped_wide[3];
  generator.Uniform(skipped, 5, 0.0, 1.0);
  generator.Uniform(skipped_wide, 3, -1.0, 2.0);
  generator.Normal(skipped_normal, 3, 1.0, 2.0);
  double wide[20];
  generator.Normal(wide, 20, 0.0, 1.0);  // torch.randn(20, dtype=torch.float64)
  const double want_wide[] = {
      -0x1.910abe008f946p-3, 0x1.1eb01c877628dp-3,  -0x1.ae3c79cfcfde6p-4, 0x1.00e6c558a6461p-1,
      0x1.9c861e7690b32p-2,  -0x1.27b91e83a389fp-1, -0x1.3f381ed1cc9dap-1, -0x1.6683060167808p-4,
      -0x1.0bbfcd96d20b9p+0, 0x1.4f823b685366dp+0,  0x1.66ef90c652923p-1,  0x1.2e20df8ad3ed6p-2,
      -0x1.b449d82410b9cp-2, -0x1.1643e7564f388p-1, 0x1.3fb129c2b20bfp+0,  0x1.31e06920c7da1p-1,
      0x1.e3165d5be542p-1,   0x1.bb810e6027cf0p-2,  -0x1.20f0ffa1472c9p-1, 0x1.8562621acaf91p+0};
  for (int i = 0; i < 20; ++i) EXPECT_NEAR(wide[i], want_wide[i], 1e-14) << i;
  float single[18];
  generator.Normal(single, 18, 0.0, 1.0);  // torch.randn(18)
  const float want_single[] = {0x1.ebbff2p-1f, 0x1.9e87a2p-2f,  0x1.2d616ep-1f,  -0x1.c7e9f8p-1f,
                               0x1.a3a5e4p-2f, -0x1.74ffdcp+0f, -0x1.a32a46p-4f, -0x1.32c43p-1f,
                               0x1.e8817ap-2f, 0x1.73cd8p-1f,   0x1.dda514p-3f,  0x1.0247d4p+2f,
                               0x1.478a9ap+0f, -0x1.9fad82p-7f, 0x1.ed3b98p-3f,  0x1.0f6eb4p-3f,
                               0x1.874a8cp-1f, 0x1.18528ep+0f};
  for (int i = 0; i < 18; ++i) EXPECT_NEAR(single[i], want_single[i], 1e-5) << i;
  const StateFields fields = Fields(generator);
  EXPECT_EQ(fields.left, 500);
  EXPECT_EQ(fields.next, 125u);
  EXPECT_EQ(fields.cached_valid, 1);  // normal_fill leaves the cached sample
  EXPECT_NEAR(fields.cached_normal, 0.5294110767800142, 1e-15);
}

TEST(RandomTest, DrawingAcrossATwistContinuesTheStream) {
  CpuGenerator generator = Seeded(7);
  std::vector<float> values(1000);
  generator.Uniform(values.data(), 1000, 0.0, 1.0);
  const StateFields fields = Fields(generator);
  EXPECT_EQ(fields.left, 249);
  EXPECT_EQ(fields.next, 376u);
  EXPECT_EQ(fields.first_word, 2259319302u);
  EXPECT_EQ(fields.last_word, 333829357u);
}

TEST(RandomTest, IntegersTakeOneOutputBelowARangeOf2To28AndAPairFromIt) {
  CpuGenerator generator = Seeded(42);
  int64_t narrow[4], wide[3];
  generator.Integers(narrow, 4, 1000);             // torch.randint(0, 1000, (4,))
  generator.Integers(wide, 3, uint64_t{1} << 40);  // torch.randint(0, 1 << 40, (3,))
  const int64_t want_narrow[] = {542, 67, 876, 414};
  const int64_t want_wide[] = {458615280711, 810017303572, 440001501305};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(narrow[i], want_narrow[i]) << i;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(wide[i], want_wide[i]) << i;
  EXPECT_EQ(Fields(generator).next, 10u);  // 4 outputs, then 3 pairs
}

TEST(RandomTest, SerialNormalDrawsPairsAtAnyCount) {
  CpuGenerator generator = Seeded(42);
  std::vector<double> values(40);
  // normal_(0.5, 2) of a strided float64 tensor: value by value.
  generator.SerialNormal(values.data(), 40, 0.5, 2.0);
  EXPECT_EQ(values[0], 0x1.2c62ad99ea266p+0);
  EXPECT_EQ(values[1], 0x1.83e69cd9ea5c2p-1);
  EXPECT_EQ(values[2], 0x1.f016e6db1f620p-1);
  EXPECT_EQ(values[39], 0x1.3dc1c277ecae6p+1);
  EXPECT_EQ(Fields(generator).cached_valid, 0);
}

TEST(RandomTest, TheStateKernelMovesTheGeneratorAsTheValuesKernel) {
  std::vector<unsigned char> state(kGeneratorStateBytes), seeded(kGeneratorStateBytes);
  kiln_random seed = {KILN_RANDOM_SEED, 0, 0, 42, 0.0, 0.0};
  DrawRandom(seed, state.data(), seeded.data(), nullptr);
  std::vector<unsigned char> want(kGeneratorStateBytes);
  Seeded(42).WriteState(want.data());
  EXPECT_EQ(seeded, want);

  const kiln_random normal = {KILN_RANDOM_NORMAL, 1, 37, 0, 0.0, 1.0};
  std::vector<double> values(37);
  std::vector<unsigned char> after_values(kGeneratorStateBytes), after_state(kGeneratorStateBytes);
  DrawRandom(normal, seeded.data(), after_values.data(), values.data());
  DrawRandom(normal, seeded.data(), after_state.data(), nullptr);
  EXPECT_EQ(after_values, after_state);
  EXPECT_NE(after_values, seeded);
  const CpuGenerator round_trip = CpuGenerator::FromState(after_values.data());
  std::vector<unsigned char> written(kGeneratorStateBytes);
  round_trip.WriteState(written.data());
  EXPECT_EQ(written, after_values);
}

}  // namespace
}  // namespace kiln
