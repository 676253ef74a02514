// The one translation unit built with -fopenmp: torch's at::parallel_for is
// OpenMP in its headers, and without -fopenmp it runs every loop inline.
#include "client/python/torch_loops.h"

#include <ATen/Parallel.h>

#ifndef _OPENMP
#error "torch_loops.cc needs -fopenmp: at::parallel_for is OpenMP in torch's headers"
#endif

namespace kiln::python {
namespace {

int Threads() { return at::get_num_threads(); }

void ParallelFor(int64_t n, int64_t grain, ThreadPool::Body body) {
  if (n < 2 * grain) {
    body(0, n);  // one chunk: no parallel region, no call into torch or libgomp
    return;
  }
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) { body(begin, end); });
}

constexpr ThreadPool::Loops kTorchLoops = {Threads, ParallelFor};

}  // namespace

const ThreadPool::Loops& TorchLoops() { return kTorchLoops; }

}  // namespace kiln::python
