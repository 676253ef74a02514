// oneDNN 2.x (Debian's libdnnl2) for the runtime's convolutions and
// matrix products, loaded on first use and called through its C API.
//
// oneDNN is 40 MB: a process that never convolves or multiplies a large
// matrix never maps it. Its functions are resolved with dlsym, so Kiln
// builds against its headers alone.
//
// Threads: the runtime owns them. oneDNN runs on OpenMP (Debian's build),
// which would start a second, spinning team next to the pool; instead each
// pool thread runs oneDNN at one OpenMP thread (OneOpenMpThread) on its
// part of the work.
#ifndef KILN_CLIENT_RUNTIME_DNNL_H_
#define KILN_CLIENT_RUNTIME_DNNL_H_

#include <dnnl.h>

#include <string>

namespace kiln {

// The oneDNN C API functions Kiln calls.
#define KILN_DNNL_FUNCTIONS(X)                    \
  X(dnnl_engine_create)                           \
  X(dnnl_stream_create)                           \
  X(dnnl_stream_destroy)                          \
  X(dnnl_stream_wait)                             \
  X(dnnl_memory_desc_init_by_strides)             \
  X(dnnl_memory_desc_init_by_tag)                 \
  X(dnnl_memory_desc_equal)                       \
  X(dnnl_memory_desc_get_size)                    \
  X(dnnl_dilated_convolution_forward_desc_init)   \
  X(dnnl_dilated_deconvolution_forward_desc_init) \
  X(dnnl_matmul_desc_init)                        \
  X(dnnl_primitive_attr_create)                   \
  X(dnnl_primitive_attr_destroy)                  \
  X(dnnl_primitive_attr_set_scratchpad_mode)      \
  X(dnnl_primitive_desc_create)                   \
  X(dnnl_reorder_primitive_desc_create)           \
  X(dnnl_primitive_desc_query)                    \
  X(dnnl_primitive_desc_query_md)                 \
  X(dnnl_primitive_desc_destroy)                  \
  X(dnnl_primitive_create)                        \
  X(dnnl_primitive_destroy)                       \
  X(dnnl_primitive_execute)                       \
  X(dnnl_memory_create)                           \
  X(dnnl_memory_set_data_handle)                  \
  X(dnnl_memory_destroy)

struct Dnnl {
#define KILN_DNNL_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_DNNL_FUNCTIONS(KILN_DNNL_MEMBER)
#undef KILN_DNNL_MEMBER
  // OpenMP's, from the libgomp oneDNN brought in.
  int (*omp_get_max_threads)() = nullptr;
  void (*omp_set_num_threads)(int) = nullptr;
  dnnl_engine_t engine = nullptr;
  std::string error;  // why oneDNN is not there; empty when it is
};

// oneDNN, loaded on first use, never unloaded. Thread-safe.
const Dnnl& OpenDnnl();

// The calling thread's oneDNN stream (made on its first use, destroyed
// with the thread), or null when oneDNN cannot make one.
dnnl_stream_t ThisThreadsStream(const Dnnl& dnnl);

// oneDNN's description of a primitive's implementation, as ONEDNN_VERBOSE
// prints it ("brg:avx512_core"); empty when it gives none.
std::string ImplementationOf(const Dnnl& dnnl, const_dnnl_primitive_desc_t descriptor);

// The descriptor of a user-mode scratchpad of `bytes` (at least 1: oneDNN
// takes no empty memory).
dnnl_memory_desc_t ScratchpadDesc(const Dnnl& dnnl, size_t bytes);

// A primitive, destroyed with its owner (oneDNN is loaded when it exists).
struct Primitive {
  Primitive() = default;
  Primitive(const Primitive&) = delete;
  Primitive& operator=(const Primitive&) = delete;
  ~Primitive() {
    if (handle != nullptr) OpenDnnl().dnnl_primitive_destroy(handle);
  }
  explicit operator bool() const { return handle != nullptr; }

  dnnl_primitive_t handle = nullptr;
};

// While alive, oneDNN calls on this thread run at one OpenMP thread.
class OneOpenMpThread {
 public:
  explicit OneOpenMpThread(const Dnnl& dnnl) : dnnl_(dnnl), saved_(dnnl.omp_get_max_threads()) {
    if (saved_ != 1) dnnl_.omp_set_num_threads(1);
  }
  ~OneOpenMpThread() {
    if (saved_ != 1) dnnl_.omp_set_num_threads(saved_);
  }
  OneOpenMpThread(const OneOpenMpThread&) = delete;
  OneOpenMpThread& operator=(const OneOpenMpThread&) = delete;

 private:
  const Dnnl& dnnl_;
  const int saved_;
};

// Tells stderr why the runtime could not do something, once per reason.
void ReportOnce(const std::string& reason);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_DNNL_H_
