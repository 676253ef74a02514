// Random numbers for artifacts (kiln_runtime.random), drawn as eager
// PyTorch's CPU generator draws them, from its state and into its state.
//
// The state is torch.get_rng_state()'s 5056 bytes (CPUGeneratorImplState,
// little-endian, C layout):
//   offset    0  uint64 initial seed
//             8  int32  left (outputs until the next twist, plus one)
//            12  int32  seeded
//            16  uint64 next (the index of the next output in the block)
//            24  uint64 mt[624] (each a uint32 value)
//          5016  double normal_x, normal_y, normal_rho (normal_y: the cached
//                double normal sample)
//          5040  int32  normal_is_valid
//          5048  float  the cached float normal sample
//          5052  bool   whether that is valid (then 3 bytes of padding)
// The engine is mt19937 (torch's at::mt19937); the transforms are torch's:
//   uniform float32 from 24 random bits of one 32-bit output, float64 from
//     53 bits of two (the first the high word): x * (to - from) + from;
//   normal, contiguous, 16 values or more (normal_fill): every value first
//     drawn uniform in [0, 1), then Box-Muller over chunks of 16 (value j
//     and j + 8 of a chunk from 1 - u[j] and u[j + 8]); when the count is
//     not a multiple of 16, the last 16 are drawn again and transformed
//     again; the cached sample is left alone;
//   normal, fewer than 16 (and log_normal's at any count): one float64
//     Box-Muller pair per two values, its second value cached in the state
//     for the next draw;
//   integers in [0, range): a 32-bit output modulo range, or a 64-bit pair
//     when range is at least 2^28 (randint, random_).
// Draws are serial, as torch's are (it locks its generator).
#ifndef KILN_CLIENT_RUNTIME_RANDOM_H_
#define KILN_CLIENT_RUNTIME_RANDOM_H_

#include <array>
#include <cstdint>
#include <optional>

#include "abi/kiln_abi.h"

namespace kiln {

inline constexpr int64_t kGeneratorStateBytes = 5056;

// torch's CPU generator: mt19937 and the cached float64 normal sample.
class CpuGenerator {
 public:
  // The generator `state` (kGeneratorStateBytes) holds.
  static CpuGenerator FromState(const unsigned char* state);
  // Writes the generator into `state` (kGeneratorStateBytes), as
  // torch.get_rng_state() would.
  void WriteState(unsigned char* state) const;

  // torch.manual_seed(seed): the engine seeded, the cached samples dropped.
  void Seed(uint64_t seed);
  uint32_t Random();
  uint64_t Random64();  // two outputs, the first the high word

  // Fill `values` (`count`, contiguous) as torch's uniform_(from, to) and
  // normal_(mean, std) on a contiguous CPU tensor do.
  void Uniform(float* values, int64_t count, double from, double to);
  void Uniform(double* values, int64_t count, double from, double to);
  void Normal(float* values, int64_t count, double mean, double std);
  void Normal(double* values, int64_t count, double mean, double std);
  // torch's normal_distribution<double>, one value at a time (log_normal_).
  void SerialNormal(double* values, int64_t count, double mean, double std);
  // torch's uniform_int_from_to: a 32-bit output, or a 64-bit pair when
  // `range` is 0 (2^64) or at least 2^28, modulo `range`.
  void Integers(int64_t* values, int64_t count, uint64_t range);

 private:
  void Twist();
  double ScalarNormal(double mean, double std);

  uint64_t seed_ = 0;
  int32_t left_ = 1;
  int32_t seeded_ = 0;
  uint64_t next_ = 0;
  std::array<uint32_t, 624> mt_{};
  std::optional<double> next_double_normal_;
  std::optional<float> next_float_normal_;
};

// kiln_runtime.random: `call` on the generator `state` holds; writes the
// values drawn into `values` and the generator after them into
// `state_out`, each when not null.
void DrawRandom(const kiln_random& call, const unsigned char* state, unsigned char* state_out,
                void* values);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_RANDOM_H_
