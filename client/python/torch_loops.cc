// The one translation unit built with -fopenmp: torch's at::parallel_for is
// OpenMP in its headers, and without -fopenmp it runs every loop inline.
#include "client/python/torch_loops.h"

#include <ATen/Parallel.h>
#include <pthread.h>

#include <atomic>

#ifndef _OPENMP
#error "torch_loops.cc needs -fopenmp: at::parallel_for is OpenMP in torch's headers"
#endif

namespace kiln::python {
namespace {

// Set in a child of fork(): libgomp's pool does not survive fork (a parallel
// region in the child of a process that entered one waits forever for
// threads that stayed behind), so a child runs every loop on its calling
// thread.
std::atomic<bool> forked_child{false};
const bool kForkHandler = [] {
  pthread_atfork(nullptr, nullptr, [] { forked_child.store(true, std::memory_order_relaxed); });
  return true;
}();

int Threads() { return forked_child.load(std::memory_order_relaxed) ? 1 : at::get_num_threads(); }

void ParallelFor(int64_t n, int64_t grain, ThreadPool::Body body) {
  if (n < 2 * grain || forked_child.load(std::memory_order_relaxed)) {
    body(0, n);  // one chunk: no parallel region, no call into torch or libgomp
    return;
  }
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) { body(begin, end); });
}

constexpr ThreadPool::Loops kTorchLoops = {Threads, ParallelFor};

}  // namespace

const ThreadPool::Loops& TorchLoops() { return kTorchLoops; }

}  // namespace kiln::python
