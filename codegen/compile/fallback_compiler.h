// Compiles with a primary Compiler (the worker pool) and falls back to a
// second one (the clang++ subprocess) when the primary is Unavailable — no
// worker binary, a worker that cannot start, or workers that crashed on the
// compile and its retry. Other errors are returned as they are: a compile
// that fails in the worker fails in clang++ too, and so does one that found
// the disk full or exceeded the memory limit (ResourceExhausted).
#ifndef KILN_CODEGEN_COMPILE_FALLBACK_COMPILER_H_
#define KILN_CODEGEN_COMPILE_FALLBACK_COMPILER_H_

#include <atomic>
#include <memory>

#include "codegen/compile/compiler.h"

namespace kiln {

class FallbackCompiler : public Compiler {
 public:
  // `primary` may be null (no worker found): every compile uses `fallback`.
  FallbackCompiler(std::unique_ptr<Compiler> primary, std::unique_ptr<Compiler> fallback);

  // When the fallback fails too, its error, with the primary's appended.
  absl::StatusOr<CompiledObject> Compile(absl::string_view source,
                                         kiln::v1::Target target) override;
  absl::Status Warmup() override { return primary_ ? primary_->Warmup() : absl::OkStatus(); }
  const char* name() const override { return "worker, else subprocess"; }

 private:
  const std::unique_ptr<Compiler> primary_;
  const std::unique_ptr<Compiler> fallback_;
  std::atomic<bool> warned_{false};
};

}  // namespace kiln

#endif  // KILN_CODEGEN_COMPILE_FALLBACK_COMPILER_H_
