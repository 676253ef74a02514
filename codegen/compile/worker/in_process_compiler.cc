#include "codegen/compile/worker/in_process_compiler.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <vector>

#include "abi/target.h"
#include "absl/strings/str_cat.h"
#include "clang/Basic/DiagnosticOptions.h"
#include "clang/CodeGen/CodeGenAction.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/CompilerInvocation.h"
#include "clang/Frontend/TextDiagnosticPrinter.h"
#include "clang/Frontend/Utils.h"
#include "codegen/compile/resource_limits.h"
#include "codegen/compile/toolchain.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "lld/Common/Driver.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MemoryBufferRef.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

LLD_HAS_DRIVER(elf)

namespace kiln {
namespace {

// The name clang and the object's STT_FILE symbol see; the same basename as
// SubprocessCompiler's source file, so both produce the same bytes.
constexpr char kSourceName[] = "kernel.cc";

// CodegenFlags() minus the flags that only drive the link step: here lld is
// called directly with kLinkArguments.
bool IsLinkOnlyFlag(const std::string& flag) {
  return flag == "-shared" || flag == "-nostdlib" || flag.rfind("-fuse-ld=", 0) == 0;
}

// What clang's driver passes to ld.lld for CodegenFlags() on x86-64 Linux
// (`clang++ <flags> -### -o k.so k.cc`), minus the -L paths, which do
// nothing under -nostdlib. --threads=1: each worker is one compile job, and
// kilnd sizes the number of jobs to the cores.
// clang-format off
constexpr const char* kLinkArguments[] = {
    "ld.lld", "--hash-style=gnu", "--build-id", "--eh-frame-hdr", "-m", "elf_x86_64", "-shared",
    "--threads=1"};
// clang-format on

// The directory the daemon knows: the worker's private directory is one of
// its temp root's.
absl::Status ScratchFileError(absl::string_view what, const std::string& path, int error) {
  if (IsNoSpaceErrno(error)) return NoSpaceError(Dirname(Dirname(path)));
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", strerror(error)));
}

// Writes a scratch file without fsync: it lives for one link.
absl::Status WriteScratchFile(const std::string& path, const std::string& bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ScratchFileError("cannot create", path, errno);
  size_t written = 0;
  int error = 0;
  while (written < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : ENOSPC;  // a write of 0 bytes: the disk is full
      break;
    }
    written += n;
  }
  close(fd);
  if (error != 0) return ScratchFileError("cannot write", path, error);
  return absl::OkStatus();
}

int out_of_memory_exit_code = 1;

[[noreturn]] void ExitOutOfMemory() {
  static constexpr char kMessage[] =
      "kiln-compile-worker: out of memory (--memory_limit_bytes); exiting\n";
  if (write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1) < 0) _exit(out_of_memory_exit_code);
  _exit(out_of_memory_exit_code);
}

}  // namespace

void ExitOnAllocationFailure(int exit_code) {
  out_of_memory_exit_code = exit_code;
  std::set_new_handler(ExitOutOfMemory);
  llvm::install_bad_alloc_error_handler([](void*, const char*, bool) { ExitOutOfMemory(); },
                                        nullptr);
}

absl::StatusOr<std::unique_ptr<InProcessCompiler>> InProcessCompiler::Create(std::string work_dir) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::InitializeNativeTargetAsmParser();  // inline asm
  std::unique_ptr<InProcessCompiler> compiler(new InProcessCompiler(std::move(work_dir)));
  // The default target's flags are checked now: a worker that cannot build
  // its invocation fails at start, not on a compile.
  RETURN_IF_ERROR(compiler->InvocationFor(kiln::v1::TARGET_NATIVE).status());
  return compiler;
}

InProcessCompiler::InProcessCompiler(std::string work_dir) : work_dir_(std::move(work_dir)) {}

InProcessCompiler::~InProcessCompiler() = default;

absl::StatusOr<const clang::CompilerInvocation*> InProcessCompiler::InvocationFor(
    kiln::v1::Target target) {
  if (auto it = invocations_.find(target); it != invocations_.end()) return it->second.get();
  if (!IsKnownTarget(target)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot compile for unknown ", TargetName(target)));
  }
  // argv[0] must be the real driver path: the driver finds the resource
  // directory next to it, and resolves -march=native here, once.
  std::vector<std::string> arguments = {kDefaultClang};
  for (const std::string& flag : CodegenFlags(target)) {
    if (!IsLinkOnlyFlag(flag)) arguments.push_back(flag);
  }
  // The input is replaced by an in-memory buffer per compile; "-" keeps the
  // driver from looking for a file.
  for (const char* argument : {"-c", "-x", "c++", "-"}) arguments.push_back(argument);
  std::vector<const char*> argv;
  for (const std::string& argument : arguments) argv.push_back(argument.c_str());

  std::string diagnostics;
  llvm::raw_string_ostream diagnostic_stream(diagnostics);
  auto diagnostic_options = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  clang::TextDiagnosticPrinter printer(diagnostic_stream, diagnostic_options.get());
  clang::CreateInvocationOptions options;
  options.Diags = clang::CompilerInstance::createDiagnostics(diagnostic_options.get(), &printer,
                                                             /*ShouldOwnClient=*/false);
  options.ProbePrecompiled = false;
  std::unique_ptr<clang::CompilerInvocation> invocation = clang::createInvocation(argv, options);
  if (invocation == nullptr) {
    return absl::InternalError(absl::StrCat("clang rejected the code-generation flags for ",
                                            TargetName(target), ": ", diagnostics));
  }
  // The clang binary skips freeing at exit for speed; a long-lived worker
  // must free, or it leaks each compile's AST and module.
  invocation->getFrontendOpts().DisableFree = false;
  invocation->getCodeGenOpts().DisableFree = false;
  invocation->getCodeGenOpts().MainFileName = kSourceName;
  // Diagnostics are returned as text, never written to a terminal.
  invocation->getDiagnosticOpts().ShowColors = false;
  const clang::CompilerInvocation* result = invocation.get();
  invocations_[target] = std::move(invocation);
  return result;
}

absl::StatusOr<std::string> InProcessCompiler::CompileAndLink(const std::string& source,
                                                              kiln::v1::Target target) {
  ASSIGN_OR_RETURN(const std::string object, CompileToObject(source, target));
  return Link(object);
}

absl::StatusOr<std::string> InProcessCompiler::CompileToObject(const std::string& source,
                                                               kiln::v1::Target target) {
  ASSIGN_OR_RETURN(const clang::CompilerInvocation* cached, InvocationFor(target));
  auto invocation = std::make_shared<clang::CompilerInvocation>(*cached);
  // `source` is a std::string, so the buffer is NUL-terminated as clang's
  // lexer requires.
  invocation->getFrontendOpts().Inputs = {clang::FrontendInputFile(
      llvm::MemoryBufferRef(source, kSourceName), clang::InputKind(clang::Language::CXX))};

  std::string diagnostics;
  llvm::raw_string_ostream diagnostic_stream(diagnostics);
  llvm::SmallVector<char, 0> object;
  {
    clang::CompilerInstance compiler;
    compiler.setInvocation(std::move(invocation));
    compiler.createDiagnostics(
        new clang::TextDiagnosticPrinter(diagnostic_stream, &compiler.getDiagnosticOpts()),
        /*ShouldOwnClient=*/true);
    compiler.setOutputStream(std::make_unique<llvm::raw_svector_ostream>(object));
    clang::EmitObjAction action;
    if (!compiler.ExecuteAction(action)) {
      diagnostic_stream.flush();
      return absl::InternalError(absl::StrCat("clang failed:\n", diagnostics));
    }
  }
  return std::string(object.data(), object.size());
}

absl::StatusOr<std::string> InProcessCompiler::Link(const std::string& object) {
  const std::string object_path = work_dir_ + "/kernel.o";
  const std::string library_path = work_dir_ + "/kernel.so";
  RETURN_IF_ERROR(WriteScratchFile(object_path, object));

  std::vector<const char*> argv(std::begin(kLinkArguments), std::end(kLinkArguments));
  argv.push_back("-o");
  argv.push_back(library_path.c_str());
  argv.push_back(object_path.c_str());
  std::string output;
  llvm::raw_string_ostream output_stream(output);
  const lld::Result result =
      lld::lldMain(argv, output_stream, output_stream, {{lld::Gnu, &lld::elf::link}});
  can_run_again_ = result.canRunAgain;
  output_stream.flush();

  absl::StatusOr<std::string> library =
      result.retCode == 0       ? ReadFile(library_path)
      : MentionsNoSpace(output) ? NoSpaceError(Dirname(work_dir_))
                                : absl::InternalError(absl::StrCat("lld failed:\n", output));
  unlink(object_path.c_str());
  unlink(library_path.c_str());
  return library;
}

}  // namespace kiln
