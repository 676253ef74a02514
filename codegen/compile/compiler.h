// C++ source -> shared object. Two implementations behind one interface:
//   SubprocessCompiler  runs clang++ per compile (the fallback and the
//                       benchmark baseline);
//   WorkerCompiler      sends the source to long-lived worker processes that
//                       link clang and lld (worker_compiler.h).
// Neither links LLVM into the calling process.
#ifndef KILN_CODEGEN_COMPILE_COMPILER_H_
#define KILN_CODEGEN_COMPILE_COMPILER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/artifact.pb.h"

namespace kiln {

struct CompiledObject {
  std::string shared_object;  // the .so's bytes
  double compile_ms = 0;      // wall time of the compile and link
  std::string compiler;       // which Compiler built it: "worker", "subprocess"
};

class Compiler {
 public:
  virtual ~Compiler() = default;

  // Compiles one freestanding translation unit with the flags of `target`
  // (CodegenFlags(target), toolchain.h). Thread-safe. Errors: DeadlineExceeded when the compile
  // outlives its time limit (the compiler is killed); ResourceExhausted "no space left on device in
  // DIR" when the temporary directory's disk is full, or naming the memory limit the compiler
  // exceeded (resource_limits.h); Internal with the compiler's diagnostics when it fails or crashes
  // (generated code that does not compile is a Kiln bug, never a user error). InvalidArgument for a
  // target that is not IsKnownTarget.
  virtual absl::StatusOr<CompiledObject> Compile(absl::string_view source,
                                                 kiln::v1::Target target) = 0;

  // Starts ahead of time what a first Compile would wait for; nothing where
  // there is nothing to start.
  virtual absl::Status Warmup() { return absl::OkStatus(); }

  // For logs: "worker", "subprocess", "worker, else subprocess".
  virtual const char* name() const = 0;
};

}  // namespace kiln

#endif  // KILN_CODEGEN_COMPILE_COMPILER_H_
