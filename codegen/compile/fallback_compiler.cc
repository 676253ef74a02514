#include "codegen/compile/fallback_compiler.h"

#include "common/logging.h"

namespace kiln {

FallbackCompiler::FallbackCompiler(std::unique_ptr<Compiler> primary,
                                   std::unique_ptr<Compiler> fallback)
    : primary_(std::move(primary)), fallback_(std::move(fallback)) {}

absl::StatusOr<CompiledObject> FallbackCompiler::Compile(absl::string_view source) {
  if (primary_ != nullptr) {
    absl::StatusOr<CompiledObject> object = primary_->Compile(source);
    if (object.ok() || object.status().code() != absl::StatusCode::kUnavailable) return object;
    if (!warned_.exchange(true)) {
      KILN_LOG(WARNING) << primary_->name() << " compiler unavailable (" << object.status()
                        << "); compiling with " << fallback_->name();
    }
  }
  return fallback_->Compile(source);
}

}  // namespace kiln
