#include "daemon/service.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <new>

#include "abi/kiln_abi.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "daemon/admin/bundles.h"
#include "daemon/admin/list.h"
#include "daemon/admin/pin.h"
#include "daemon/admin/prune.h"
#include "daemon/admin/verify.h"
#include "daemon/admin/why.h"
#include "daemon/padding_proof.h"

namespace kiln {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

KilnService::KilnService(ArtifactCache* cache, TrafficStore* traffic, std::string cache_dir,
                         Options options)
    : cache_(cache),
      traffic_(traffic),
      cache_dir_(std::move(cache_dir)),
      options_(options),
      admin_pool_(std::make_unique<AdminPool>(options.admin)) {
  Touch();
}

void KilnService::Touch() { last_activity_ns_ = absl::ToUnixNanos(absl::Now()); }

absl::Time KilnService::last_activity() const { return absl::FromUnixNanos(last_activity_ns_); }

bool KilnService::busy() const { return in_flight_ > 0; }

std::shared_ptr<void> KilnService::CountInFlight() {
  ++in_flight_;
  return std::shared_ptr<void>(nullptr, [this](void*) {
    Touch();  // a long call is activity too
    --in_flight_;
  });
}

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
  cache_->Compile(*request, allow_compile,
                  [reactor, response,
                   in_flight = CountInFlight()](absl::StatusOr<kiln::v1::CompileResponse> result) {
                    if (result.ok()) *response = *std::move(result);
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

namespace {

// `work()`, with an exception or an error without a message turned into an
// error that names `operation`.
template <typename Response, typename Work>
absl::StatusOr<Response> RunNamed(const char* operation, Work& work) {
  absl::StatusOr<Response> result = [&]() -> absl::StatusOr<Response> {
    try {
      return work();
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(absl::StrCat(operation, ": kilnd ran out of memory"));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(operation, " failed: ", e.what()));
    }
  }();
  if (!result.ok() && result.status().message().empty()) {
    return absl::Status(result.status().code(),
                        absl::StrCat(operation, " failed (",
                                     absl::StatusCodeToString(result.status().code()), ")"));
  }
  return result;
}

}  // namespace

template <typename Response, typename Work>
grpc::ServerUnaryReactor* KilnService::Answer(grpc::CallbackServerContext* context,
                                              Response* response, const char* operation,
                                              bool on_admin_pool, Work work) {
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    return Finish(context, refused);
  }
  auto* reactor = context->DefaultReactor();
  auto answer = [reactor, response, operation, work = std::move(work),
                 in_flight = CountInFlight()]() mutable {
    absl::StatusOr<Response> result = RunNamed<Response>(operation, work);
    if (result.ok()) *response = *std::move(result);
    reactor->Finish(ToGrpc(result.status()));
  };
  if (!on_admin_pool) {
    answer();
  } else if (!admin_pool_->Submit(std::move(answer))) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat(operation, ": kilnd's admin queue is full (",
                                  admin_pool_->options().max_queued,
                                  " calls waiting, --admin_queue); try again when they finish")));
  }
  return reactor;
}

grpc::ServerUnaryReactor* KilnService::List(grpc::CallbackServerContext* context,
                                            const kiln::v1::ListRequest* request,
                                            kiln::v1::ListResponse* response) {
  return Answer(context, response, "list", /*on_admin_pool=*/true, [this, request] {
    return admin::List(cache_->tier(), cache_->UsesUnread(), *request);
  });
}

grpc::ServerUnaryReactor* KilnService::Show(grpc::CallbackServerContext* context,
                                            const kiln::v1::ShowRequest* request,
                                            kiln::v1::ShowResponse* response) {
  return Answer(context, response, "show", /*on_admin_pool=*/false,
                [this, request]() -> absl::StatusOr<kiln::v1::ShowResponse> {
                  kiln::v1::ShowResponse shown;
                  ASSIGN_OR_RETURN(*shown.mutable_artifact(), cache_->Show(request->key()));
                  return shown;
                });
}

grpc::ServerUnaryReactor* KilnService::Evict(grpc::CallbackServerContext* context,
                                             const kiln::v1::EvictRequest* request,
                                             kiln::v1::EvictResponse* response) {
  return Answer(context, response, "evict", /*on_admin_pool=*/true,
                [this, request]() -> absl::StatusOr<kiln::v1::EvictResponse> {
                  kiln::v1::EvictResponse evicted;
                  ASSIGN_OR_RETURN(*evicted.mutable_key(), cache_->Evict(request->key()));
                  return evicted;
                });
}

grpc::ServerUnaryReactor* KilnService::Gc(grpc::CallbackServerContext* context,
                                          const kiln::v1::GcRequest* request,
                                          kiln::v1::GcResponse* response) {
  return Answer(context, response, "gc", /*on_admin_pool=*/true,
                [this, request]() -> absl::StatusOr<kiln::v1::GcResponse> {
                  // An operator's explicit request: the limits as given.
                  admin::GcLimits limits;
                  limits.max_bytes = request->has_max_bytes() ? request->max_bytes()
                                                              : cache_->options().max_cache_bytes;
                  limits.max_age = request->has_older_than_ms()
                                       ? absl::Milliseconds(request->older_than_ms())
                                       : cache_->options().max_entry_age;
                  limits.dry_run = request->dry_run();
                  ASSIGN_OR_RETURN(const admin::GcResult result, cache_->Gc(limits));
                  kiln::v1::GcResponse done;
                  for (const EntryUsage& entry : result.evicted) {
                    kiln::v1::GcResponse::Evicted* evicted = done.add_evicted();
                    evicted->set_key(entry.key);
                    evicted->set_object_bytes(entry.object_bytes);
                    evicted->set_last_use_unix_ms(absl::ToUnixMillis(entry.last_use));
                  }
                  done.set_bytes_before(result.bytes_before);
                  done.set_bytes_after(result.bytes_after);
                  return done;
                });
}

grpc::ServerUnaryReactor* KilnService::Pin(grpc::CallbackServerContext* context,
                                           const kiln::v1::PinRequest* request,
                                           kiln::v1::PinResponse* response) {
  return Answer(context, response, "pin", /*on_admin_pool=*/true,
                [this, request] { return admin::Pin(cache_->tier(), *request); });
}

grpc::ServerUnaryReactor* KilnService::Verify(grpc::CallbackServerContext* context,
                                              const kiln::v1::VerifyRequest* request,
                                              kiln::v1::VerifyResponse* response) {
  return Answer(context, response, "verify", /*on_admin_pool=*/true,
                [this, request] { return admin::Verify(cache_->tier(), request->repair()); });
}

grpc::ServerUnaryReactor* KilnService::Prune(grpc::CallbackServerContext* context,
                                             const kiln::v1::PruneRequest* request,
                                             kiln::v1::PruneResponse* response) {
  return Answer(context, response, "prune", /*on_admin_pool=*/true, [this, request] {
    return admin::Prune(cache_->tier(), cache_->toolchain_digests(), request->dry_run());
  });
}

grpc::ServerUnaryReactor* KilnService::Why(grpc::CallbackServerContext* context,
                                           const kiln::v1::WhyRequest* request,
                                           kiln::v1::WhyResponse* response) {
  return Answer(context, response, "why", /*on_admin_pool=*/true, [this, request] {
    return admin::Why(cache_->tier(), *request,
                      cache_->compile_path().RecentMisses(std::max(request->last(), 1)),
                      cache_->toolchains(), cache_->toolchain_digests(), cache_->options().now());
  });
}

grpc::ServerUnaryReactor* KilnService::ProvePadding(grpc::CallbackServerContext* context,
                                                    const kiln::v1::PaddingRequest* request,
                                                    kiln::v1::PaddingResponse* response) {
  // Preparing the graph is a compile's first stage: not on a reactor thread.
  return Answer(context, response, "prove padding", /*on_admin_pool=*/true, [this, request] {
    return kiln::ProvePadding(*request, cache_->options().max_graph_nodes);
  });
}

grpc::ServerUnaryReactor* KilnService::ReportTraffic(grpc::CallbackServerContext* context,
                                                     const kiln::v1::TrafficReport* request,
                                                     kiln::v1::TrafficReportResponse* response) {
  return Answer(
      context, response, "report traffic", /*on_admin_pool=*/false,
      [this, request]() -> absl::StatusOr<kiln::v1::TrafficReportResponse> {
        if (request->local_index_hits() < 0) {
          return absl::InvalidArgumentError("a traffic report counts below zero local-index hits");
        }
        cache_->AddLocalIndexHits(request->local_index_hits());
        // A report of local-index hits alone names no graph.
        const bool has_calls =
            request->histogram().rows_size() > 0 || request->histogram().other_calls() != 0;
        if (request->graph_digest().empty()) {
          if (has_calls) {
            return absl::InvalidArgumentError("a traffic report with calls names no graph");
          }
          return kiln::v1::TrafficReportResponse();
        }
        RETURN_IF_ERROR(traffic_->Add(*request));
        return kiln::v1::TrafficReportResponse();
      });
}

grpc::ServerUnaryReactor* KilnService::GetTraffic(grpc::CallbackServerContext* context,
                                                  const kiln::v1::GetTrafficRequest* request,
                                                  kiln::v1::GetTrafficResponse* response) {
  return Answer(context, response, "get traffic", /*on_admin_pool=*/false,
                [this, request]() -> absl::StatusOr<kiln::v1::GetTrafficResponse> {
                  kiln::v1::GetTrafficResponse traffic;
                  ASSIGN_OR_RETURN(*traffic.mutable_histogram(),
                                   traffic_->Get(request->graph_digest()));
                  return traffic;
                });
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

grpc::ServerUnaryReactor* KilnService::Export(grpc::CallbackServerContext* context,
                                              const kiln::v1::ExportRequest* request,
                                              kiln::v1::ExportResponse* response) {
  return Answer(context, response, "export", /*on_admin_pool=*/true, [this, request] {
    return admin::Export(cache_->tier(), cache_->toolchain_digests(), *request);
  });
}

grpc::ServerUnaryReactor* KilnService::Import(grpc::CallbackServerContext* context,
                                              const kiln::v1::ImportRequest* request,
                                              kiln::v1::ImportResponse* response) {
  return Answer(context, response, "import", /*on_admin_pool=*/true,
                [this, request]() -> absl::StatusOr<kiln::v1::ImportResponse> {
                  const ArtifactCache::Options& options = cache_->options();
                  admin::ImportOptions import;
                  import.max_blob_bytes = options.max_artifact_bytes;
                  import.max_metadata_bytes = options.max_bundle_metadata_bytes;
                  import.now = options.now();
                  import.testonly_delay = options.testonly_import_delay;
                  ASSIGN_OR_RETURN(
                      kiln::v1::ImportResponse imported,
                      admin::Import(cache_->tier(), cache_->toolchain_digests(), import, *request));
                  std::vector<std::string> keys;
                  for (const kiln::v1::BundledEntry& entry : imported.entries()) {
                    keys.push_back(entry.key());
                  }
                  cache_->Stored(keys);
                  return imported;
                });
}

}  // namespace kiln
