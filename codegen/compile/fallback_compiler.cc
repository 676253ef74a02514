#include "codegen/compile/fallback_compiler.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace kiln {

FallbackCompiler::FallbackCompiler(std::unique_ptr<Compiler> primary,
                                   std::unique_ptr<Compiler> fallback)
    : primary_(std::move(primary)), fallback_(std::move(fallback)) {}

absl::StatusOr<CompiledObject> FallbackCompiler::Compile(absl::string_view source,
                                                         kiln::v1::Target target) {
  if (primary_ == nullptr) return fallback_->Compile(source, target);
  absl::StatusOr<CompiledObject> object = primary_->Compile(source, target);
  if (object.ok() || object.status().code() != absl::StatusCode::kUnavailable) return object;
  // Once: with no worker binary, every compile comes here.
  if (!warned_.exchange(true)) {
    KILN_LOG(WARNING) << primary_->name() << " compiler unavailable (" << object.status()
                      << "); compiling with " << fallback_->name();
  }
  absl::StatusOr<CompiledObject> fallback = fallback_->Compile(source, target);
  if (fallback.ok()) return fallback;
  return absl::Status(fallback.status().code(),
                      absl::StrCat(fallback.status().message(), " (after the ", primary_->name(),
                                   " compiler: ", object.status().message(), ")"));
}

}  // namespace kiln
