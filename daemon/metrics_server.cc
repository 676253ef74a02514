#include "daemon/metrics_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";
constexpr int kBacklog = 16;

absl::Status Unavailable(const std::string& address, const char* what) {
  return absl::UnavailableError(
      absl::StrCat("metrics: cannot ", what, " ", address, ": ", strerror(errno)));
}

// A listening socket at `path`, mode 0600, replacing whatever file was there.
absl::StatusOr<int> ListenOnUnixSocket(const std::string& path) {
  sockaddr_un address{};
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("metrics socket path ", path, " is longer than ",
                                                   sizeof(address.sun_path) - 1, " bytes"));
  }
  address.sun_family = AF_UNIX;
  memcpy(address.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Unavailable(path, "create a socket for");
  unlink(path.c_str());
  const mode_t old_umask = umask(077);  // created 0600: no moment when others may connect
  const int bound = bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  umask(old_umask);
  if (bound != 0 || chmod(path.c_str(), 0600) != 0 || listen(fd, kBacklog) != 0) {
    const absl::Status status = Unavailable(path, "listen on");
    close(fd);
    return status;
  }
  return fd;
}

// A listening socket on 127.0.0.1:port (never another interface).
absl::StatusOr<int> ListenOnLoopback(int port) {
  if (port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " is not in 1..65535"));
  }
  const std::string name = absl::StrCat("127.0.0.1:", port);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Unavailable(name, "create a socket for");
  const int on = 1;  // a restarted kilnd rebinds despite connections in TIME_WAIT
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, kBacklog) != 0) {
    const absl::Status status = Unavailable(name, "listen on");
    close(fd);
    return status;
  }
  return fd;
}

void LogFromMicrohttpd(void*, const char* format, va_list arguments) {
  char message[512];
  vsnprintf(message, sizeof(message), format, arguments);
  KILN_LOG(WARNING) << "metrics: " << absl::StripTrailingAsciiWhitespace(message);
}

MHD_Result Respond(MHD_Connection* connection, unsigned int status, const std::string& body) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, kContentType);
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  }
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued;
}

// Answers on the first call, before any request body: /metrics takes none.
MHD_Result HandleRequest(void* scrape, MHD_Connection* connection, const char* url,
                         const char* method, const char* /*version*/, const char* /*upload_data*/,
                         size_t* /*upload_data_size*/, void** /*request_state*/) {
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
    return Respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
  }
  if (strcmp(url, "/metrics") != 0) {
    return Respond(connection, MHD_HTTP_NOT_FOUND, "not found: kilnd serves /metrics only\n");
  }
  return Respond(connection, MHD_HTTP_OK, (*static_cast<MetricsServer::Scrape*>(scrape))());
}

// Serves the listening socket `fd` (which it then owns) on one thread.
absl::StatusOr<MHD_Daemon*> Serve(int fd, const MetricsServer::Scrape* scrape,
                                  const std::string& address) {
  MHD_Daemon* daemon = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, nullptr, nullptr, &HandleRequest,
      const_cast<MetricsServer::Scrape*>(scrape), MHD_OPTION_EXTERNAL_LOGGER, &LogFromMicrohttpd,
      nullptr, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, 32u,
      MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
  if (daemon == nullptr) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("metrics: cannot serve HTTP on ", address));
  }
  return daemon;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const Options& options,
                                                                    Scrape scrape) {
  std::unique_ptr<MetricsServer> server(new MetricsServer(std::move(scrape)));
  if (!options.socket_path.empty()) {
    const absl::StatusOr<int> fd = ListenOnUnixSocket(options.socket_path);
    if (!fd.ok() && options.socket_optional) {
      KILN_LOG(WARNING) << fd.status().message() << "; serving no metrics socket";
    } else {
      RETURN_IF_ERROR(fd.status());
      server->socket_path_ = options.socket_path;  // from now on the destructor removes it
      ASSIGN_OR_RETURN(server->unix_daemon_, Serve(*fd, &server->scrape_, options.socket_path));
      KILN_LOG(INFO) << "metrics on unix:" << options.socket_path << " GET /metrics";
    }
  }
  if (options.port != 0) {
    ASSIGN_OR_RETURN(const int fd, ListenOnLoopback(options.port));
    ASSIGN_OR_RETURN(server->tcp_daemon_,
                     Serve(fd, &server->scrape_, absl::StrCat("127.0.0.1:", options.port)));
    KILN_LOG(INFO) << "metrics on http://127.0.0.1:" << options.port << "/metrics";
  }
  return server;
}

MetricsServer::~MetricsServer() {
  // MHD_stop_daemon joins the thread and closes the listening socket.
  if (tcp_daemon_ != nullptr) MHD_stop_daemon(tcp_daemon_);
  if (unix_daemon_ != nullptr) MHD_stop_daemon(unix_daemon_);
  if (!socket_path_.empty()) unlink(socket_path_.c_str());
}

std::string DefaultMetricsSocketPath(const std::string& daemon_socket) {
  absl::string_view base = daemon_socket;
  if (absl::ConsumeSuffix(&base, ".sock")) return absl::StrCat(base, ".metrics.sock");
  return absl::StrCat(daemon_socket, ".metrics");
}

}  // namespace kiln
