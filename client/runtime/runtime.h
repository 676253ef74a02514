// The runtime table artifacts call back into (abi/kiln_abi.h):
// parallel loops on the runtime's own pool, GEMM through OpenBLAS or
// oneDNN (whichever is faster for the shape: gemm_ways.h), convolutions
// through oneDNN.
//
// OpenBLAS (Debian's libopenblas0-pthread) keeps a private, spin-waiting
// thread pool that cannot be handed work, and oneDNN runs on OpenMP.
// Large GEMMs are therefore split by rows or columns across this
// runtime's pool, each block at one OpenBLAS or OpenMP thread, so busy
// threads never outnumber the pool's. The process's own OpenBLAS thread
// count (eager PyTorch's) is restored between them.
#ifndef KILN_CLIENT_RUNTIME_RUNTIME_H_
#define KILN_CLIENT_RUNTIME_RUNTIME_H_

#include <cstdint>
#include <cstdlib>
#include <string>

#include "abi/kiln_abi.h"
#include "absl/status/status.h"
#include "client/runtime/gemm_ways.h"
#include "client/runtime/thread_pool.h"

namespace kiln {

// Memory grown to the largest size asked of it, 64-byte aligned, never
// shrunk: per-thread scratch that steady-state calls reuse without
// allocating. Get returns nullptr when the memory is not there (and keeps
// what it had), and may for 0 bytes.
class GrowingBuffer {
 public:
  GrowingBuffer() = default;
  GrowingBuffer(const GrowingBuffer&) = delete;
  GrowingBuffer& operator=(const GrowingBuffer&) = delete;
  ~GrowingBuffer() { free(block_); }
  void* Get(int64_t bytes);
  int64_t size() const { return size_; }
  // Gives the memory back; the next Get allocates afresh.
  void Release() {
    free(block_);
    block_ = nullptr;
    size_ = 0;
  }

 private:
  char* block_ = nullptr;
  int64_t size_ = 0;
};

class Runtime {
 public:
  // `threads` includes the calling thread; 0 means one per core.
  explicit Runtime(int threads = 0, GemmLibraries gemm_libraries = GemmLibrariesFromEnvironment());
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The process-wide runtime ($KILN_NUM_THREADS threads, else one per core).
  static Runtime& Default();

  const kiln_runtime* table() const { return &table_; }
  // The error the calling thread's last kiln_run that returned
  // KILN_RUN_INDEX_ERROR, KILN_RUN_LINALG_ERROR or KILN_RUN_CHECK_ERROR was told, once:
  // OutOfRange "index_copy: index 9 is out of bounds for dim 2 with size 8",
  // or eager's linear algebra error (linalg_errors.h).
  static absl::Status TakeRunError();
  ThreadPool& pool() { return pool_; }
  GemmWays& gemm_ways() { return gemm_ways_; }

 private:
  ThreadPool pool_;
  GemmWays gemm_ways_;
  kiln_runtime table_;
};

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_RUNTIME_H_
