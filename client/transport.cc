#include "client/transport.h"

#include <dlfcn.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace kiln {
namespace {

std::atomic<MakeTransportFn> linked_maker{nullptr};

// The directory of the shared object (or executable) this code is in.
std::string OwnDirectory() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&TransportMaker), &info) == 0 || info.dli_fname == nullptr) {
    return ".";
  }
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

bool RegisterTransportMaker(MakeTransportFn make) {
  linked_maker = make;
  return true;
}

absl::StatusOr<MakeTransportFn> TransportMaker() {
  if (MakeTransportFn make = linked_maker.load()) return make;
  static absl::Mutex mutex(absl::kConstInit);
  absl::MutexLock lock(&mutex);
  if (MakeTransportFn make = linked_maker.load()) return make;
  const char* configured = getenv("KILN_GRPC_LIBRARY");
  const std::string path = configured != nullptr && configured[0] != '\0'
                               ? configured
                               : OwnDirectory() + "/libkiln_grpc.so";
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot load Kiln's gRPC transport ", path, ": ", dlerror()));
  }
  auto make = reinterpret_cast<MakeTransportFn>(dlsym(library, "kiln_make_grpc_transport"));
  if (make == nullptr) {
    return absl::UnavailableError(absl::StrCat(path, " does not export kiln_make_grpc_transport"));
  }
  linked_maker = make;
  return make;
}

}  // namespace kiln
