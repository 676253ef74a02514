// The gRPC transport (client/transport.h): kiln.v1.Kiln's methods called by
// name with byte buffers, over a channel made from an already connected
// Unix socket. Links gRPC and nothing of Kiln's protos.
#include <grpcpp/create_channel_posix.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <vector>

#include "abi/kiln_abi.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/transport.h"
#include "common/version.h"

namespace kiln {
namespace {

class GrpcTransport final : public Transport {
 public:
  explicit GrpcTransport(int fd)
      : channel_(grpc::CreateCustomInsecureChannelFromFd("kilnd", fd, Arguments())),
        stub_(channel_) {}

  absl::StatusOr<std::string> Call(const char* method, const std::string& request,
                                   absl::Duration timeout,
                                   const std::function<bool()>& interrupted) override {
    grpc::ClientContext context;
    context.AddMetadata(kProtocolMetadataKey, absl::StrCat(kProtocolVersion));
    context.AddMetadata(kAbiMetadataKey, absl::StrCat(KILN_ABI_VERSION));
    const absl::Time deadline = absl::Now() + timeout;
    context.set_deadline(absl::ToChronoTime(deadline));
    grpc::Slice slice(request);
    const grpc::ByteBuffer request_buffer(&slice, 1);
    grpc::ByteBuffer response_buffer;
    grpc::Status status;
    absl::Notification done;
    stub_.UnaryCall(&context, absl::StrCat("/kiln.v1.Kiln/", method), grpc::StubOptions(),
                    &request_buffer, &response_buffer, [&](grpc::Status result) {
                      status = std::move(result);
                      done.Notify();
                    });
    if (!interrupted) done.WaitForNotification();
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
      if (interrupted()) {
        context.TryCancel();
        done.WaitForNotification();
        return absl::CancelledError(
            absl::StrCat("the call of kilnd's ", method, " was interrupted"));
      }
    }
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && absl::Now() >= deadline) {
      absl::Status unanswered = absl::DeadlineExceededError(
          absl::StrCat("kilnd did not answer ", method, " within ", absl::FormatDuration(timeout)));
      unanswered.SetPayload(kUnansweredPayload, absl::Cord());
      return unanswered;
    }
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    std::vector<grpc::Slice> slices;
    if (!response_buffer.Dump(&slices).ok()) {
      return absl::InternalError(absl::StrCat("kilnd's ", method, " response cannot be read"));
    }
    std::string response;
    for (const grpc::Slice& part : slices) {
      response.append(reinterpret_cast<const char*>(part.begin()), part.size());
    }
    return response;
  }

 private:
  static grpc::ChannelArguments Arguments() {
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(256 << 20);
    arguments.SetMaxSendMessageSize(kMaxRequestBytes);
    return arguments;
  }

  std::shared_ptr<grpc::Channel> channel_;  // owns the socket
  grpc::GenericStub stub_;
};

}  // namespace
}  // namespace kiln

extern "C" kiln::Transport* kiln_make_grpc_transport(int fd) { return new kiln::GrpcTransport(fd); }

namespace {
const bool registered = kiln::RegisterTransportMaker(&kiln_make_grpc_transport);
}  // namespace
