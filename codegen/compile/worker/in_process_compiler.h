// C++ source -> .so inside this process: clang 19 as a library, then lld.
// Used only by kiln-compile-worker (worker_main.cc); this is the one library
// in Kiln that links clang/LLVM/lld.
//
// Not thread-safe, and at most one instance per process: lld keeps
// process-wide state, so links must not overlap.
#ifndef KILN_CODEGEN_COMPILE_WORKER_IN_PROCESS_COMPILER_H_
#define KILN_CODEGEN_COMPILE_WORKER_IN_PROCESS_COMPILER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/artifact.pb.h"

namespace clang {
class CompilerInvocation;
}  // namespace clang

namespace kiln {

// Makes every failed allocation in this process, by operator new or inside
// LLVM (which would otherwise abort, indistinguishable from a crash), print
// one line to stderr and _exit(exit_code). Allocations fail once the
// process's RLIMIT_AS is reached. Call once, before compiling.
void ExitOnAllocationFailure(int exit_code);

class InProcessCompiler {
 public:
  // Builds the native target's clang invocation, from kDefaultClang +
  // CodegenFlags() (so artifacts match SubprocessCompiler's), and
  // initialises LLVM's native target. `work_dir` is a private directory that
  // lld reads the object from and writes the .so to; each compile removes
  // its files. Internal if the driver rejects the flags.
  static absl::StatusOr<std::unique_ptr<InProcessCompiler>> Create(std::string work_dir);

  ~InProcessCompiler();

  // Compiles one freestanding translation unit for `target` and links it
  // with `ld.lld -shared`. Each target's invocation is built on its first
  // compile and kept. Returns the .so's bytes, or Internal with clang's or
  // lld's diagnostics, or ResourceExhausted "no space left on device in
  // <parent of work_dir>" when a scratch file does not fit. (On a full disk
  // lld may instead die of SIGBUS: it writes through a shared mapping.)
  absl::StatusOr<std::string> CompileAndLink(const std::string& source, kiln::v1::Target target);

  // False once lld has reported that it cannot run again in this process
  // (after a fatal error inside lld); the process should then exit.
  bool can_run_again() const { return can_run_again_; }

 private:
  explicit InProcessCompiler(std::string work_dir);

  // The cached invocation for `target`, built on first use.
  absl::StatusOr<const clang::CompilerInvocation*> InvocationFor(kiln::v1::Target target);
  absl::StatusOr<std::string> CompileToObject(const std::string& source, kiln::v1::Target target);
  absl::StatusOr<std::string> Link(const std::string& object);

  const std::string work_dir_;
  // One per target compiled for so far, each copied per compile: the driver
  // resolves -march=native once, not per compile.
  std::map<kiln::v1::Target, std::unique_ptr<clang::CompilerInvocation>> invocations_;
  bool can_run_again_ = true;
};

}  // namespace kiln

#endif  // KILN_CODEGEN_COMPILE_WORKER_IN_PROCESS_COMPILER_H_
