#include "codegen/compile/subprocess_compiler.h"

#include <signal.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codegen/compile/stale_files.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace kiln {
namespace {

constexpr char kCompileDirectoryPrefix[] = "compile";

}  // namespace

SubprocessCompiler::SubprocessCompiler(std::string work_dir, absl::Duration timeout,
                                       std::string clang, uint64_t memory_limit_bytes)
    : work_dir_(std::move(work_dir)),
      timeout_(timeout),
      clang_(std::move(clang)),
      memory_limit_bytes_(memory_limit_bytes) {
  RemoveStaleEntries(work_dir_, kCompileDirectoryPrefix);
}

absl::StatusOr<CompiledObject> SubprocessCompiler::Compile(absl::string_view source,
                                                           kiln::v1::Target target) {
  if (!IsKnownTarget(target)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot compile for unknown ", TargetName(target)));
  }
  RETURN_IF_ERROR(MakeDirectories(work_dir_, 0700));
  ASSIGN_OR_RETURN(const std::string dir, MakeTempDirectory(absl::StrCat(
                                              work_dir_, "/", kCompileDirectoryPrefix, "XXXXXX")));
  absl::StatusOr<CompiledObject> result = CompileIn(dir, source, target);
  RemoveRecursively(dir).IgnoreError();
  return result;
}

absl::StatusOr<CompiledObject> SubprocessCompiler::CompileIn(const std::string& dir,
                                                             absl::string_view source,
                                                             kiln::v1::Target target) {
  const absl::Time start = absl::Now();
  const std::string source_path = dir + "/kernel.cc";
  const std::string object_path = dir + "/kernel.so";
  const absl::Status written = WriteFileAtomically(source_path, source, 0600);
  if (absl::IsResourceExhausted(written)) return NoSpaceError(work_dir_);
  RETURN_IF_ERROR(written);
  std::vector<std::string> argv = {clang_};
  for (const std::string& flag : CodegenFlags(target)) argv.push_back(flag);
  for (const std::string& arg : {std::string("-o"), object_path, source_path}) argv.push_back(arg);
  RunOptions options;
  options.timeout = timeout_;
  // The driver's intermediate object goes to TMPDIR: here, it lands on the
  // disk whose space is checked and in the directory removed after.
  options.env = {{"TMPDIR", dir}};
  options.address_space_limit = memory_limit_bytes_;
  ASSIGN_OR_RETURN(const ProcessResult process, RunProcess(argv, options));
  if (process.exit_code != 0) return FailureOf(process);
  CompiledObject object;
  ASSIGN_OR_RETURN(object.shared_object, ReadFile(object_path));
  object.compile_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  object.compiler = name();
  return object;
}

absl::Status SubprocessCompiler::FailureOf(const ProcessResult& process) const {
  // lld writes through a shared mapping: on a full disk it dies of SIGBUS
  // ("Bus error" from the driver) rather than report ENOSPC.
  const bool bus_error = process.signal == SIGBUS || absl::StrContains(process.output, "Bus error");
  if (MentionsNoSpace(process.output) || (bus_error && IsNearlyFull(work_dir_))) {
    return NoSpaceError(work_dir_);
  }
  if (memory_limit_bytes_ > 0 && MentionsOutOfMemory(process.output)) {
    return MemoryLimitError(memory_limit_bytes_);
  }
  // A crash's report (a stack dump, a request to file a bug) means nothing
  // to a client.
  if (process.signal != 0 || absl::StrContains(process.output, "PLEASE submit a bug report") ||
      absl::StrContains(process.output, "command failed due to signal")) {
    KILN_LOG(ERROR) << "clang++ crashed: " << process.output.substr(0, 16000);
    return absl::InternalError(absl::StrCat(
        "clang++ crashed (", process.signal ? absl::StrCat("signal ", process.signal) : "a signal",
        " in clang or a process it started) on the generated source; its report is in kilnd's "
        "log"));
  }
  return absl::InternalError(absl::StrCat("clang++ failed (",
                                          process.signal ? absl::StrCat("signal ", process.signal)
                                                         : absl::StrCat("exit ", process.exit_code),
                                          "): ", process.output.substr(0, 4000)));
}

}  // namespace kiln
