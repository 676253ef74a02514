// The client side of the compile-worker protocol (framing in
// worker.proto): one request/response round trip over a non-blocking
// stream socket, within a deadline. Used by WorkerCompiler; free of LLVM.
// Thread-compatible: one caller per socket at a time.
#ifndef KILN_CODEGEN_COMPILE_WORKER_CHANNEL_H_
#define KILN_CODEGEN_COMPILE_WORKER_CHANNEL_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "codegen/compile/worker.pb.h"

namespace kiln {

// One round trip is SendRequest then ReceiveResponse, within one deadline.
// Errors: DeadlineExceeded when `deadline` passes first; Unavailable when the
// worker hangs up (it died); Internal for an oversized or malformed frame.
// After any error the worker is out of step and must not be reused.

// Sends `request` on `socket` (O_NONBLOCK; sent with MSG_NOSIGNAL, so a dead
// worker cannot raise SIGPIPE here).
absl::Status SendRequest(int socket, const worker::CompileRequest& request, absl::Time deadline);

// Reads one response.
absl::StatusOr<worker::CompileResponse> ReceiveResponse(int socket, absl::Time deadline);

}  // namespace kiln

#endif  // KILN_CODEGEN_COMPILE_WORKER_CHANNEL_H_
