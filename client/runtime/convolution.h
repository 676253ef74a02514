// Convolutions for artifacts (kiln_runtime.conv_f32), through oneDNN 2.6
// (Debian's libdnnl2, loaded on first use: dnnl.h), the library eager
// PyTorch convolves with on CPUs. A transposed convolution
// (kiln_conv.transposed) is oneDNN's deconvolution, planned, laid out and
// split the same way.
//
// Each convolution keeps oneDNN's layout for its shape (channels-last or
// blocked channels), with reorders from and to the artifact's plain strided
// tensors: what eager does too. oneDNN offers two implementations for many
// shapes (its BRGEMM and its direct JIT convolutions), and which is faster
// depends on the CPU, so a shape's first calls time both and the process
// keeps the faster (fastest_of.h); both compute the same sums within
// float32 rounding. Primitives (where oneDNN generates its code) are made
// once per shape and kept for the process's life, so only a shape's first
// call pays for them, and Warmup's run makes that call.
//
// Threads: each pool thread runs oneDNN at one OpenMP thread on its part
// of the work: a slice of the batch, or of the output channels when the
// batch is smaller than the pool (docs/ARCHITECTURE.md, "Codegen: op families").
#ifndef KILN_CLIENT_RUNTIME_CONVOLUTION_H_
#define KILN_CLIENT_RUNTIME_CONVOLUTION_H_

#include "abi/kiln_abi.h"
#include "client/runtime/thread_pool.h"

namespace kiln {

// dst = conv(src, weights) + bias on `pool`'s threads, transposed when
// conv.transposed is 1. Returns 0; 1 when
// oneDNN cannot be loaded or refuses the shape (the reason on stderr, once
// per reason).
int ConvolveF32(ThreadPool& pool, const kiln_conv& conv, const float* src, const float* weights,
                const float* bias, float* dst);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_CONVOLUTION_H_
