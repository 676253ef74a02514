// Compiles by running the clang++ driver once per artifact (fork or
// posix_spawn, a fixed argv, no shell). Slower than a worker, which pays
// the driver's and LLVM's start-up once; kept as the fallback when no worker can start or workers
// keep crashing, and as the benchmark's baseline.
#ifndef KILN_CODEGEN_COMPILE_SUBPROCESS_COMPILER_H_
#define KILN_CODEGEN_COMPILE_SUBPROCESS_COMPILER_H_

#include <cstdint>
#include <string>

#include "codegen/compile/compiler.h"
#include "codegen/compile/resource_limits.h"
#include "codegen/compile/toolchain.h"
#include "common/subprocess.h"

namespace kiln {

class SubprocessCompiler : public Compiler {
 public:
  // `work_dir` holds one temporary directory per compile (compile*), removed
  // after; clang's own temporary files go there too (TMPDIR). The
  // constructor removes compile* directories left by a killed process, so
  // no other live SubprocessCompiler may share `work_dir`. clang++ and the
  // processes it starts run under an address-space limit of
  // `memory_limit_bytes` (RLIMIT_AS; 0: none).
  SubprocessCompiler(std::string work_dir, absl::Duration timeout,
                     std::string clang = kDefaultClang,
                     uint64_t memory_limit_bytes = kDefaultCompileMemoryBytes);

  // Errors, besides those of Compiler::Compile: ResourceExhausted when the
  // disk under `work_dir` is full or clang++ exceeds the memory limit;
  // Internal "clang++ crashed (...)" when clang++ or a process it started
  // died of a signal: its crash report goes to the log, not the message.
  absl::StatusOr<CompiledObject> Compile(absl::string_view source,
                                         kiln::v1::Target target) override;
  const char* name() const override { return "subprocess"; }

 private:
  absl::StatusOr<CompiledObject> CompileIn(const std::string& dir, absl::string_view source,
                                           kiln::v1::Target target);
  // The error for a clang++ run that did not succeed.
  absl::Status FailureOf(const ProcessResult& process) const;

  const std::string work_dir_;
  const absl::Duration timeout_;
  const std::string clang_;
  const uint64_t memory_limit_bytes_;
};

}  // namespace kiln

#endif  // KILN_CODEGEN_COMPILE_SUBPROCESS_COMPILER_H_
