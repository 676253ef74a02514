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

KilnService::KilnService(ArtifactCache* cache, TrafficStore* traffic, std::string cache_dir,
                         Options options)
    : cache_(cache), traffic_(traffic), cache_dir_(std::move(cache_dir)), options_(options) {
  Touch();
}

void KilnService::Touch() { last_activity_ns_ = absl::ToUnixNanos(absl::Now()); }

absl::Time KilnService::last_activity() const { return absl::FromUnixNanos(last_activity_ns_); }

bool KilnService::busy() const { return in_flight_ > 0; }

grpc::ServerUnaryReactor* KilnService::Hello(grpc::CallbackServerContext* context,
                                             const kiln::v1::HelloRequest* request,
                                             kiln::v1::HelloResponse* response) {
  Touch();
  // Always answered, whatever the client's versions: it decides what to do
  // with a daemon of another version (common/version.h). Every other call
  // is refused on a mismatch.
  response->set_protocol_version(options_.protocol_version);
  response->set_abi_version(KILN_ABI_VERSION);
  response->set_daemon_version(kKilnVersion);
  response->set_pid(getpid());
  response->set_cache_dir(cache_dir_);
  response->set_auto_started(options_.auto_started);
  if (request->protocol_version() != options_.protocol_version ||
      request->abi_version() != KILN_ABI_VERSION) {
    KILN_LOG(WARNING) << "client \"" << request->client().substr(0, 100) << "\" speaks protocol "
                      << request->protocol_version() << " with ABI " << request->abi_version()
                      << "; its calls will be refused";
  }
  return Finish(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* KilnService::Finish(grpc::CallbackServerContext* context,
                                              const grpc::Status& status) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::Status KilnService::Admit(const grpc::CallbackServerContext* context) {
  Touch();
  const auto& metadata = context->client_metadata();
  auto value = [&](const char* key) -> std::string {
    auto it = metadata.find(key);
    return it == metadata.end() ? "none" : std::string(it->second.data(), it->second.size());
  };
  const std::string protocol = value(kProtocolMetadataKey), abi = value(kAbiMetadataKey);
  if (protocol == absl::StrCat(options_.protocol_version) &&
      abi == absl::StrCat(KILN_ABI_VERSION)) {
    return grpc::Status::OK;
  }
  return grpc::Status(
      grpc::StatusCode::FAILED_PRECONDITION,
      absl::StrCat("version mismatch: the call carries protocol ", protocol.substr(0, 20),
                   " with artifact ABI ", abi.substr(0, 20), "; this kilnd (", kKilnVersion,
                   ", pid ", getpid(), ") speaks protocol ", options_.protocol_version,
                   " with ABI ", KILN_ABI_VERSION, ". Use a client of the same Kiln version"));
}

grpc::ServerUnaryReactor* KilnService::CompileOrLookup(grpc::CallbackServerContext* context,
                                                       const kiln::v1::CompileRequest* request,
                                                       kiln::v1::CompileResponse* response,
                                                       bool allow_compile) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  auto* reactor = context->DefaultReactor();
  ++in_flight_;
  cache_->Compile(*request, allow_compile,
                  [this, reactor, response](absl::StatusOr<kiln::v1::CompileResponse> result) {
                    if (result.ok()) *response = *std::move(result);
                    Touch();  // a long compile is activity too
                    --in_flight_;
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
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  *response = cache_->Stats();
  return Finish(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* KilnService::List(grpc::CallbackServerContext* context,
                                            const kiln::v1::ListRequest* request,
                                            kiln::v1::ListResponse* response) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  auto result = cache_->List(*request);
  if (result.ok()) *response = *std::move(result);
  return Finish(context, ToGrpc(result.status()));
}

grpc::ServerUnaryReactor* KilnService::Show(grpc::CallbackServerContext* context,
                                            const kiln::v1::ShowRequest* request,
                                            kiln::v1::ShowResponse* response) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  auto result = cache_->Show(request->key());
  if (result.ok()) *response->mutable_artifact() = *std::move(result);
  return Finish(context, ToGrpc(result.status()));
}

grpc::ServerUnaryReactor* KilnService::Evict(grpc::CallbackServerContext* context,
                                             const kiln::v1::EvictRequest* request,
                                             kiln::v1::EvictResponse* response) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  auto result = cache_->Evict(request->key());
  if (result.ok()) response->set_key(*result);
  return Finish(context, ToGrpc(result.status()));
}

grpc::ServerUnaryReactor* KilnService::Gc(grpc::CallbackServerContext* context,
                                          const kiln::v1::GcRequest* request,
                                          kiln::v1::GcResponse* response) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  ArtifactCache::GcOptions options;
  if (request->has_max_bytes()) options.max_bytes = request->max_bytes();
  if (request->has_older_than_ms()) options.max_age = absl::Milliseconds(request->older_than_ms());
  options.dry_run = request->dry_run();
  options.grace = absl::ZeroDuration();  // an operator's explicit request: the limits as given
  auto result = cache_->Gc(options);
  if (result.ok()) {
    for (const EntryUsage& entry : result->evicted) {
      kiln::v1::GcResponse::Evicted* evicted = response->add_evicted();
      evicted->set_key(entry.key);
      evicted->set_object_bytes(entry.object_bytes);
      evicted->set_last_use_unix_ms(absl::ToUnixMillis(entry.last_use));
    }
    response->set_bytes_before(result->bytes_before);
    response->set_bytes_after(result->bytes_after);
  }
  return Finish(context, ToGrpc(result.status()));
}

grpc::ServerUnaryReactor* KilnService::Pin(grpc::CallbackServerContext* context,
                                           const kiln::v1::PinRequest* request,
                                           kiln::v1::PinResponse* response) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  auto result = request->graph_digest().empty()
                    ? cache_->SetPinned(request->key(), request->pinned())
                    : cache_->SetPinnedForGraph(request->graph_digest(), request->pinned());
  if (result.ok()) *response->mutable_keys() = {result->begin(), result->end()};
  return Finish(context, ToGrpc(result.status()));
}

grpc::ServerUnaryReactor* KilnService::Verify(grpc::CallbackServerContext* context,
                                              const kiln::v1::VerifyRequest* request,
                                              kiln::v1::VerifyResponse* response) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  auto result = cache_->Verify(request->repair());
  if (result.ok()) *response = *std::move(result);
  return Finish(context, ToGrpc(result.status()));
}

grpc::ServerUnaryReactor* KilnService::Prune(grpc::CallbackServerContext* context,
                                             const kiln::v1::PruneRequest* request,
                                             kiln::v1::PruneResponse* response) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  auto result = cache_->Prune(request->dry_run());
  if (result.ok()) *response = *std::move(result);
  return Finish(context, ToGrpc(result.status()));
}

grpc::ServerUnaryReactor* KilnService::Why(grpc::CallbackServerContext* context,
                                           const kiln::v1::WhyRequest* request,
                                           kiln::v1::WhyResponse* response) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  auto result = cache_->Why(*request);
  if (result.ok()) *response = *std::move(result);
  return Finish(context, ToGrpc(result.status()));
}

grpc::ServerUnaryReactor* KilnService::ReportTraffic(grpc::CallbackServerContext* context,
                                                     const kiln::v1::TrafficReport* request,
                                                     kiln::v1::TrafficReportResponse*) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  return Finish(context, ToGrpc(traffic_->Add(*request)));
}

grpc::ServerUnaryReactor* KilnService::GetTraffic(grpc::CallbackServerContext* context,
                                                  const kiln::v1::GetTrafficRequest* request,
                                                  kiln::v1::GetTrafficResponse* response) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  auto result = traffic_->Get(request->graph_digest());
  if (result.ok()) *response->mutable_histogram() = *std::move(result);
  return Finish(context, ToGrpc(result.status()));
}

grpc::ServerUnaryReactor* KilnService::Stop(grpc::CallbackServerContext* context,
                                            const kiln::v1::StopRequest*,
                                            kiln::v1::StopResponse* response) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  // Who may stop kilnd is who may connect: its socket is private to its
  // user (and root). `kiln stop` also refuses a daemon of another uid.
  if (!options_.stop) {
    return Finish(context, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                        "this kilnd cannot be stopped by a call; send it SIGTERM"));
  }
  KILN_LOG(INFO) << "asked to stop by a client; draining";
  response->set_pid(getpid());
  // The answer goes out first: the drain lets running calls finish.
  auto* reactor = Finish(context, grpc::Status::OK);
  options_.stop();
  return reactor;
}

// Export and Import read or write a whole bundle on this thread, as Gc and
// Verify do; counted in flight so that the idle timeout waits for them.
grpc::ServerUnaryReactor* KilnService::Export(grpc::CallbackServerContext* context,
                                              const kiln::v1::ExportRequest* request,
                                              kiln::v1::ExportResponse* response) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  ++in_flight_;
  auto result = cache_->Export(*request);
  --in_flight_;
  Touch();
  if (result.ok()) *response = *std::move(result);
  return Finish(context, ToGrpc(result.status()));
}

grpc::ServerUnaryReactor* KilnService::Import(grpc::CallbackServerContext* context,
                                              const kiln::v1::ImportRequest* request,
                                              kiln::v1::ImportResponse* response) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  ++in_flight_;
  auto result = cache_->Import(*request);
  --in_flight_;
  Touch();
  if (result.ok()) *response = *std::move(result);
  return Finish(context, ToGrpc(result.status()));
}

}  // namespace kiln
