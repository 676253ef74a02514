#include "client/runtime/fft.h"

#include <cmath>
#include <complex>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

using Complex = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

// The reference: the definition, sum_k x[k] e^(sign 2 pi i j k / n), in
// double, along one dim of a row-major [rows, n] array.
std::vector<Complex> NaiveDft(const std::vector<Complex>& x, int64_t rows, int64_t n, int sign) {
  std::vector<Complex> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      Complex sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        sum += x[r * n + k] * std::polar(1.0, sign * 2 * kPi * static_cast<double>(j * k) / n);
      }
      y[r * n + j] = sum;
    }
  }
  return y;
}

std::vector<Complex> Values(int64_t count, double seed) {
  std::vector<Complex> x(count);
  for (int64_t i = 0; i < count; ++i) x[i] = {std::sin(seed * (i + 1)), std::cos(seed * i * i)};
  return x;
}

kiln_fft OneDim(int kind, int sign, int64_t n, int64_t rows, int64_t in_row, int64_t out_row) {
  kiln_fft fft = {};
  fft.kind = kind;
  fft.sign = sign;
  fft.rank = 1;
  fft.batch_rank = 1;
  fft.dims[0] = n;
  fft.in_strides[0] = fft.out_strides[0] = 1;
  fft.batch[0] = rows;
  fft.batch_in_strides[0] = in_row;
  fft.batch_out_strides[0] = out_row;
  fft.scale = 1;
  return fft;
}

// A complex-to-complex transform of lengths that are not powers of two,
// forward and backward, float32 and float64, batched.
TEST(FftTest, ComplexToComplexMatchesTheDefinition) {
  for (int64_t n : {1, 2, 5, 12, 17, 30}) {
    for (int sign : {-1, 1}) {
      const int64_t rows = 3;
      const std::vector<Complex> x = Values(rows * n, 0.7);
      const std::vector<Complex> want = NaiveDft(x, rows, n, sign);
      const kiln_fft fft = OneDim(0, sign, n, rows, n, n);
      std::vector<double> in(2 * x.size()), out(2 * x.size());
      std::vector<float> in32(2 * x.size()), out32(2 * x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        in[2 * i] = in32[2 * i] = static_cast<float>(x[i].real());
        in[2 * i + 1] = in32[2 * i + 1] = static_cast<float>(x[i].imag());
      }
      ASSERT_EQ(Fft(fft, in.data(), out.data()), 0);
      ASSERT_EQ(Fft(fft, in32.data(), out32.data()), 0);
      for (size_t i = 0; i < x.size(); ++i) {
        // Inputs were rounded to float: compare with the rounded inputs' DFT.
        EXPECT_NEAR(out[2 * i], want[i].real(), 1e-5 * n) << "n " << n << " at " << i;
        EXPECT_NEAR(out[2 * i + 1], want[i].imag(), 1e-5 * n) << "n " << n << " at " << i;
        EXPECT_NEAR(out32[2 * i], out[2 * i], 2e-6 * n) << "n " << n << " at " << i;
        EXPECT_NEAR(out32[2 * i + 1], out[2 * i + 1], 2e-6 * n) << "n " << n << " at " << i;
      }
    }
  }
}

// Real to complex keeps n / 2 + 1 entries; complex to real inverts it
// (unnormalized: n times the input); a strided (transposed) input reads
// the same values; `scale` multiplies every result.
TEST(FftTest, RealToComplexAndBackWithStridesAndScale) {
  const int64_t n = 9, rows = 4, half = n / 2 + 1;
  std::vector<double> real(rows * n);
  std::vector<Complex> as_complex(rows * n);
  for (int64_t i = 0; i < rows * n; ++i) as_complex[i] = real[i] = std::sin(1.3 * i + 0.2);
  const std::vector<Complex> want = NaiveDft(as_complex, rows, n, -1);

  // The input stored transposed: element (r, k) at k * rows + r.
  std::vector<double> transposed(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < n; ++k) transposed[k * rows + r] = real[r * n + k];
  }
  kiln_fft forward = OneDim(1, -1, n, rows, 1, half);
  forward.in_strides[0] = rows;
  forward.scale = 0.5;
  std::vector<double> spectrum(2 * rows * half);
  ASSERT_EQ(Fft(forward, transposed.data(), spectrum.data()), 0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < half; ++j) {
      EXPECT_NEAR(spectrum[2 * (r * half + j)], 0.5 * want[r * n + j].real(), 1e-12);
      EXPECT_NEAR(spectrum[2 * (r * half + j) + 1], 0.5 * want[r * n + j].imag(), 1e-12);
    }
  }
  const std::vector<double> kept = spectrum;
  kiln_fft backward = OneDim(2, 1, n, rows, half, n);
  backward.scale = 2.0 / n;
  std::vector<double> back(rows * n);
  ASSERT_EQ(Fft(backward, spectrum.data(), back.data()), 0);
  EXPECT_EQ(spectrum, kept) << "the input of a complex-to-real transform is only read";
  for (int64_t i = 0; i < rows * n; ++i) EXPECT_NEAR(back[i], real[i], 1e-12) << i;
}

// Two transformed dims: the 2-d DFT of a [4, 6] array, as rows then columns.
TEST(FftTest, TwoDims) {
  const int64_t h = 4, w = 6;
  const std::vector<Complex> x = Values(h * w, 0.3);
  std::vector<Complex> rows_done = NaiveDft(x, h, w, -1);
  std::vector<Complex> columns(h * w);
  for (int64_t r = 0; r < h; ++r) {
    for (int64_t c = 0; c < w; ++c) columns[c * h + r] = rows_done[r * w + c];
  }
  const std::vector<Complex> both = NaiveDft(columns, w, h, -1);  // [w, h]
  kiln_fft fft = {};
  fft.kind = 0;
  fft.sign = -1;
  fft.rank = 2;
  fft.dims[0] = h;
  fft.dims[1] = w;
  fft.in_strides[0] = fft.out_strides[0] = w;
  fft.in_strides[1] = fft.out_strides[1] = 1;
  fft.scale = 1;
  std::vector<double> in(2 * h * w), out(2 * h * w);
  for (int64_t i = 0; i < h * w; ++i) {
    in[2 * i] = x[i].real();
    in[2 * i + 1] = x[i].imag();
  }
  ASSERT_EQ(Fft(fft, in.data(), out.data()), 0);
  for (int64_t r = 0; r < h; ++r) {
    for (int64_t c = 0; c < w; ++c) {
      EXPECT_NEAR(out[2 * (r * w + c)], both[c * h + r].real(), 1e-12);
      EXPECT_NEAR(out[2 * (r * w + c) + 1], both[c * h + r].imag(), 1e-12);
    }
  }
}

TEST(FftTest, MalformedDescriptorIsRefused) {
  kiln_fft fft = OneDim(0, -1, 4, 1, 4, 4);
  fft.rank = 9;
  std::vector<double> in(8), out(8);
  EXPECT_EQ(Fft(fft, in.data(), out.data()), 1);
}

}  // namespace
}  // namespace kiln
