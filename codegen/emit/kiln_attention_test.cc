// Single-query attention's kernel (kiln_attention.h) against a
// double-precision reference, and its bounds: keys masked with -inf are never
// read, nor keys, values or mask entries past a position tensor's bound,
// shown by placing them in pages that fault when touched.
// kiln_attention.h is text an artifact holds after the ABI's declarations
// and kiln_math.h: they come first here too.
// clang-format off
#include "abi/kiln_abi.h"
#include "codegen/emit/kiln_math.h"
#include "codegen/emit/kiln_attention.h"
// clang-format on

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// Chunks of `grain` tasks, in order, on the calling thread.
void SerialFor(void*, kiln_int64 n, kiln_int64 grain, kiln_parallel_body body, void* closure) {
  for (kiln_int64 begin = 0; begin < n; begin += grain) {
    body(closure, begin, begin + grain < n ? begin + grain : n);
  }
}

kiln_runtime Runtime() {
  kiln_runtime rt = {};
  rt.parallel_for = SerialFor;
  return rt;
}

struct Problem {
  int64_t batch = 1, heads = 1, keys = 0, width = 64, value_width = 64;
  std::vector<float> query, mask;  // mask: [batch, keys], shared by the heads
  const float* key = nullptr;      // [batch, heads, keys, width], contiguous
  const float* value = nullptr;    // [batch, heads, keys, value_width]
};

// out and lse for every (batch, head) row, in double precision.
void Reference(const Problem& p, std::vector<float>& out, std::vector<float>& lse) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(p.width));
  out.assign(p.batch * p.heads * p.value_width, 0.0f);
  lse.assign(p.batch * p.heads, 0.0f);
  for (int64_t row = 0; row < p.batch * p.heads; ++row) {
    const int64_t n = row / p.heads;
    std::vector<double> scores(p.keys, -INFINITY);
    double max = -INFINITY;
    for (int64_t j = 0; j < p.keys; ++j) {
      if (p.mask[n * p.keys + j] == kMasked) continue;
      double dot = 0;
      for (int64_t e = 0; e < p.width; ++e) {
        dot += double{p.query[row * p.width + e]} * p.key[(row * p.keys + j) * p.width + e];
      }
      scores[j] = dot * scale + p.mask[n * p.keys + j];
      max = std::max(max, scores[j]);
    }
    double sum = 0;
    std::vector<double> acc(p.value_width, 0.0);
    for (int64_t j = 0; j < p.keys; ++j) {
      if (scores[j] == -INFINITY) continue;
      const double weight = std::exp(scores[j] - max);
      sum += weight;
      for (int64_t e = 0; e < p.value_width; ++e) {
        acc[e] += weight * p.value[(row * p.keys + j) * p.value_width + e];
      }
    }
    for (int64_t e = 0; e < p.value_width; ++e) {
      out[row * p.value_width + e] = sum > 0 ? static_cast<float>(acc[e] / sum) : 0.0f;
    }
    lse[row] = static_cast<float>(max + std::log(sum));
  }
}

void RunKernel(const Problem& p, std::vector<float>& out, std::vector<float>& lse) {
  out.assign(p.batch * p.heads * p.value_width, NAN);
  lse.assign(p.batch * p.heads, NAN);
  kiln_attention call = {
      p.batch,
      p.heads,
      p.keys,
      p.width,
      p.value_width,
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.width))),
      p.query.data(),
      p.key,
      p.value,
      p.mask.data(),
      out.data(),
      lse.data(),
      {p.heads * p.width, p.width, 1},
      {p.heads * p.keys * p.width, p.keys * p.width, p.width, 1},
      {p.heads * p.keys * p.value_width, p.keys * p.value_width, p.value_width, 1},
      {p.keys, 0, 1},
      {p.heads * p.value_width, p.value_width, 1},
      {p.heads, 1},
      1,
      nullptr};
  const kiln_runtime rt = Runtime();
  kiln_attention_f32(&rt, &call);
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << i;
    } else {
      EXPECT_NEAR(got[i], want[i], 1e-5 + 1e-5 * std::fabs(want[i])) << i;
    }
  }
}

std::vector<float> Random(size_t count, std::mt19937& random) {
  std::normal_distribution<float> normal;
  std::vector<float> values(count);
  for (float& v : values) v = normal(random);
  return values;
}

TEST(KilnAttentionTest, MatchesDoublePrecisionWithAdditiveMasksAndSplitKeys) {
  std::mt19937 random(7);
  Problem p;
  p.batch = 2, p.heads = 3, p.keys = 3000, p.value_width = 40;  // 6 rows: keys split in 2
  p.query = Random(p.batch * p.heads * p.width, random);
  const std::vector<float> key = Random(p.batch * p.heads * p.keys * p.width, random);
  const std::vector<float> value = Random(p.batch * p.heads * p.keys * p.value_width, random);
  p.key = key.data(), p.value = value.data();
  p.mask = Random(p.batch * p.keys, random);
  for (int64_t j = 0; j < p.keys; j += 3) p.mask[j] = kMasked;
  for (int64_t j = 1600; j < p.keys; ++j) p.mask[p.keys + j] = kMasked;  // a masked range
  std::vector<float> out, lse, want_out, want_lse;
  RunKernel(p, out, lse);
  Reference(p, want_out, want_lse);
  ExpectClose(out, want_out);
  ExpectClose(lse, want_lse);
}

TEST(KilnAttentionTest, AFullyMaskedRowIsZerosWithLogSumExpMinusInfinity) {
  std::mt19937 random(8);
  Problem p;
  p.keys = 2048;
  p.query = Random(p.width, random);
  const std::vector<float> key = Random(p.keys * p.width, random);
  p.key = key.data(), p.value = key.data();
  p.mask.assign(p.keys, kMasked);
  std::vector<float> out, lse;
  RunKernel(p, out, lse);
  EXPECT_EQ(out, std::vector<float>(p.width, 0.0f));
  EXPECT_EQ(lse, std::vector<float>{kMasked});
}

TEST(KilnAttentionTest, KeysAndValuesPastAPrefixMaskAreNeverRead) {
  // Keys and values of 4,096 positions whose rows from 1,024 on are in
  // pages that fault when read; a step at position 1,000 masks them.
  const int64_t keys = 4096, width = 64, readable = 1024, position = 1000;
  const size_t bytes = keys * width * sizeof(float);
  auto map = [&] {
    void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(memory, MAP_FAILED);
    return static_cast<float*>(memory);
  };
  float* key = map();
  float* value = map();
  std::mt19937 random(9);
  const std::vector<float> filled = Random(readable * width * 2, random);
  std::copy(filled.begin(), filled.begin() + readable * width, key);
  std::copy(filled.begin() + readable * width, filled.end(), value);
  const size_t guarded = readable * width * sizeof(float);
  ASSERT_EQ(guarded % sysconf(_SC_PAGESIZE), 0u);
  ASSERT_EQ(mprotect(reinterpret_cast<char*>(key) + guarded, bytes - guarded, PROT_NONE), 0);
  ASSERT_EQ(mprotect(reinterpret_cast<char*>(value) + guarded, bytes - guarded, PROT_NONE), 0);

  Problem p;
  p.keys = keys;
  p.query = Random(width, random);
  p.key = key, p.value = value;
  p.mask.assign(keys, kMasked);
  for (int64_t j = 0; j <= position; ++j) p.mask[j] = 0.0f;
  std::vector<float> out, lse;
  RunKernel(p, out, lse);  // splits the keys in 8 ranges: 6 of them wholly masked

  Problem prefix = p;  // the same step over the readable keys only
  prefix.keys = readable;
  prefix.mask.resize(readable);
  std::vector<float> want_out, want_lse;
  Reference(prefix, want_out, want_lse);
  ExpectClose(out, want_out);
  ExpectClose(lse, want_lse);
  munmap(key, bytes);
  munmap(value, bytes);
}

// `rows` rows of `width` floats whose rows from `readable` on are in pages
// that fault when touched; the first `readable` rows are `filled`.
float* Guarded(int64_t rows, int64_t width, int64_t readable, const std::vector<float>& filled) {
  const size_t bytes = rows * width * sizeof(float), guarded = readable * width * sizeof(float);
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(memory, MAP_FAILED);
  float* floats = static_cast<float*>(memory);
  std::copy(filled.begin(), filled.begin() + readable * width, floats);
  EXPECT_EQ(guarded % sysconf(_SC_PAGESIZE), 0u);
  EXPECT_EQ(mprotect(static_cast<char*>(memory) + guarded, bytes - guarded, PROT_NONE), 0);
  return floats;
}

TEST(KilnAttentionTest, NothingPastAPositionTensorsBoundIsRead) {
  // Two sequences over 4,096 positions: lengths 1,000 (position 999,
  // inclusive) and 0. Keys, values and the mask from position 1,024 on
  // fault when read; the mask keeps every key, so only the bound limits.
  const int64_t keys = 4096, width = 64, readable = 1024;
  std::mt19937 random(10);
  float* key = Guarded(2 * keys, width, readable, Random(readable * width, random));
  float* value = Guarded(2 * keys, width, readable, Random(readable * width, random));
  const size_t mask_page = sysconf(_SC_PAGESIZE) / sizeof(float);
  float* mask = Guarded(2 * keys / mask_page, mask_page, readable / mask_page,
                        std::vector<float>(readable, 0.0f));
  Problem p;
  p.batch = 2, p.keys = keys;
  p.query = Random(2 * width, random);
  p.key = key, p.value = value;
  p.mask.assign(2 * keys, 0.0f);
  const kiln_int64 positions[2] = {999, -1};
  std::vector<float> out(2 * width, NAN), lse(2, NAN);
  kiln_attention call = {2,
                         1,
                         keys,
                         width,
                         width,
                         static_cast<float>(1.0 / std::sqrt(double{width})),
                         p.query.data(),
                         key,
                         value,
                         mask,
                         out.data(),
                         lse.data(),
                         {width, width, 1},
                         {0, keys * width, width, 1},  // both rows read sequence 0's keys
                         {0, keys * width, width, 1},
                         {0, 0, 1},
                         {width, width, 1},
                         {1, 1},
                         1,
                         nullptr,
                         positions,
                         1,
                         1};
  const kiln_runtime rt = Runtime();
  kiln_attention_f32(&rt, &call);  // splits the keys of each row in 4 ranges
  EXPECT_EQ(call.partials, nullptr);

  Problem prefix = p;  // the same step over the first 1,000 keys
  prefix.batch = 1, prefix.keys = 1000;
  prefix.query.resize(width);
  prefix.mask.assign(1000, 0.0f);
  std::vector<float> want_out, want_lse;
  Reference(prefix, want_out, want_lse);
  want_out.resize(2 * width, 0.0f);  // length 0: zeros and lse -inf
  want_lse.push_back(kMasked);
  ExpectClose(out, want_out);
  ExpectClose(lse, want_lse);
  for (float* memory : {key, value}) munmap(memory, 2 * keys * width * sizeof(float));
  munmap(mask, 2 * keys * sizeof(float));
}

TEST(KilnAttentionTest, APagedCacheIsReadThroughItsTableUpToEachBound) {
  // A pool of 8 blocks of 16 positions, [block, position, head, width]; the
  // blocks from 4 on fault when read. Sequence 0 (position 40: 41 keys)
  // has blocks 2, 0, 3 and then 5; sequence 1 (position 5) block 1, then
  // 6, 7 and 4: no block past a bound is read.
  const int64_t pool_blocks = 8, block = 16, heads = 2, width = 64, blocks = 4;
  const int64_t row = heads * width;  // floats per position
  std::mt19937 random(11);
  float* key = Guarded(pool_blocks * block, row, 4 * block, Random(4 * block * row, random));
  float* value = Guarded(pool_blocks * block, row, 4 * block, Random(4 * block * row, random));
  const kiln_int64 table[2 * blocks] = {2, 0, 3, 5, 1, 6, 7, 4};
  const kiln_int64 positions[2] = {40, 5};
  const std::vector<float> query = Random(2 * heads * width, random);
  std::vector<float> out(2 * heads * width, NAN), lse(2 * heads, NAN);
  kiln_attention call = {
      2,
      heads,
      blocks * block,
      width,
      width,
      static_cast<float>(1.0 / std::sqrt(double{width})),
      query.data(),
      key,
      value,
      nullptr,
      out.data(),
      lse.data(),
      {heads * width, width, 1},
      {block * row, width, row, 1},  // block, head, position in the block, element
      {block * row, width, row, 1},
      {0, 0, 0},
      {heads * width, width, 1},
      {heads, 1},
      1,
      nullptr,
      positions,
      1,
      1,
      table,
      table,
      1,
      1,
      block,
      blocks,
      pool_blocks};
  const kiln_runtime rt = Runtime();
  kiln_attention_f32(&rt, &call);

  for (int64_t n = 0; n < 2; ++n) {  // each sequence's keys gathered, against the reference
    Problem p;
    p.heads = heads, p.keys = positions[n] + 1;
    p.query.assign(query.begin() + n * heads * width, query.begin() + (n + 1) * heads * width);
    p.mask.assign(p.keys, 0.0f);
    std::vector<float> gathered_key(heads * p.keys * width), gathered_value(gathered_key.size());
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t j = 0; j < p.keys; ++j) {
        const int64_t slot = table[n * blocks + j / block] * block + j % block;
        for (int64_t e = 0; e < width; ++e) {
          gathered_key[(h * p.keys + j) * width + e] = key[slot * row + h * width + e];
          gathered_value[(h * p.keys + j) * width + e] = value[slot * row + h * width + e];
        }
      }
    }
    p.key = gathered_key.data(), p.value = gathered_value.data();
    std::vector<float> want_out, want_lse;
    Reference(p, want_out, want_lse);
    ExpectClose(
        std::vector<float>(out.begin() + n * heads * width, out.begin() + (n + 1) * heads * width),
        want_out);
    ExpectClose(std::vector<float>(lse.begin() + n * heads, lse.begin() + (n + 1) * heads),
                want_lse);
  }
  for (float* memory : {key, value}) munmap(memory, pool_blocks * block * row * sizeof(float));
}

}  // namespace
}  // namespace kiln
