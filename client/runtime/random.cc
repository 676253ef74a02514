#include "client/runtime/random.h"

#include <cmath>
#include <cstring>
#include <memory>

namespace kiln {
namespace {

constexpr int kStateWords = 624;
constexpr int kShift = 397;
constexpr double kPi = 3.14159265358979323846;

uint32_t TwistPair(uint32_t upper, uint32_t lower) {
  const uint32_t mixed = (upper & 0x80000000u) | (lower & 0x7fffffffu);
  return (mixed >> 1) ^ ((lower & 1u) ? 0x9908b0dfu : 0u);
}

template <typename T>
T Load(const unsigned char* state, int64_t offset) {
  T value;
  memcpy(&value, state + offset, sizeof(T));
  return value;
}

template <typename T>
void Store(unsigned char* state, int64_t offset, T value) {
  memcpy(state + offset, &value, sizeof(T));
}

// torch's uniform_real: the low 24 (float) or 53 (double) bits scaled into
// [0, 1), then into [from, to), in the value's own type.
float UniformOf(uint32_t bits, float from, float to) {
  const float x = static_cast<float>(bits & ((1u << 24) - 1)) * (1.0f / (1u << 24));
  return x * (to - from) + from;
}

double UniformOf(uint64_t bits, double from, double to) {
  const double x =
      static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * (1.0 / (uint64_t{1} << 53));
  return x * (to - from) + from;
}

// Box-Muller over one chunk of 16 uniform values, in place (torch's
// normal_fill_16).
template <typename T>
void NormalChunk(T* data, T mean, T std) {
  for (int j = 0; j < 8; ++j) {
    const T u1 = 1 - data[j];
    const T u2 = data[j + 8];
    const T radius = std::sqrt(-2 * std::log(u1));
    const T theta = static_cast<T>(2.0 * kPi) * u2;
    data[j] = radius * std::cos(theta) * std + mean;
    data[j + 8] = radius * std::sin(theta) * std + mean;
  }
}

}  // namespace

CpuGenerator CpuGenerator::FromState(const unsigned char* state) {
  CpuGenerator generator;
  generator.seed_ = Load<uint64_t>(state, 0);
  generator.left_ = Load<int32_t>(state, 8);
  generator.seeded_ = Load<int32_t>(state, 12);
  generator.next_ = Load<uint64_t>(state, 16);
  for (int i = 0; i < kStateWords; ++i) {
    generator.mt_[i] = static_cast<uint32_t>(Load<uint64_t>(state, 24 + 8 * i));
  }
  if (Load<int32_t>(state, 5040) != 0) generator.next_double_normal_ = Load<double>(state, 5024);
  if (state[5052] != 0) generator.next_float_normal_ = Load<float>(state, 5048);
  return generator;
}

void CpuGenerator::WriteState(unsigned char* state) const {
  memset(state, 0, kGeneratorStateBytes);
  Store<uint64_t>(state, 0, seed_);
  Store<int32_t>(state, 8, left_);
  Store<int32_t>(state, 12, seeded_);
  Store<uint64_t>(state, 16, next_);
  for (int i = 0; i < kStateWords; ++i) Store<uint64_t>(state, 24 + 8 * i, mt_[i]);
  if (next_double_normal_) {
    Store<double>(state, 5024, *next_double_normal_);
    Store<int32_t>(state, 5040, 1);
  }
  if (next_float_normal_) {
    Store<float>(state, 5048, *next_float_normal_);
    state[5052] = 1;
  }
}

void CpuGenerator::Seed(uint64_t seed) {
  seed_ = seed;
  seeded_ = 1;
  mt_[0] = static_cast<uint32_t>(seed);
  for (int j = 1; j < kStateWords; ++j) {
    mt_[j] = 1812433253u * (mt_[j - 1] ^ (mt_[j - 1] >> 30)) + static_cast<uint32_t>(j);
  }
  left_ = 1;
  next_ = 0;
  next_double_normal_.reset();
  next_float_normal_.reset();
}

void CpuGenerator::Twist() {
  for (int j = 0; j < kStateWords - kShift; ++j) {
    mt_[j] = mt_[j + kShift] ^ TwistPair(mt_[j], mt_[j + 1]);
  }
  for (int j = kStateWords - kShift; j < kStateWords - 1; ++j) {
    mt_[j] = mt_[j + kShift - kStateWords] ^ TwistPair(mt_[j], mt_[j + 1]);
  }
  mt_[kStateWords - 1] = mt_[kShift - 1] ^ TwistPair(mt_[kStateWords - 1], mt_[0]);
  left_ = kStateWords;
  next_ = 0;
}

uint32_t CpuGenerator::Random() {
  if (--left_ == 0) Twist();
  uint32_t y = mt_[next_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint64_t CpuGenerator::Random64() {
  const uint64_t high = Random();
  return (high << 32) | Random();
}

void CpuGenerator::Uniform(float* values, int64_t count, double from, double to) {
  for (int64_t i = 0; i < count; ++i) {
    values[i] = UniformOf(Random(), static_cast<float>(from), static_cast<float>(to));
  }
}

void CpuGenerator::Uniform(double* values, int64_t count, double from, double to) {
  for (int64_t i = 0; i < count; ++i) values[i] = UniformOf(Random64(), from, to);
}

// torch's normal_distribution<double>: a pair per two calls, the second
// cached.
double CpuGenerator::ScalarNormal(double mean, double std) {
  if (next_double_normal_) {
    const double cached = *next_double_normal_;
    next_double_normal_.reset();
    return cached * std + mean;
  }
  const double u1 = UniformOf(Random64(), 0.0, 1.0);
  const double u2 = UniformOf(Random64(), 0.0, 1.0);
  const double radius = std::sqrt(-2.0 * std::log1p(-u2));
  const double theta = 2.0 * kPi * u1;
  next_double_normal_ = radius * std::sin(theta);
  return radius * std::cos(theta) * std + mean;
}

template <typename T>
void NormalFill(CpuGenerator& generator, T* values, int64_t count, double mean, double std) {
  generator.Uniform(values, count, 0.0, 1.0);
  for (int64_t i = 0; i + 16 <= count; i += 16) {
    NormalChunk<T>(values + i, static_cast<T>(mean), static_cast<T>(std));
  }
  if (count % 16 != 0) {
    generator.Uniform(values + count - 16, 16, 0.0, 1.0);
    NormalChunk<T>(values + count - 16, static_cast<T>(mean), static_cast<T>(std));
  }
}

void CpuGenerator::Normal(float* values, int64_t count, double mean, double std) {
  if (count >= 16) return NormalFill(*this, values, count, mean, std);
  for (int64_t i = 0; i < count; ++i) values[i] = static_cast<float>(ScalarNormal(mean, std));
}

void CpuGenerator::Normal(double* values, int64_t count, double mean, double std) {
  if (count >= 16) return NormalFill(*this, values, count, mean, std);
  for (int64_t i = 0; i < count; ++i) values[i] = ScalarNormal(mean, std);
}

void CpuGenerator::SerialNormal(double* values, int64_t count, double mean, double std) {
  for (int64_t i = 0; i < count; ++i) values[i] = ScalarNormal(mean, std);
}

void CpuGenerator::Integers(int64_t* values, int64_t count, uint64_t range) {
  const bool wide = range == 0 || range >= (uint64_t{1} << 28);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t bits = wide ? Random64() : Random();
    values[i] = static_cast<int64_t>(range == 0 ? bits : bits % range);
  }
}

void DrawRandom(const kiln_random& call, const unsigned char* state, unsigned char* state_out,
                void* values) {
  CpuGenerator generator = CpuGenerator::FromState(state);
  if (call.distribution == KILN_RANDOM_SEED) {
    generator.Seed(static_cast<uint64_t>(call.seed));
  } else if (call.distribution == KILN_RANDOM_INTEGER) {
    std::unique_ptr<int64_t[]> scratch(values == nullptr ? new int64_t[call.count] : nullptr);
    int64_t* out = values != nullptr ? static_cast<int64_t*>(values) : scratch.get();
    generator.Integers(out, call.count, static_cast<uint64_t>(call.seed));
  } else if (call.float64) {
    // Drawn into a scratch row when the values are not wanted (the state's
    // kernel): the generator moves as the values' kernel moves it.
    std::unique_ptr<double[]> scratch(values == nullptr ? new double[call.count] : nullptr);
    double* out = values != nullptr ? static_cast<double*>(values) : scratch.get();
    if (call.distribution == KILN_RANDOM_UNIFORM)
      generator.Uniform(out, call.count, call.a, call.b);
    if (call.distribution == KILN_RANDOM_NORMAL) generator.Normal(out, call.count, call.a, call.b);
    if (call.distribution == KILN_RANDOM_SERIAL_NORMAL) {
      generator.SerialNormal(out, call.count, call.a, call.b);
    }
  } else {
    std::unique_ptr<float[]> scratch(values == nullptr ? new float[call.count] : nullptr);
    float* out = values != nullptr ? static_cast<float*>(values) : scratch.get();
    if (call.distribution == KILN_RANDOM_UNIFORM)
      generator.Uniform(out, call.count, call.a, call.b);
    if (call.distribution == KILN_RANDOM_NORMAL) generator.Normal(out, call.count, call.a, call.b);
  }
  if (state_out != nullptr) generator.WriteState(state_out);
}

}  // namespace kiln
