#include "client/runtime/fft.h"

#include <fftw3.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace kiln {
namespace {

using Dims = std::vector<fftw_iodim64>;

template <typename T>
struct Fftw;

template <>
struct Fftw<float> {
  using Plan = fftwf_plan;
  using Complex = fftwf_complex;
  static Plan Dft(const Dims& dims, const Dims& batch, Complex* in, Complex* out, int sign) {
    return fftwf_plan_guru64_dft(dims.size(), dims.data(), batch.size(), batch.data(), in, out,
                                 sign, kFlags);
  }
  static Plan RealToComplex(const Dims& dims, const Dims& batch, float* in, Complex* out) {
    return fftwf_plan_guru64_dft_r2c(dims.size(), dims.data(), batch.size(), batch.data(), in, out,
                                     kFlags);
  }
  static Plan ComplexToReal(const Dims& dims, const Dims& batch, Complex* in, float* out) {
    return fftwf_plan_guru64_dft_c2r(dims.size(), dims.data(), batch.size(), batch.data(), in, out,
                                     kFlags | FFTW_DESTROY_INPUT);
  }
  static void Dft(Plan plan, Complex* in, Complex* out) { fftwf_execute_dft(plan, in, out); }
  static void Dft(Plan plan, float* in, Complex* out) { fftwf_execute_dft_r2c(plan, in, out); }
  static void Dft(Plan plan, Complex* in, float* out) { fftwf_execute_dft_c2r(plan, in, out); }
  static constexpr unsigned kFlags = FFTW_ESTIMATE | FFTW_UNALIGNED;
};

template <>
struct Fftw<double> {
  using Plan = fftw_plan;
  using Complex = fftw_complex;
  static Plan Dft(const Dims& dims, const Dims& batch, Complex* in, Complex* out, int sign) {
    return fftw_plan_guru64_dft(dims.size(), dims.data(), batch.size(), batch.data(), in, out, sign,
                                kFlags);
  }
  static Plan RealToComplex(const Dims& dims, const Dims& batch, double* in, Complex* out) {
    return fftw_plan_guru64_dft_r2c(dims.size(), dims.data(), batch.size(), batch.data(), in, out,
                                    kFlags);
  }
  static Plan ComplexToReal(const Dims& dims, const Dims& batch, Complex* in, double* out) {
    return fftw_plan_guru64_dft_c2r(dims.size(), dims.data(), batch.size(), batch.data(), in, out,
                                    kFlags | FFTW_DESTROY_INPUT);
  }
  static void Dft(Plan plan, Complex* in, Complex* out) { fftw_execute_dft(plan, in, out); }
  static void Dft(Plan plan, double* in, Complex* out) { fftw_execute_dft_r2c(plan, in, out); }
  static void Dft(Plan plan, Complex* in, double* out) { fftw_execute_dft_c2r(plan, in, out); }
  static constexpr unsigned kFlags = FFTW_ESTIMATE | FFTW_UNALIGNED;
};

// Calls fn(in_offset, out_offset) for every element of `dims` (batch dims
// and transformed dims alike), offsets in each side's elements.
template <typename Fn>
void ForEachElement(const Dims& dims, Fn fn) {
  std::vector<int64_t> index(dims.size(), 0);
  for (const fftw_iodim64& dim : dims) {
    if (dim.n == 0) return;
  }
  int64_t in = 0, out = 0;
  while (true) {
    fn(in, out);
    size_t d = dims.size();
    while (d > 0) {
      --d;
      if (++index[d] < dims[d].n) {
        in += dims[d].is;
        out += dims[d].os;
        break;
      }
      in -= (dims[d].n - 1) * dims[d].is;
      out -= (dims[d].n - 1) * dims[d].os;
      index[d] = 0;
      if (d == 0) return;
    }
    if (dims.empty()) return;
  }
}

template <typename T>
int Transform(const kiln_fft& fft, const T* in, T* out) {
  using F = Fftw<T>;
  using Complex = typename F::Complex;
  if (fft.kind < 0 || fft.kind > 2 || fft.rank < 1 || fft.rank > 8 || fft.batch_rank < 0 ||
      fft.batch_rank > 8) {
    fprintf(stderr, "kiln runtime: malformed FFT (kind %d, rank %d, batch rank %d)\n", fft.kind,
            fft.rank, fft.batch_rank);
    return 1;
  }
  Dims dims(fft.rank), batch(fft.batch_rank);
  for (int d = 0; d < fft.rank; ++d) dims[d] = {fft.dims[d], fft.in_strides[d], fft.out_strides[d]};
  for (int b = 0; b < fft.batch_rank; ++b) {
    batch[b] = {fft.batch[b], fft.batch_in_strides[b], fft.batch_out_strides[b]};
    if (fft.batch[b] == 0) return 0;
  }
  // The complex side's extents: the last transformed dim is halved for
  // r2c and c2r.
  Dims complex_dims = dims;
  if (fft.kind != 0) complex_dims.back().n = complex_dims.back().n / 2 + 1;

  // c2r destroys its input: it runs on a packed copy, batch dims outer.
  std::vector<T> packed;
  const Complex* source = reinterpret_cast<const Complex*>(in);
  if (fft.kind == 2) {
    Dims all = batch;
    all.insert(all.end(), complex_dims.begin(), complex_dims.end());
    int64_t count = 1;
    for (size_t d = all.size(); d-- > 0;) {
      all[d].os = count;
      count *= all[d].n;
    }
    packed.resize(2 * count);
    ForEachElement(all, [&](int64_t from, int64_t to) {
      std::memcpy(&packed[2 * to], source[from], sizeof(Complex));
    });
    for (size_t d = 0; d < batch.size(); ++d) batch[d].is = all[d].os;
    for (size_t d = 0; d < dims.size(); ++d) dims[d].is = all[batch.size() + d].os;
    source = reinterpret_cast<const Complex*>(packed.data());
  }

  // The plan for this descriptor (after packing: a c2r's input strides are
  // the packed ones).
  std::string key(reinterpret_cast<const char*>(&fft), offsetof(kiln_fft, scale));
  for (const Dims* list : {&dims, &batch}) {
    for (const fftw_iodim64& dim : *list) {
      key.append(reinterpret_cast<const char*>(&dim), sizeof(dim));
    }
  }
  // The planner and `plans` are used under `mutex` alone.
  static absl::Mutex mutex(absl::kConstInit);
  static auto* plans = new std::map<std::string, typename F::Plan>();
  typename F::Plan plan = nullptr;
  {
    absl::MutexLock lock(&mutex);
    auto it = plans->find(key);
    if (it != plans->end()) {
      plan = it->second;
    } else {
      // FFTW_ESTIMATE never reads or writes the arrays while planning.
      Complex* complex_in = const_cast<Complex*>(source);
      T* real_in = const_cast<T*>(in);
      Complex* complex_out = reinterpret_cast<Complex*>(out);
      if (fft.kind == 0) plan = F::Dft(dims, batch, complex_in, complex_out, fft.sign);
      if (fft.kind == 1) plan = F::RealToComplex(dims, batch, real_in, complex_out);
      if (fft.kind == 2) plan = F::ComplexToReal(dims, batch, complex_in, out);
      if (plan == nullptr) {
        fprintf(stderr, "kiln runtime: FFTW cannot plan an FFT of kind %d over %d dims\n", fft.kind,
                fft.rank);
        return 1;
      }
      plans->emplace(key, plan);
    }
  }
  if (fft.kind == 0) {
    F::Dft(plan, const_cast<Complex*>(source), reinterpret_cast<Complex*>(out));
  } else if (fft.kind == 1) {
    F::Dft(plan, const_cast<T*>(in), reinterpret_cast<Complex*>(out));
  } else {
    F::Dft(plan, const_cast<Complex*>(source), out);
  }

  if (fft.scale != 1.0) {
    const T scale = static_cast<T>(fft.scale);
    Dims all = batch;
    all.insert(all.end(), fft.kind == 2 ? dims.begin() : complex_dims.begin(),
               fft.kind == 2 ? dims.end() : complex_dims.end());
    const int parts = fft.kind == 2 ? 1 : 2;
    ForEachElement(all, [&](int64_t, int64_t at) {
      for (int k = 0; k < parts; ++k) out[at * parts + k] *= scale;
    });
  }
  return 0;
}

}  // namespace

int Fft(const kiln_fft& fft, const float* in, float* out) { return Transform(fft, in, out); }
int Fft(const kiln_fft& fft, const double* in, double* out) { return Transform(fft, in, out); }

}  // namespace kiln
