// Compiles by running the clang++ driver once per artifact (posix_spawn, a
// fixed argv, no shell). About 170 ms a compile here; kept as the fallback
// when no worker can start and as the benchmark's baseline.
#ifndef KILN_CODEGEN_COMPILE_SUBPROCESS_COMPILER_H_
#define KILN_CODEGEN_COMPILE_SUBPROCESS_COMPILER_H_

#include <string>

#include "codegen/compile/compiler.h"
#include "codegen/compile/toolchain.h"

namespace kiln {

class SubprocessCompiler : public Compiler {
 public:
  // `work_dir` holds one temporary directory per compile, removed after.
  SubprocessCompiler(std::string work_dir, absl::Duration timeout,
                     std::string clang = kDefaultClang);

  absl::StatusOr<CompiledObject> Compile(absl::string_view source) override;
  const char* name() const override { return "subprocess"; }

 private:
  const std::string work_dir_;
  const absl::Duration timeout_;
  const std::string clang_;
};

}  // namespace kiln

#endif  // KILN_CODEGEN_COMPILE_SUBPROCESS_COMPILER_H_
