#include "codegen/compile/worker_channel.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "codegen/compile/worker_frame.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// Waits until `socket` is ready for `events`. DeadlineExceeded at `deadline`.
absl::Status WaitFor(int socket, short events, absl::Time deadline) {
  while (true) {
    const int64_t remaining_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (remaining_ms <= 0) return absl::DeadlineExceededError("compile worker timed out");
    pollfd poll_fd = {socket, events, 0};
    const int ready = poll(&poll_fd, 1, static_cast<int>(std::min<int64_t>(remaining_ms, 1000)));
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("poll failed: ", strerror(errno)));
    }
  }
}

// Unavailable means the worker closed its end: it died.
absl::Status SendAll(int socket, const std::string& bytes, absl::Time deadline) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = send(socket, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      RETURN_IF_ERROR(WaitFor(socket, POLLOUT, deadline));
    } else if (n < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("compile worker hung up: ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReceiveExactly(int socket, size_t size, absl::Time deadline) {
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = recv(socket, bytes.data() + done, size - done, 0);
    if (n > 0) {
      done += n;
    } else if (n == 0) {
      return absl::UnavailableError("compile worker hung up");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      RETURN_IF_ERROR(WaitFor(socket, POLLIN, deadline));
    } else if (errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("compile worker hung up: ", strerror(errno)));
    }
  }
  return bytes;
}

}  // namespace

absl::Status SendRequest(int socket, const worker::CompileRequest& request, absl::Time deadline) {
  const std::string payload = request.SerializeAsString();
  if (payload.size() > kMaxFrameBytes) {
    return absl::InternalError(absl::StrCat("source of ", payload.size(), " bytes is too large"));
  }
  return SendAll(socket, FrameHeader(payload.size()) + payload, deadline);
}

absl::StatusOr<worker::CompileResponse> ReceiveResponse(int socket, absl::Time deadline) {
  ASSIGN_OR_RETURN(const std::string header, ReceiveExactly(socket, kFrameHeaderBytes, deadline));
  const uint32_t length = ParseFrameHeader(header.data());
  if (length > kMaxFrameBytes) {
    return absl::InternalError(absl::StrCat("compile worker sent a frame of ", length, " bytes"));
  }
  ASSIGN_OR_RETURN(const std::string bytes, ReceiveExactly(socket, length, deadline));
  worker::CompileResponse response;
  if (!response.ParseFromString(bytes)) {
    return absl::InternalError("compile worker sent a malformed response");
  }
  return response;
}

}  // namespace kiln
