#include "codegen/compile/subprocess_compiler.h"

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace kiln {

SubprocessCompiler::SubprocessCompiler(std::string work_dir, absl::Duration timeout,
                                       std::string clang)
    : work_dir_(std::move(work_dir)), timeout_(timeout), clang_(std::move(clang)) {}

absl::StatusOr<CompiledObject> SubprocessCompiler::Compile(absl::string_view source) {
  const absl::Time start = absl::Now();
  RETURN_IF_ERROR(MakeDirectories(work_dir_, 0700));
  ASSIGN_OR_RETURN(const std::string dir, MakeTempDirectory(work_dir_ + "/compileXXXXXX"));
  const std::string source_path = dir + "/kernel.cc";
  const std::string object_path = dir + "/kernel.so";
  absl::StatusOr<CompiledObject> result = [&]() -> absl::StatusOr<CompiledObject> {
    RETURN_IF_ERROR(WriteFileAtomically(source_path, source, 0600));
    std::vector<std::string> argv = {clang_};
    for (const std::string& flag : CodegenFlags()) argv.push_back(flag);
    for (const std::string& arg : {std::string("-o"), object_path, source_path}) argv.push_back(arg);
    ASSIGN_OR_RETURN(const ProcessResult process, RunProcess(argv, timeout_));
    if (process.exit_code != 0) {
      return absl::InternalError(absl::StrCat(
          "clang++ failed (", process.signal ? absl::StrCat("signal ", process.signal)
                                             : absl::StrCat("exit ", process.exit_code),
          "): ", process.output.substr(0, 4000)));
    }
    CompiledObject object;
    ASSIGN_OR_RETURN(object.shared_object, ReadFile(object_path));
    object.compile_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    object.compiler = name();
    return object;
  }();
  RemoveRecursively(dir).IgnoreError();
  return result;
}

}  // namespace kiln
