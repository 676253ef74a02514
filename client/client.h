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
// A Client is thread-safe; share one per process.
#ifndef KILN_CLIENT_CLIENT_H_
#define KILN_CLIENT_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
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
  // Unavailable (with the socket path and what to do) when no daemon can be
  // reached; FailedPrecondition on a version mismatch.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options = {});

  absl::StatusOr<kiln::v1::CompileResponse> Compile(const kiln::v1::CompileRequest& request);
  // NotFound on a miss; never compiles.
  absl::StatusOr<kiln::v1::CompileResponse> Lookup(const kiln::v1::CompileRequest& request);
  absl::StatusOr<kiln::v1::StatsResponse> Stats();
  absl::StatusOr<kiln::v1::ListResponse> List();
  absl::StatusOr<kiln::v1::ArtifactMetadata> Show(const std::string& key);
  absl::StatusOr<std::string> Evict(const std::string& key);  // returns the full key

  const kiln::v1::HelloResponse& daemon() const { return hello_; }
  const std::string& socket_path() const { return socket_path_; }

 private:
  Client(std::string socket_path, std::unique_ptr<kiln::v1::Kiln::Stub> stub,
         kiln::v1::HelloResponse hello, absl::Duration rpc_timeout);

  const std::string socket_path_;
  const std::unique_ptr<kiln::v1::Kiln::Stub> stub_;
  const kiln::v1::HelloResponse hello_;
  const absl::Duration rpc_timeout_;
};

}  // namespace kiln

#endif  // KILN_CLIENT_CLIENT_H_
