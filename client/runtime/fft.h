// FFTs for artifacts (kiln_runtime.fft_f32 / fft_f64) through FFTW 3
// (Debian's libfftw3-dev: libfftw3 and libfftw3f), any lengths, batched,
// over one or more dims, with any strides (FFTW's guru interface).
//
// FFTW's planner is not thread-safe, its execute functions are: plans are
// made under one mutex with FFTW_ESTIMATE (no timing runs, arrays never
// touched) and FFTW_UNALIGNED, kept per descriptor for the process's life,
// and run with the new-array execute functions on the calling thread. A
// complex-to-real transform destroys its input in FFTW, so it runs on a
// packed copy.
#ifndef KILN_CLIENT_RUNTIME_FFT_H_
#define KILN_CLIENT_RUNTIME_FFT_H_

#include "abi/kiln_abi.h"

namespace kiln {

// out = fft(in) as kiln_abi.h states it. Returns 0; 1 when the descriptor
// is malformed or FFTW cannot plan it (the reason on stderr).
int Fft(const kiln_fft& fft, const float* in, float* out);
int Fft(const kiln_fft& fft, const double* in, double* out);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_FFT_H_
