// kilnd's /metrics endpoint: Prometheus text over HTTP, parsed and served by
// libmicrohttpd, on a Unix socket (by default beside kilnd's own) and, only
// when asked, on a TCP port of 127.0.0.1.
//
//   GET or HEAD /metrics  -> 200, text/plain; version=0.0.4, the scrape's text
//   any other path        -> 404
//   any other method      -> 405
//
// libmicrohttpd because it serves an already-listening socket of any family
// (MHD_OPTION_LISTEN_SOCKET), so the Unix socket is created here, mode 0600.
// Debian 12's cpp-httplib 0.11 listens on TCP only, and its civetweb is
// built without Unix sockets (mg_check_feature(MG_FEATURES_X_DOMAIN_SOCKET)
// is 0).
//
// The scrape runs on libmicrohttpd's one thread, one request at a time; it
// must be thread-safe against the rest of the daemon (ArtifactCache::Stats
// is).
#ifndef KILN_DAEMON_METRICS_SERVER_H_
#define KILN_DAEMON_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct MHD_Daemon;

namespace kiln {

class MetricsServer {
 public:
  struct Options {
    std::string socket_path;  // empty: no Unix socket
    // When the socket cannot be made, log a warning and serve without it
    // (kilnd's default path: a daemon socket path near the 107-byte limit
    // must not stop kilnd from starting). An explicit path fails instead.
    bool socket_optional = false;
    int port = 0;  // 0: no TCP listener; else 127.0.0.1:port
  };
  using Scrape = std::function<std::string()>;

  // Listens on what `options` names (nothing at all is fine). A file at
  // socket_path is replaced: the caller holds the lock that makes it stale
  // (kilnd's <socket>.lock). InvalidArgument for a path too long for a Unix
  // socket or a port outside 1..65535; Unavailable naming the address when
  // it cannot listen there.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const Options& options,
                                                              Scrape scrape);
  // Stops serving (a request in progress finishes) and removes the socket
  // file.
  ~MetricsServer();

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

 private:
  explicit MetricsServer(Scrape scrape) : scrape_(std::move(scrape)) {}

  const Scrape scrape_;
  std::string socket_path_;  // removed at exit once listening
  MHD_Daemon* unix_daemon_ = nullptr;
  MHD_Daemon* tcp_daemon_ = nullptr;
};

// kilnd's default metrics socket: `dir/kilnd.sock` -> `dir/kilnd.metrics.sock`
// (another name: `NAME` -> `NAME.metrics`), so it lives under the same lock
// as the daemon's socket.
std::string DefaultMetricsSocketPath(const std::string& daemon_socket);

}  // namespace kiln

#endif  // KILN_DAEMON_METRICS_SERVER_H_
