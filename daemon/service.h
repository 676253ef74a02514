// The gRPC face of kilnd: kiln.v1.Kiln on the callback API. Each method
// only dispatches, and finishes its reactor from wherever the answer
// arrives: a compile on the compile pool; the admin calls (List, Evict, Gc,
// Pin, Verify, Prune, Why, Export, Import: one file each in daemon/admin/)
// on the admin pool (daemon/admin/admin_pool.h); on the gRPC thread only a
// hit's point lookup and the calls that read counters. So no admin call
// holds a gRPC thread, and a compile or a hit is answered while one runs.
#ifndef KILN_DAEMON_SERVICE_H_
#define KILN_DAEMON_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/version.h"
#include "daemon/admin/admin_pool.h"
#include "daemon/artifact_cache.h"
#include "daemon/traffic_store.h"
#include "proto/service.grpc.pb.h"

namespace kiln {

class KilnService final : public kiln::v1::Kiln::CallbackService {
 public:
  struct Options {
    // A client started this daemon on demand (Hello says so).
    bool auto_started = false;
    // The protocol spoken: tests set another to stand in for an older kilnd.
    uint32_t protocol_version = kProtocolVersion;
    // Starts the drain the Stop RPC asks for (kilnd's is its SIGTERM path);
    // unset: Stop is Unimplemented.
    std::function<void()> stop;
    // The admin calls' threads and queue; a call past the queue is
    // RESOURCE_EXHAUSTED.
    AdminPool::Options admin;
  };
  KilnService(ArtifactCache* cache, TrafficStore* traffic, std::string cache_dir, Options options);

  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* context,
                                  const kiln::v1::HelloRequest* request,
                                  kiln::v1::HelloResponse* response) override;
  grpc::ServerUnaryReactor* Compile(grpc::CallbackServerContext* context,
                                    const kiln::v1::CompileRequest* request,
                                    kiln::v1::CompileResponse* response) override;
  grpc::ServerUnaryReactor* Lookup(grpc::CallbackServerContext* context,
                                   const kiln::v1::CompileRequest* request,
                                   kiln::v1::CompileResponse* response) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* context,
                                  const kiln::v1::StatsRequest* request,
                                  kiln::v1::StatsResponse* response) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const kiln::v1::ListRequest* request,
                                 kiln::v1::ListResponse* response) override;
  grpc::ServerUnaryReactor* Show(grpc::CallbackServerContext* context,
                                 const kiln::v1::ShowRequest* request,
                                 kiln::v1::ShowResponse* response) override;
  grpc::ServerUnaryReactor* Evict(grpc::CallbackServerContext* context,
                                  const kiln::v1::EvictRequest* request,
                                  kiln::v1::EvictResponse* response) override;
  grpc::ServerUnaryReactor* Gc(grpc::CallbackServerContext* context,
                               const kiln::v1::GcRequest* request,
                               kiln::v1::GcResponse* response) override;
  grpc::ServerUnaryReactor* Pin(grpc::CallbackServerContext* context,
                                const kiln::v1::PinRequest* request,
                                kiln::v1::PinResponse* response) override;
  grpc::ServerUnaryReactor* Verify(grpc::CallbackServerContext* context,
                                   const kiln::v1::VerifyRequest* request,
                                   kiln::v1::VerifyResponse* response) override;
  grpc::ServerUnaryReactor* Prune(grpc::CallbackServerContext* context,
                                  const kiln::v1::PruneRequest* request,
                                  kiln::v1::PruneResponse* response) override;
  grpc::ServerUnaryReactor* Why(grpc::CallbackServerContext* context,
                                const kiln::v1::WhyRequest* request,
                                kiln::v1::WhyResponse* response) override;
  grpc::ServerUnaryReactor* ProvePadding(grpc::CallbackServerContext* context,
                                         const kiln::v1::PaddingRequest* request,
                                         kiln::v1::PaddingResponse* response) override;
  grpc::ServerUnaryReactor* ReportTraffic(grpc::CallbackServerContext* context,
                                          const kiln::v1::TrafficReport* request,
                                          kiln::v1::TrafficReportResponse* response) override;
  grpc::ServerUnaryReactor* GetTraffic(grpc::CallbackServerContext* context,
                                       const kiln::v1::GetTrafficRequest* request,
                                       kiln::v1::GetTrafficResponse* response) override;
  grpc::ServerUnaryReactor* Stop(grpc::CallbackServerContext* context,
                                 const kiln::v1::StopRequest* request,
                                 kiln::v1::StopResponse* response) override;
  grpc::ServerUnaryReactor* Export(grpc::CallbackServerContext* context,
                                   const kiln::v1::ExportRequest* request,
                                   kiln::v1::ExportResponse* response) override;
  grpc::ServerUnaryReactor* Import(grpc::CallbackServerContext* context,
                                   const kiln::v1::ImportRequest* request,
                                   kiln::v1::ImportResponse* response) override;

  // When the last RPC arrived or finished, and whether a compile or lookup
  // is still being answered (for the idle timeout).
  absl::Time last_activity() const;
  bool busy() const;

 private:
  grpc::ServerUnaryReactor* CompileOrLookup(grpc::CallbackServerContext* context,
                                            const kiln::v1::CompileRequest* request,
                                            kiln::v1::CompileResponse* response,
                                            bool allow_compile);
  void Touch();
  // Counts the call as activity; FAILED_PRECONDITION unless its metadata
  // carries this daemon's protocol and ABI versions.
  grpc::Status Admit(const grpc::CallbackServerContext* context);
  static grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                          const grpc::Status& status);
  // Counts a call in flight until the last copy of what it returns goes,
  // whatever way the call ends (the idle timeout waits for it).
  std::shared_ptr<void> CountInFlight();
  // Admits the call, then answers it with `work()`, a StatusOr of the
  // response, counted in flight meanwhile: on this thread, or with
  // `on_admin_pool` on the admin pool. An exception or an empty error
  // becomes an error naming `operation`.
  template <typename Response, typename Work>
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, Response* response,
                                   const char* operation, bool on_admin_pool, Work work);

  ArtifactCache* const cache_;
  TrafficStore* const traffic_;
  const std::string cache_dir_;
  const Options options_;
  std::atomic<int64_t> last_activity_ns_;
  std::atomic<int> in_flight_{0};
  std::unique_ptr<AdminPool> admin_pool_;  // last: its jobs use the members above
};

// absl::Status codes are gRPC's codes.
grpc::Status ToGrpc(const absl::Status& status);

}  // namespace kiln

#endif  // KILN_DAEMON_SERVICE_H_
