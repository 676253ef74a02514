// kiln::Client: one process's way to the artifacts in kilnd's cache. A
// request's artifact comes from the local index when kilnd has answered it
// on this machine before (no round trip), else from kilnd over its socket.
// The connection is client_connection.cc, the admin calls client_admin.cc,
// the traffic reports client_traffic.cc.
//
// A Client is thread-safe; share one per process. It survives fork()
// (client/fork_aware.h): a child runs what is open and finds artifacts in
// the local index. It connects to kilnd afresh only if its parent never
// made a gRPC channel — gRPC does not survive fork — else calls that need
// kilnd are Unavailable, saying so.
#ifndef KILN_CLIENT_CLIENT_H_
#define KILN_CLIENT_CLIENT_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/request_digest.h"
#include "client/fork_aware.h"
#include "client/loader.h"
#include "client/traffic.h"
#include "client/transport.h"
#include "google/protobuf/message_lite.h"
#include "proto/service.pb.h"

namespace kiln {

// Makes the calls to kilnd this thread makes while it lives interruptible:
// a call waiting on kilnd (a compile, a start) asks `interrupted` every
// 50 ms and, once it says yes, is cancelled and fails with Cancelled, not
// retried. kilnd goes on with a compile it was asked for and stores it.
// The Python extension's check is Ctrl-C (client/python/module.cc).
class InterruptScope {
 public:
  explicit InterruptScope(std::function<bool()> interrupted);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  // This thread's check (empty outside a scope): true once its scope's
  // `interrupted` said so.
  static const std::function<bool()>& Check();
  // Whether this thread's scope was interrupted.
  static bool Interrupted();

 private:
  std::function<bool()> interrupted_;
  std::function<bool()> check_;
  bool fired_ = false;
  InterruptScope* outer_;
};

// Whether `status` says a kilnd took the connection but did not answer in
// time: it is stopped, hung or overloaded. To its callers, as good as no
// daemon (the Python package raises DaemonUnavailable).
bool IsUnanswered(const absl::Status& status);

struct ClientOptions {
  std::string socket_path;  // empty: DefaultSocketPath()
  std::string cache_dir;    // for an auto-started daemon; empty: DefaultCacheDir()
  bool auto_start = true;
  // kilnd to start: empty means $KILN_DAEMON, else `kilnd` next to this
  // executable, else in its Bazel runfiles, else `kilnd` on PATH.
  std::string daemon_path;
  absl::Duration daemon_idle_timeout = absl::Minutes(10);
  absl::Duration start_timeout = absl::Seconds(20);
  absl::Duration rpc_timeout = absl::Minutes(5);  // a cold compile can take a while
  // After a kilnd left a call unanswered (IsUnanswered), how long calls
  // get that answer at once instead of waiting on it again: a worker with
  // many graphs waits once, not once per graph.
  absl::Duration unanswered_memory = absl::Seconds(10);
  std::string client_name = "libkiln";
  // How often recorded traffic is sent (while connected); zero: never,
  // local-index hits included.
  absl::Duration traffic_report_interval = absl::Seconds(30);
};

class Client final : private ForkAware {
 public:
  // Finding kilnd: the socket is options.socket_path (KILN_SOCKET, or the
  // default); its directory must be trusted (common/trust.h) and the daemon
  // must run as this user, root, or KILN_DAEMON_UID (SO_PEERCRED);
  // protocol and ABI versions must match, or the client refuses, naming
  // them. A daemon of another version that a client started on demand is
  // asked to drain and replaced. When no daemon listens and auto_start is
  // on, the client starts one: posix_spawn (never fork, since gRPC may
  // already run threads), its own session, stdio to <cache_dir>/kilnd.log,
  // an idle timeout; a lock file in the socket's directory makes racing
  // clients start one daemon between them.
  //
  // Connects now. Unavailable (with the socket path and what to do) when no
  // daemon can be reached; FailedPrecondition on a version mismatch.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options = {});
  // Connects (and auto-starts kilnd) on the first call that needs the
  // daemon, returning its error from that call.
  static std::unique_ptr<Client> Open(ClientOptions options = {});
  ~Client();

  // The artifact for `request` from the local index, without a round trip:
  // the request digest (cache/request_digest.h) names the key kilnd aliased
  // to it in its local index (cache/local_index.h). A Client made with Open
  // needs no daemon for such a hit.
  // nullopt when the index cannot answer (a request no process here has
  // sent, no index yet, another toolchain). Never compiles.
  std::optional<kiln::v1::CompileResponse> FindLocal(const kiln::v1::CompileRequest& request);

  // Where a response came from, and so which cache directory holds its
  // object: this client's (FindLocal) or the one the daemon reported.
  enum class Source { kLocalIndex, kDaemon };
  // Opens the object of `response` after checking the cache directory it
  // lives in (common/trust.h) and the object's digest (client/loader.h).
  absl::StatusOr<std::shared_ptr<const ArtifactObject>> OpenArtifact(
      const kiln::v1::CompileResponse& response, Source source);

  absl::StatusOr<kiln::v1::CompileResponse> Compile(const kiln::v1::CompileRequest& request);
  // NotFound on a miss; never compiles.
  absl::StatusOr<kiln::v1::CompileResponse> Lookup(const kiln::v1::CompileRequest& request);
  absl::StatusOr<kiln::v1::StatsResponse> Stats();
  // Every entry, in key order, with its usage (pages through the List RPC).
  absl::StatusOr<kiln::v1::ListResponse> List();
  // One page of the List RPC (proto/service.proto ListRequest), into
  // `page` — which may live on a protobuf Arena: 100,000 entries parse and
  // free far faster there.
  absl::Status ListPage(const kiln::v1::ListRequest& request, kiln::v1::ListResponse& page);
  // Asks kilnd to drain and exit (as SIGTERM does); its pid. Returns once
  // kilnd has answered, not once it has exited.
  absl::StatusOr<int64_t> Stop();
  absl::StatusOr<kiln::v1::ArtifactMetadata> Show(const std::string& key);
  absl::StatusOr<std::string> Evict(const std::string& key);  // returns the full key
  absl::StatusOr<kiln::v1::GcResponse> Gc(const kiln::v1::GcRequest& request);
  // Pins (or unpins) the entries whose keys start with request.key, or that
  // were compiled from the graph of request.graph_digest; their keys.
  absl::StatusOr<std::vector<std::string>> Pin(const kiln::v1::PinRequest& request);
  // Has kilnd write a bundle of entries to request.path, or store a
  // bundle's entries (daemon/admin/bundles.h); paths absolute.
  absl::StatusOr<kiln::v1::ExportResponse> Export(const kiln::v1::ExportRequest& request);
  absl::StatusOr<kiln::v1::ImportResponse> Import(const kiln::v1::ImportRequest& request);
  absl::StatusOr<kiln::v1::VerifyResponse> Verify(bool repair);
  absl::StatusOr<kiln::v1::PruneResponse> Prune(bool dry_run);
  absl::StatusOr<kiln::v1::WhyResponse> Why(const kiln::v1::WhyRequest& request);
  // Which of a warmup entry's paddable symbols the graph lets pad, and
  // along which dims: kilnd's proof (daemon/padding_proof.h).
  absl::StatusOr<kiln::v1::PaddingResponse> ProvePadding(const kiln::v1::PaddingRequest& request);
  // What serving processes reported running the graph of this GraphDigest
  // at (empty when nothing was).
  absl::StatusOr<kiln::v1::TrafficHistogram> Traffic(const std::string& graph_digest);

  // A recorder whose counts (client/traffic.h) this client sends to kilnd
  // every traffic_report_interval, only while connected anyway, until it
  // is removed; removing sends its last counts if connected. The recorder
  // must outlive its registration. Artifacts opened from the local index
  // (which kilnd never sees) are counted once per open and reported with
  // them; a process that never connected reports them when its Client is
  // destroyed, if a kilnd is listening then (it neither starts nor
  // replaces one). Best effort: counts whose report fails are dropped.
  void AddTrafficSource(TrafficRecorder* recorder);
  void RemoveTrafficSource(TrafficRecorder* recorder);

  // The daemon's handshake (connects first if needed).
  absl::StatusOr<kiln::v1::HelloResponse> daemon();
  const std::string& socket_path() const { return options_.socket_path; }

 private:
  explicit Client(ClientOptions options);
  // Whether this process is a child forked after its parent made a gRPC
  // channel: gRPC's threads and state do not survive fork(), so such a
  // child must not touch gRPC at all.
  static bool ForkedAfterGrpc();
  void BeforeFork() override;
  void AfterForkInParent() override;
  void AfterForkInChild() override;
  // OK once `dir` has passed CheckTrustedPath (remembered: a trusted
  // directory can only be changed by trusted users).
  absl::Status CheckCacheDirectory(const std::string& dir);
  // Connects to the socket and shakes hands; Unavailable when nothing
  // answers. Replaces an auto-started daemon of another version.
  // With `replace_other_version` false, a daemon of another version is
  // only refused, never asked to drain.
  absl::Status ConnectLocked(bool replace_other_version = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Remembers that kilnd (`pid`, 0 when unknown) left a call unanswered
  // (`status`), for unanswered_memory; returns what calls get until then.
  absl::Status RememberUnansweredLocked(const absl::Status& status, pid_t pid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // After starting kilnd: connects once it answers, waiting up to
  // start_timeout — or, while a kilnd holds the socket's lock (an old one
  // draining, a new one waiting for it), up to rpc_timeout.
  absl::Status WaitForDaemon() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The connection, made (and kilnd auto-started) on first use. Shared: a
  // reconnect may replace it while another thread's call runs.
  absl::StatusOr<std::shared_ptr<Transport>> Connection();
  // One call of kiln.v1.Kiln's `method`; on Unavailable or Cancelled
  // (kilnd went away), reconnects (auto-starting kilnd) and retries, three
  // attempts in all.
  template <typename Response>
  absl::StatusOr<Response> Rpc(const char* method, const google::protobuf::MessageLite& request) {
    Response response;
    if (absl::Status called = RpcInto(method, request, response); !called.ok()) return called;
    return response;
  }
  // One call over `transport`, not retried, its answer parsed into
  // `response`.
  static absl::Status CallOnce(Transport& transport, const char* method,
                               const google::protobuf::MessageLite& request, absl::Duration timeout,
                               google::protobuf::MessageLite& response);
  // The same, parsing the answer into `response`.
  absl::Status RpcInto(const char* method, const google::protobuf::MessageLite& request,
                       google::protobuf::MessageLite& response);
  // Sends `recorder`'s new counts (none when null) and the local-index
  // hits not reported yet, if connected (never connects) and there is
  // anything to send.
  void SendTraffic(TrafficRecorder* recorder);
  void SendReport(Transport& transport, TrafficRecorder* recorder);
  void ReportTrafficLoop();
  // At destruction: local-index hits not reported yet, connecting if need
  // be (see above).
  void ReportLocalIndexHitsAtExit();

  ClientOptions options_;                             // paths resolved
  const absl::StatusOr<std::vector<uid_t>> trusted_;  // TrustedUids()
  absl::Mutex mutex_;
  std::shared_ptr<Transport> transport_ ABSL_GUARDED_BY(mutex_);
  kiln::v1::HelloResponse hello_ ABSL_GUARDED_BY(mutex_);
  // The last unanswered call's status, given to connections until then.
  absl::Status unanswered_ ABSL_GUARDED_BY(mutex_);
  absl::Time unanswered_until_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
  // The daemon's cache descriptor once found (its own mutex: local hits do
  // not wait behind a connection attempt).
  absl::Mutex descriptor_mutex_;
  // The request salt of each target, from the daemon's cache descriptor
  // (parsed once; shared so that a lookup does not copy it under the lock).
  std::shared_ptr<const RequestSalts> request_salts_ ABSL_GUARDED_BY(descriptor_mutex_);
  std::vector<std::string> trusted_dirs_ ABSL_GUARDED_BY(descriptor_mutex_);

  absl::Mutex traffic_mutex_;
  std::vector<TrafficRecorder*> traffic_sources_ ABSL_GUARDED_BY(traffic_mutex_);
  bool traffic_reporting_ ABSL_GUARDED_BY(traffic_mutex_) = false;  // sending, unlocked
  bool stopping_ ABSL_GUARDED_BY(traffic_mutex_) = false;
  std::thread traffic_reporter_;  // started with the first source
  // Artifacts opened from the local index since the last report.
  std::atomic<int64_t> local_index_hits_{0};
};

}  // namespace kiln

#endif  // KILN_CLIENT_CLIENT_H_
