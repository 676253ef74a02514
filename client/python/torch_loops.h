// The runtime's parallel loops on torch's intra-op threads, for the
// extension (module.cc hands them to the runtime's pool with RunOn).
//
// A loop of one grain or less runs on the calling thread without entering
// torch or libgomp; a longer one goes to at::parallel_for, which splits it
// in chunks of at least a grain across torch.get_num_threads() threads (on
// the calling thread when that is 1 or the caller is already in a parallel
// region). In a child of fork() every loop runs on the calling thread:
// libgomp's pool stays behind in the parent. Callers pass the grain that pays for a split
// (codegen/emit/ emit_cpp.cc's kChunkWork, the GEMM's threshold), so a small graph enters no
// parallel region at all.
#ifndef KILN_CLIENT_PYTHON_TORCH_LOOPS_H_
#define KILN_CLIENT_PYTHON_TORCH_LOOPS_H_

#include "client/runtime/thread_pool.h"

namespace kiln::python {

// Lives for the process.
const ThreadPool::Loops& TorchLoops();

}  // namespace kiln::python

#endif  // KILN_CLIENT_PYTHON_TORCH_LOOPS_H_
