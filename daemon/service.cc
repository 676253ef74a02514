#include "daemon/service.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "codegen/abi/kiln_abi.h"
#include "common/logging.h"
#include "common/version.h"

namespace kiln {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

KilnService::KilnService(ArtifactCache* cache, std::string cache_dir)
    : cache_(cache), cache_dir_(std::move(cache_dir)) {
  Touch();
}

void KilnService::Touch() { last_activity_ns_ = absl::ToUnixNanos(absl::Now()); }

absl::Time KilnService::last_activity() const { return absl::FromUnixNanos(last_activity_ns_); }

grpc::ServerUnaryReactor* KilnService::Hello(grpc::CallbackServerContext* context,
                                             const kiln::v1::HelloRequest* request,
                                             kiln::v1::HelloResponse* response) {
  Touch();
  response->set_protocol_version(kProtocolVersion);
  response->set_abi_version(KILN_ABI_VERSION);
  response->set_daemon_version(kKilnVersion);
  response->set_pid(getpid());
  response->set_cache_dir(cache_dir_);
  grpc::Status status;
  if (request->protocol_version() != kProtocolVersion ||
      request->abi_version() != KILN_ABI_VERSION) {
    status = grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("version mismatch: client speaks protocol ", request->protocol_version(),
                     " with artifact ABI ", request->abi_version(), "; this kilnd (", kKilnVersion,
                     ") speaks protocol ", kProtocolVersion, " with ABI ", KILN_ABI_VERSION,
                     ". Stop the old kilnd (kill ", getpid(), ") or upgrade the client"));
    KILN_LOG(WARNING) << "refused client \"" << request->client()
                      << "\": " << status.error_message();
  }
  auto* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* KilnService::CompileOrLookup(grpc::CallbackServerContext* context,
                                                       const kiln::v1::CompileRequest* request,
                                                       kiln::v1::CompileResponse* response,
                                                       bool allow_compile) {
  Touch();
  auto* reactor = context->DefaultReactor();
  cache_->Compile(*request, allow_compile,
                  [this, reactor, response](absl::StatusOr<kiln::v1::CompileResponse> result) {
                    if (result.ok()) *response = *std::move(result);
                    Touch();  // a long compile is activity too
                    reactor->Finish(ToGrpc(result.status()));
                  });
  return reactor;
}

grpc::ServerUnaryReactor* KilnService::Compile(grpc::CallbackServerContext* context,
                                               const kiln::v1::CompileRequest* request,
                                               kiln::v1::CompileResponse* response) {
  return CompileOrLookup(context, request, response, /*allow_compile=*/true);
}

grpc::ServerUnaryReactor* KilnService::Lookup(grpc::CallbackServerContext* context,
                                              const kiln::v1::CompileRequest* request,
                                              kiln::v1::CompileResponse* response) {
  return CompileOrLookup(context, request, response, /*allow_compile=*/false);
}

grpc::ServerUnaryReactor* KilnService::Stats(grpc::CallbackServerContext* context,
                                             const kiln::v1::StatsRequest*,
                                             kiln::v1::StatsResponse* response) {
  Touch();
  *response = cache_->Stats();
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* KilnService::List(grpc::CallbackServerContext* context,
                                            const kiln::v1::ListRequest*,
                                            kiln::v1::ListResponse* response) {
  Touch();
  auto result = cache_->List();
  if (result.ok()) *response = *std::move(result);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpc(result.status()));
  return reactor;
}

grpc::ServerUnaryReactor* KilnService::Show(grpc::CallbackServerContext* context,
                                            const kiln::v1::ShowRequest* request,
                                            kiln::v1::ShowResponse* response) {
  Touch();
  auto result = cache_->Show(request->key());
  if (result.ok()) *response->mutable_artifact() = *std::move(result);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpc(result.status()));
  return reactor;
}

grpc::ServerUnaryReactor* KilnService::Evict(grpc::CallbackServerContext* context,
                                             const kiln::v1::EvictRequest* request,
                                             kiln::v1::EvictResponse* response) {
  Touch();
  auto result = cache_->Evict(request->key());
  if (result.ok()) response->set_key(*result);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpc(result.status()));
  return reactor;
}

}  // namespace kiln
