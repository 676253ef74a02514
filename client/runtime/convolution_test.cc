#include "client/runtime/convolution.h"

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/runtime/fastest_of.h"
#include "client/runtime/runtime.h"
#include "gtest/gtest.h"

// oneDNN keeps ~100 bytes of per-thread state that it never frees when a
// thread ends (each test's pool threads do): LeakSanitizer's reports of
// allocations made inside libdnnl are not Kiln's. Kiln's own objects
// (memories, streams, attributes, descriptors) are destroyed, and plans stay
// reachable.
extern "C" const char* __lsan_default_suppressions() { return "leak:libdnnl.so\n"; }

namespace kiln {
namespace {

// A convolution's shape, as torch states it.
struct Shape {
  std::string name;
  int spatial;
  long long batch, in_channels, out_channels, groups;
  std::vector<long long> in_size, kernel, stride, padding, dilation;
  bool bias = true;
  bool transposed_src = false;  // src laid out [C, N, spatial...] in memory
  // A transposed convolution (conv_transpose), with torch's output_padding.
  bool transposed = false;
  std::vector<long long> output_padding = {0, 0};
};

long long OutSize(const Shape& s, int d) {
  if (s.transposed) {
    return (s.in_size[d] - 1) * s.stride[d] - 2 * s.padding[d] + s.dilation[d] * (s.kernel[d] - 1) +
           s.output_padding[d] + 1;
  }
  return (s.in_size[d] + 2 * s.padding[d] - s.dilation[d] * (s.kernel[d] - 1) - 1) / s.stride[d] +
         1;
}

// Contiguous strides of `dims`, in elements.
std::vector<long long> Contiguous(const std::vector<long long>& dims) {
  std::vector<long long> strides(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * dims[d + 1];
  return strides;
}

// dst = conv(src, weights) + bias in doubles, one element at a time; up to
// two spatial dims (a 1-d convolution has H = 1). A transposed convolution
// joins input position i to output position i * stride - padding + k *
// dilation through kernel position k: a convolution joins them the other
// way round.
std::vector<double> Reference(const Shape& s, const kiln_conv& c, const std::vector<float>& src,
                              const std::vector<float>& weights, const std::vector<float>& bias) {
  const long long oh = s.spatial == 2 ? c.out_size[0] : 1, ow = c.out_size[s.spatial - 1];
  const long long ih = s.spatial == 2 ? c.in_size[0] : 1, iw = c.in_size[s.spatial - 1];
  const long long kh = s.spatial == 2 ? c.kernel[0] : 1, kw = c.kernel[s.spatial - 1];
  const int h = s.spatial == 2 ? 0 : -1, w = s.spatial - 1;
  const long long in_per_group = s.in_channels / s.groups,
                  out_per_group = s.out_channels / s.groups;
  std::vector<double> dst(s.batch * s.out_channels * oh * ow);
  for (long long n = 0; n < s.batch; ++n)
    for (long long o = 0; o < s.out_channels; ++o)
      for (long long y = 0; y < oh; ++y)
        for (long long x = 0; x < ow; ++x) {
          double sum = s.bias ? bias[o] : 0;
          const long long g = o / out_per_group;
          for (long long i = 0; i < in_per_group; ++i)
            for (long long ky = 0; ky < kh; ++ky)
              for (long long kx = 0; kx < kw; ++kx) {
                // The input position joined to output position `at`
                // along dim d through kernel position k; -1 for none.
                auto source = [&](long long at, long long k, int d) -> long long {
                  if (!s.transposed) return at * c.stride[d] - c.padding[d] + k * c.dilation[d];
                  const long long scaled = at + c.padding[d] - k * c.dilation[d];
                  return scaled < 0 || scaled % c.stride[d] != 0 ? -1 : scaled / c.stride[d];
                };
                const long long iy = h < 0 ? 0 : source(y, ky, h);
                const long long ix = source(x, kx, w);
                if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) continue;
                const long long ci = g * in_per_group + i;
                const float a =
                    src[n * c.src_strides[0] + ci * c.src_strides[1] +
                        (h < 0 ? 0 : iy * c.src_strides[2]) + ix * c.src_strides[2 + w]];
                // Weights are [out, in / groups, ...], transposed [in, out /
                // groups, ...].
                const long long first = s.transposed ? ci : o;
                const long long second = s.transposed ? o % out_per_group : i;
                const float b =
                    weights[first * c.weight_strides[0] + second * c.weight_strides[1] +
                            (h < 0 ? 0 : ky * c.weight_strides[2]) + kx * c.weight_strides[2 + w]];
                sum += double(a) * b;
              }
          dst[((n * s.out_channels + o) * oh + y) * ow + x] = sum;
        }
  return dst;
}

class ConvolutionTest : public ::testing::TestWithParam<std::tuple<int, Shape>> {};

TEST_P(ConvolutionTest, MatchesTheReference) {
  const auto& [threads, s] = GetParam();
  ThreadPool pool(threads);
  kiln_conv c = {};
  c.spatial = s.spatial;
  c.batch = s.batch;
  c.in_channels = s.in_channels;
  c.out_channels = s.out_channels;
  c.groups = s.groups;
  c.transposed = s.transposed;
  std::vector<long long> src_dims = {s.batch, s.in_channels}, dst_dims = {s.batch, s.out_channels},
                         weight_dims = {s.out_channels, s.in_channels / s.groups};
  if (s.transposed) weight_dims = {s.in_channels, s.out_channels / s.groups};
  for (int d = 0; d < s.spatial; ++d) {
    c.in_size[d] = s.in_size[d];
    c.out_size[d] = OutSize(s, d);
    c.kernel[d] = s.kernel[d];
    c.stride[d] = s.stride[d];
    c.padding[d] = s.padding[d];
    c.dilation[d] = s.dilation[d];
    src_dims.push_back(s.in_size[d]);
    dst_dims.push_back(c.out_size[d]);
    weight_dims.push_back(s.kernel[d]);
  }
  std::vector<long long> src_strides = Contiguous(src_dims);
  if (s.transposed_src) {  // memory order [C, N, ...]
    std::vector<long long> swapped = src_dims;
    std::swap(swapped[0], swapped[1]);
    src_strides = Contiguous(swapped);
    std::swap(src_strides[0], src_strides[1]);
  }
  const std::vector<long long> dst_strides = Contiguous(dst_dims);
  const std::vector<long long> weight_strides = Contiguous(weight_dims);
  for (int d = 0; d < 2 + s.spatial; ++d) {
    c.src_strides[d] = src_strides[d];
    c.dst_strides[d] = dst_strides[d];
    c.weight_strides[d] = weight_strides[d];
  }
  auto count = [](const std::vector<long long>& dims) {
    long long product = 1;
    for (long long dim : dims) product *= dim;
    return product;
  };
  std::vector<float> src(count(src_dims)), weights(count(weight_dims)), bias(s.out_channels);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>((i * 37 % 101) / 50.0 - 1);
  for (size_t i = 0; i < weights.size(); ++i)
    weights[i] = static_cast<float>((i * 53 % 97) / 97.0 - 0.5);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 7) - 3;
  const std::vector<double> expected = Reference(s, c, src, weights, bias);
  // A shape's first calls try both of oneDNN's implementations for it (the
  // runtime's Ways), then keep the faster: every call, before, during and
  // after the trials, must match.
  for (int call = 0; call < 2 + 2 * FastestOf<int>::kTrials; ++call) {
    std::vector<float> dst(count(dst_dims), -1234.5f);
    ASSERT_EQ(ConvolveF32(pool, c, src.data(), weights.data(), s.bias ? bias.data() : nullptr,
                          dst.data()),
              0);
    // Each element sums in/groups * kernel products of terms below 1 in
    // size: float32 rounding in any order stays far inside this bound.
    for (size_t i = 0; i < dst.size(); ++i) {
      ASSERT_NEAR(dst[i], expected[i], 1e-4 * (1 + std::abs(expected[i])))
          << "call " << call << ", element " << i;
    }
  }
}

std::vector<Shape> Shapes() {
  return {
      {"resnet_stem", 2, 1, 3, 64, 1, {32, 32}, {7, 7}, {2, 2}, {3, 3}, {1, 1}, false},
      {"batch_split", 2, 4, 16, 32, 1, {10, 12}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},
      {"channel_split", 2, 1, 32, 64, 1, {16, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},
      {"strided_dilated", 2, 2, 8, 16, 1, {17, 15}, {3, 2}, {2, 3}, {2, 0}, {2, 3}},
      {"pointwise_1x1", 2, 1, 64, 128, 1, {14, 14}, {1, 1}, {2, 2}, {0, 0}, {1, 1}},
      {"depthwise", 2, 1, 32, 32, 32, {20, 20}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},
      {"grouped", 2, 1, 16, 24, 4, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false},
      {"conv1d", 1, 2, 6, 10, 2, {33}, {5}, {2}, {2}, {1}},
      {"transposed_src", 2, 3, 8, 8, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, true, true},
      // Transposed convolutions. Where output_padding exceeds padding, the
      // last positions hold only the bias (the runtime writes them itself).
      {"deconv_stride_2",
       2,
       2,
       8,
       6,
       1,
       {5, 6},
       {3, 3},
       {2, 2},
       {1, 1},
       {1, 1},
       true,
       false,
       true,
       {1, 1}},
      {"deconv_grouped_dilated",
       2,
       1,
       8,
       12,
       4,
       {6, 5},
       {3, 2},
       {2, 1},
       {1, 0},
       {2, 2},
       true,
       false,
       true,
       {1, 1}},
      {"deconv_batch_split",
       2,
       4,
       16,
       32,
       1,
       {10, 12},
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1},
       true,
       false,
       true,
       {0, 0}},
      {"deconv_channel_split_past_padding",
       2,
       1,
       32,
       64,
       1,
       {16, 16},
       {3, 3},
       {2, 2},
       {0, 0},
       {1, 1},
       false,
       false,
       true,
       {1, 1}},
      {"deconv_group_split",
       2,
       1,
       64,
       128,
       4,
       {24, 24},
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1},
       true,
       false,
       true,
       {0, 0}},
      {"deconv_transposed_src",
       2,
       3,
       8,
       4,
       1,
       {5, 5},
       {2, 2},
       {2, 2},
       {0, 0},
       {1, 1},
       true,
       true,
       true,
       {0, 0}},
      {"deconv1d_past_padding", 1, 2, 6, 4, 2, {9}, {4}, {3}, {1}, {1}, true, false, true, {2}},
      // One output position, past the full result (1 long, padding 1): the bias alone.
      {"deconv1d_all_bias", 1, 1, 2, 3, 1, {1}, {1}, {3}, {1}, {1}, true, false, true, {2}},
  };
}

INSTANTIATE_TEST_SUITE_P(ThreadsAndShapes, ConvolutionTest,
                         ::testing::Combine(::testing::Values(1, 2, 3),
                                            ::testing::ValuesIn(Shapes())),
                         [](const auto& info) {
                           return absl::StrCat(std::get<1>(info.param).name, "_",
                                               std::get<0>(info.param), "_threads");
                         });

TEST(ConvolutionTableTest, TheRuntimeTableConvolves) {
  Runtime runtime(1);
  kiln_conv c = {};
  c.spatial = 1;
  c.batch = c.in_channels = c.out_channels = c.groups = 1;
  c.in_size[0] = 4;
  c.out_size[0] = 4;
  c.kernel[0] = 1;
  c.stride[0] = c.dilation[0] = 1;
  c.src_strides[0] = c.src_strides[1] = 4;
  c.src_strides[2] = 1;
  c.dst_strides[0] = c.dst_strides[1] = 4;
  c.dst_strides[2] = 1;
  c.weight_strides[0] = c.weight_strides[1] = c.weight_strides[2] = 1;
  const float src[4] = {1, 2, 3, 4}, weight = 2, bias = 0.5f;
  float dst[4] = {};
  ASSERT_EQ(runtime.table()->conv_f32(runtime.table()->context, &c, src, &weight, &bias, dst), 0);
  EXPECT_EQ(std::vector<float>(dst, dst + 4), (std::vector<float>{2.5f, 4.5f, 6.5f, 8.5f}));
}

}  // namespace
}  // namespace kiln
