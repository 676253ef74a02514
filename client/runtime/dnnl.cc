#include "client/runtime/dnnl.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <type_traits>

#include "absl/base/const_init.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace kiln {

const Dnnl& OpenDnnl() {
  static const Dnnl* const dnnl = [] {
    auto* api = new Dnnl;
    void* library = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      api->error = absl::StrCat("cannot load oneDNN (Debian's libdnnl2): ", dlerror());
      return api;
    }
    auto resolve = [&](void* from, auto& function, const char* name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(from, name));
      if (function == nullptr && api->error.empty()) {
        api->error = absl::StrCat("libdnnl.so.2 has no ", name, ": not oneDNN 2.x");
      }
    };
#define KILN_DNNL_RESOLVE(name) resolve(library, api->name, #name);
    KILN_DNNL_FUNCTIONS(KILN_DNNL_RESOLVE)
#undef KILN_DNNL_RESOLVE
    void* openmp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (openmp == nullptr) {
      api->error = "oneDNN is loaded but its OpenMP runtime (libgomp.so.1) is not";
      return api;
    }
    resolve(openmp, api->omp_get_max_threads, "omp_get_max_threads");
    resolve(openmp, api->omp_set_num_threads, "omp_set_num_threads");
    if (api->error.empty() && api->dnnl_engine_create(&api->engine, dnnl_cpu, 0) != dnnl_success) {
      api->error = "oneDNN has no CPU engine";
    }
    return api;
  }();
  return *dnnl;
}

dnnl_stream_t ThisThreadsStream(const Dnnl& dnnl) {
  // Destroyed when the thread ends (pools come and go).
  struct Stream {
    dnnl_stream_t stream = nullptr;
    ~Stream() {
      if (stream != nullptr) OpenDnnl().dnnl_stream_destroy(stream);
    }
  };
  thread_local Stream own;
  if (own.stream == nullptr && dnnl.dnnl_stream_create(&own.stream, dnnl.engine,
                                                       dnnl_stream_default_flags) != dnnl_success) {
    own.stream = nullptr;
  }
  return own.stream;
}

dnnl_memory_desc_t ScratchpadDesc(const Dnnl& dnnl, size_t bytes) {
  dnnl_memory_desc_t desc;
  const dnnl_dims_t dims = {static_cast<dnnl_dim_t>(std::max<size_t>(bytes, 1))};
  dnnl.dnnl_memory_desc_init_by_tag(&desc, 1, dims, dnnl_u8, dnnl_x);
  return desc;
}

std::string ImplementationOf(const Dnnl& dnnl, const_dnnl_primitive_desc_t descriptor) {
  const char* implementation = nullptr;
  if (dnnl.dnnl_primitive_desc_query(descriptor, dnnl_query_impl_info_str, 0, &implementation) !=
          dnnl_success ||
      implementation == nullptr) {
    return "";
  }
  return implementation;
}

void ReportOnce(const std::string& reason) {
  static absl::Mutex mutex(absl::kConstInit);
  static auto* const told = new absl::flat_hash_set<std::string>;
  absl::MutexLock lock(&mutex);
  if (told->insert(reason).second) fprintf(stderr, "kiln runtime: %s\n", reason.c_str());
}

}  // namespace kiln
