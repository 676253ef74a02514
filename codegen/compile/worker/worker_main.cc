// kiln-compile-worker: a long-lived process that compiles C++ source to .so
// files with clang and lld linked in, for WorkerCompiler
// (codegen/compile/worker_compiler.h). It reads framed CompileRequests from
// stdin and answers each with a framed CompileResponse on stdout (grammar in
// ../worker.proto), one at a time. Diagnostics travel in the response; the
// worker's own messages go to stderr (the daemon's log). Single-threaded.
//
// Not a user-facing command: WorkerCompiler starts it with
//   kiln-compile-worker --parent_pid=<pid> --work_dir=<private dir>
//                       [--memory_limit_bytes=<RLIMIT_AS>]
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/clock.h"
#include "codegen/compile/worker.pb.h"
#include "codegen/compile/worker/in_process_compiler.h"
#include "codegen/compile/worker_frame.h"
#include "common/sanitizers.h"

ABSL_FLAG(int, parent_pid, 0,
          "pid of the process that started this worker; the worker exits if "
          "it is not (or no longer) its parent");
ABSL_FLAG(std::string, work_dir, "",
          "private directory (created by the parent) for scratch objects");
ABSL_FLAG(uint64_t, memory_limit_bytes, 0,
          "address-space limit (RLIMIT_AS) of this worker; a failed allocation exits with "
          "kWorkerOutOfMemoryExitCode (0: no limit)");
ABSL_FLAG(bool, allow_fault_injection, false, "honour CompileRequest.fault (tests only)");

namespace kiln {
namespace {

enum class ReadResult { kOk, kEndOfStream, kError };

// Reads exactly `size` bytes. kEndOfStream only when nothing was read.
ReadResult ReadExactly(int fd, size_t size, std::string* bytes) {
  bytes->resize(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = read(fd, bytes->data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ReadResult::kError;
    if (n == 0) return done == 0 ? ReadResult::kEndOfStream : ReadResult::kError;
    done += n;
  }
  return ReadResult::kOk;
}

bool WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += n;
  }
  return true;
}

// Allocates more than the address-space limit allows, as a pathological
// source would inside clang; the new handler exits. The pointer escapes to
// a global so that the allocation cannot be optimised away.
char* volatile exceeded_memory = nullptr;
void ExceedMemoryLimit() {
  exceeded_memory = new char[absl::GetFlag(FLAGS_memory_limit_bytes)];
  fprintf(stderr, "kiln-compile-worker: allocated past the memory limit\n");
}

void InjectFault(worker::CompileRequest::Fault fault) {
  switch (fault) {
    case worker::CompileRequest::CRASH:
      signal(SIGSEGV, SIG_DFL);  // bypass any handler LLVM installed
      raise(SIGSEGV);
      break;
    case worker::CompileRequest::HANG:
      while (true) pause();
    case worker::CompileRequest::EXCEED_MEMORY:
      ExceedMemoryLimit();
      break;
    default:
      break;
  }
}

worker::CompileResponse Handle(const worker::CompileRequest& request, InProcessCompiler& compiler) {
  worker::CompileResponse response;
  if (request.fault() != worker::CompileRequest::NONE) {
    if (!absl::GetFlag(FLAGS_allow_fault_injection)) {
      response.set_error(
          "fault injection requested, but the worker was not started with "
          "--allow_fault_injection");
      return response;
    }
    if (request.fault() == worker::CompileRequest::EXCEED_MEMORY &&
        absl::GetFlag(FLAGS_memory_limit_bytes) == 0) {
      response.set_error("EXCEED_MEMORY needs --memory_limit_bytes");
      return response;
    }
    InjectFault(request.fault());
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> library = compiler.CompileAndLink(request.source(), request.target());
  response.set_compile_ms(absl::ToDoubleMilliseconds(absl::Now() - start));
  if (library.ok()) {
    response.set_shared_object(*std::move(library));
  } else {
    response.set_error(std::string(library.status().message()));
    response.set_error_code(static_cast<int>(library.status().code()));
  }
  response.set_worker_exiting(!compiler.can_run_again());
  return response;
}

int Serve(int in_fd, int out_fd, InProcessCompiler& compiler) {
  std::string header, payload;
  while (true) {
    const ReadResult read_header = ReadExactly(in_fd, kFrameHeaderBytes, &header);
    if (read_header == ReadResult::kEndOfStream) return 0;  // the parent is done with us
    const uint32_t length = read_header == ReadResult::kOk ? ParseFrameHeader(header.data()) : 0;
    worker::CompileRequest request;
    if (read_header != ReadResult::kOk || length > kMaxFrameBytes ||
        ReadExactly(in_fd, length, &payload) != ReadResult::kOk ||
        !request.ParseFromString(payload)) {
      fprintf(stderr, "kiln-compile-worker: malformed request; exiting\n");
      return 1;
    }
    const worker::CompileResponse response = Handle(request, compiler);
    const std::string bytes = response.SerializeAsString();
    if (!WriteAll(out_fd, FrameHeader(bytes.size()) + bytes)) {
      fprintf(stderr, "kiln-compile-worker: cannot write the response; exiting\n");
      return 1;
    }
    if (response.worker_exiting()) {
      fprintf(stderr, "kiln-compile-worker: lld cannot run again in this process; exiting\n");
      return 0;
    }
  }
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Compiles C++ to .so files for kilnd; started by kilnd, not by hand.");
  absl::ParseCommandLine(argc, argv);

  // Die with the parent. PR_SET_PDEATHSIG fires when the parent *thread*
  // exits (WorkerCompiler spawns from a thread that lives as long as it
  // does); checking getppid() afterwards closes the race where the parent
  // died before the prctl.
  const int parent_pid = absl::GetFlag(FLAGS_parent_pid);
  if (parent_pid <= 0) {
    fprintf(stderr, "kiln-compile-worker: --parent_pid is required (kilnd starts this worker)\n");
    return 1;
  }
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent_pid) {
    fprintf(stderr, "kiln-compile-worker: parent %d is gone; exiting\n", parent_pid);
    return 1;
  }

  // stdout is the protocol channel: keep a private copy of it and point fd 1
  // at stderr, so nothing that prints (LLVM included) can corrupt a frame.
  const int out_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (out_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    fprintf(stderr, "kiln-compile-worker: cannot set up stdout\n");
    return 1;
  }

  // The limit applies from here on; the libraries are already mapped. A
  // failed allocation must end the process with a code kilnd reads as
  // "memory limit", not as a crash to retry.
  kiln::ExitOnAllocationFailure(kiln::kWorkerOutOfMemoryExitCode);
  // Not under ASan or TSan (--config=asan/tsan): their shadow memory is
  // terabytes of address space, so no RLIMIT_AS could be honoured.
  if (const uint64_t limit = absl::GetFlag(FLAGS_memory_limit_bytes);
      limit > 0 && !kiln::kSanitized) {
    const rlimit address_space = {limit, limit};
    if (setrlimit(RLIMIT_AS, &address_space) != 0) {
      fprintf(stderr, "kiln-compile-worker: cannot set RLIMIT_AS: %s\n", strerror(errno));
      return 1;
    }
  }

  const std::string work_dir = absl::GetFlag(FLAGS_work_dir);
  if (work_dir.empty()) {
    fprintf(stderr, "kiln-compile-worker: --work_dir is required\n");
    return 1;
  }
  absl::StatusOr<std::unique_ptr<kiln::InProcessCompiler>> compiler =
      kiln::InProcessCompiler::Create(work_dir);
  if (!compiler.ok()) {
    fprintf(stderr, "kiln-compile-worker: %s\n", compiler.status().ToString().c_str());
    return 1;
  }
  return kiln::Serve(STDIN_FILENO, out_fd, **compiler);
}
