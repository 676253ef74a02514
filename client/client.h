// kiln::Client: the connection to kilnd.
//
// Connect() finds the daemon on the socket (KILN_SOCKET or the default) and
// shakes hands (protocol and ABI versions must match, or both sides refuse
// with a message naming them). When no daemon listens and auto_start is on,
// it starts one: posix_spawn (never fork, since gRPC may already run
// threads), its own session, stdio to <cache_dir>/kilnd.log, an idle
// timeout. A lock file in the socket's directory makes racing clients start
// one daemon between them.
//
// Same-host hits need no daemon at all: FindLocal computes the cache key
// in-process and reads kilnd's local index (cache/local_index.h); a Client
// made with Open connects only when something needs the daemon. That makes
// a fresh worker's first hit a few file reads and a dlopen.
//
// A Client is thread-safe; share one per process.
#ifndef KILN_CLIENT_CLIENT_H_
#define KILN_CLIENT_CLIENT_H_

#include <memory>
#include <string>

#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/service.grpc.pb.h"

namespace kiln {

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
  std::string client_name = "libkiln";
};

class Client {
 public:
  // Connects now. Unavailable (with the socket path and what to do) when no
  // daemon can be reached; FailedPrecondition on a version mismatch.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options = {});
  // Connects (and auto-starts kilnd) on the first call that needs the
  // daemon, returning its error from that call.
  static std::unique_ptr<Client> Open(ClientOptions options = {});

  // The artifact for `request` from the local index, without a round trip;
  // nullopt when the index cannot answer (a miss, no index yet, another
  // toolchain, or a graph the daemon should judge). Never compiles.
  std::optional<kiln::v1::CompileResponse> FindLocal(const kiln::v1::CompileRequest& request);

  absl::StatusOr<kiln::v1::CompileResponse> Compile(const kiln::v1::CompileRequest& request);
  // NotFound on a miss; never compiles.
  absl::StatusOr<kiln::v1::CompileResponse> Lookup(const kiln::v1::CompileRequest& request);
  absl::StatusOr<kiln::v1::StatsResponse> Stats();
  absl::StatusOr<kiln::v1::ListResponse> List();
  absl::StatusOr<kiln::v1::ArtifactMetadata> Show(const std::string& key);
  absl::StatusOr<std::string> Evict(const std::string& key);  // returns the full key

  // The daemon's handshake (connects first if needed).
  absl::StatusOr<kiln::v1::HelloResponse> daemon();
  const std::string& socket_path() const { return options_.socket_path; }

 private:
  explicit Client(ClientOptions options);
  // The connected stub, connecting (and auto-starting) on first use.
  // Shared: a reconnect may replace it while another thread's call runs.
  absl::StatusOr<std::shared_ptr<kiln::v1::Kiln::Stub>> Stub();
  // One RPC; on Unavailable, reconnects (auto-starting kilnd) and retries
  // once.
  template <typename Request, typename Response, typename Method>
  absl::StatusOr<Response> Rpc(Method method, const Request& request);

  ClientOptions options_;  // paths resolved
  absl::Mutex mutex_;
  std::shared_ptr<kiln::v1::Kiln::Stub> stub_ ABSL_GUARDED_BY(mutex_);
  kiln::v1::HelloResponse hello_ ABSL_GUARDED_BY(mutex_);
  // The daemon's cache descriptor once found (its own mutex: local hits do
  // not wait behind a connection attempt).
  absl::Mutex descriptor_mutex_;
  std::optional<kiln::v1::CacheDescriptor> descriptor_ ABSL_GUARDED_BY(descriptor_mutex_);
};

}  // namespace kiln

#endif  // KILN_CLIENT_CLIENT_H_
