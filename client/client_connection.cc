// Client's connection to kilnd: connect and check who answers, start kilnd
// when none does, and retry a call that the daemon went away under.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "abi/kiln_abi.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/paths.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "common/trust.h"
#include "common/version.h"
#include "google/protobuf/message_lite.h"

namespace kiln {
namespace {

// One call of kiln.v1.Kiln's `method` over `transport`, its answer parsed
// into `response`.
absl::Status CallInto(Transport& transport, const char* method,
                      const google::protobuf::MessageLite& request, absl::Duration timeout,
                      google::protobuf::MessageLite& response) {
  ASSIGN_OR_RETURN(const std::string bytes, transport.Call(method, request.SerializeAsString(),
                                                           timeout, InterruptScope::Check()));
  if (!response.ParseFromString(bytes)) {
    return absl::InternalError(absl::StrCat("kilnd's answer to ", method, " does not parse"));
  }
  return absl::OkStatus();
}

template <typename Response>
absl::StatusOr<Response> Call(Transport& transport, const char* method,
                              const google::protobuf::MessageLite& request,
                              absl::Duration timeout) {
  Response response;
  RETURN_IF_ERROR(CallInto(transport, method, request, timeout, response));
  return response;
}

// The uid the peer on `fd` ran as when it listened, and its pid.
absl::StatusOr<ucred> PeerCredentials(int fd, const std::string& socket_path) {
  ucred credentials;
  socklen_t length = sizeof(credentials);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot read the credentials of kilnd on ",
                                               socket_path, ": ", strerror(errno)));
  }
  return credentials;
}

// Whether this process has made a transport (a gRPC channel), and whether
// it is a child forked after its parent had: gRPC's threads and state do
// not survive fork(), so such a child must not touch gRPC at all.
std::atomic<bool> grpc_used{false};
std::atomic<bool> forked_after_grpc{false};

// Connects to the daemon on `socket_path` and checks who it is before a
// byte is sent: gRPC 1.51 shows no peer credentials, so the socket is
// connected here and handed to gRPC. Such a channel never reconnects; the
// client makes a new one when it fails. Unavailable when nothing listens.
absl::StatusOr<std::unique_ptr<Transport>> ConnectTransport(const std::string& socket_path,
                                                            const std::vector<uid_t>& trusted,
                                                            ucred* peer) {
  ASSIGN_OR_RETURN(const MakeTransportFn make_transport, TransportMaker());
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", socket_path, " is longer than ",
                                                   sizeof(address.sun_path) - 1, " bytes"));
  }
  memcpy(address.sun_path, socket_path.data(), socket_path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to kilnd on ", socket_path, ": ", strerror(error)));
  }
  absl::StatusOr<ucred> credentials = PeerCredentials(fd, socket_path);
  if (credentials.ok() &&
      std::find(trusted.begin(), trusted.end(), credentials->uid) == trusted.end()) {
    credentials = absl::FailedPreconditionError(absl::StrCat(
        "refusing kilnd on ", socket_path, ": it runs as uid ", credentials->uid, " (pid ",
        credentials->pid, "), not as this user (uid ", geteuid(),
        ") or root. For a daemon shared on purpose, set KILN_DAEMON_UID=", credentials->uid));
  }
  if (!credentials.ok()) {
    close(fd);
    return credentials.status();
  }
  *peer = *credentials;
  grpc_used = true;
  return std::unique_ptr<Transport>(make_transport(fd));  // owns fd now
}

// One handshake: the daemon's versions, whatever they are.
absl::StatusOr<kiln::v1::HelloResponse> Hello(Transport& transport, const std::string& client_name,
                                              absl::Duration timeout) {
  kiln::v1::HelloRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_abi_version(KILN_ABI_VERSION);
  request.set_client(client_name);
  return Call<kiln::v1::HelloResponse>(transport, "Hello", request, timeout);
}

// An unanswered call's status, saying which kilnd and what to do.
absl::Status Unanswered(const absl::Status& status, const std::string& socket_path, pid_t pid) {
  const std::string advice =
      pid > 0 ? absl::StrCat(" (`ps -o stat,pcpu -p ", pid, "` tells which); `kill ", pid,
                             "` lets the next client start another")
              : "";
  absl::Status unanswered = absl::DeadlineExceededError(
      absl::StrCat(pid > 0 ? absl::StrCat("kilnd (pid ", pid, ") on ") : "kilnd on ", socket_path,
                   ": ", status.message(), ". It is stopped, hung or overloaded", advice));
  unanswered.SetPayload(kUnansweredPayload, absl::Cord());
  return unanswered;
}

std::string FindDaemon(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = getenv("KILN_DAEMON"); env != nullptr && env[0] != '\0') return env;
  const std::string self = ExecutablePath();
  if (!self.empty()) {
    const std::string sibling = Dirname(self) + "/kilnd";
    if (access(sibling.c_str(), X_OK) == 0) return sibling;
    // A Bazel-built binary with kilnd in its data.
    const std::string runfiles = self + ".runfiles/kiln/daemon/kilnd";
    if (access(runfiles.c_str(), X_OK) == 0) return runfiles;
  }
  return "kilnd";  // SpawnProcess searches PATH
}

absl::Status SpawnDaemon(const ClientOptions& options, const std::string& socket_path,
                         const std::string& cache_dir) {
  RETURN_IF_ERROR(MakeDirectories(cache_dir, 0700));
  const std::string log_path = cache_dir + "/kilnd.log";
  const std::string daemon = FindDaemon(options.daemon_path);
  const std::vector<std::string> argv = {
      daemon, "--daemonize", "--socket=" + socket_path, "--cache_dir=" + cache_dir,
      absl::StrCat("--idle_timeout=", absl::FormatDuration(options.daemon_idle_timeout))};

  // Opened here, so that a log that cannot be written is named as such
  // rather than blamed on the daemon binary.
  const int log_fd =
      open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (log_fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot create kilnd's log file ", log_path, ": ",
                                               strerror(errno),
                                               ". Set KILN_CACHE_DIR to a writable directory"));
  }
  SpawnOptions spawn;
  spawn.redirects = {{log_fd, STDOUT_FILENO}, {log_fd, STDERR_FILENO}};  // stdin: /dev/null
  // None of the worker's other descriptors (listening sockets, pipes) may
  // live on in the daemon.
  spawn.close_other_fds = true;
  // Its own session: no controlling terminal, no signals meant for our
  // process group, and it outlives us. Default signal mask and handlers:
  // whatever the worker blocked or ignored, kilnd must see SIGTERM.
  spawn.new_session = true;
  spawn.clear_signal_mask = true;
  spawn.default_signals = {SIGTERM, SIGINT, SIGHUP, SIGPIPE};
  const absl::StatusOr<pid_t> pid = SpawnProcess(argv, spawn);
  close(log_fd);
  if (!pid.ok()) {
    return absl::UnavailableError(
        absl::StrCat(pid.status().message(), ". Set KILN_DAEMON to the kilnd binary"));
  }
  // With --daemonize this child forks the daemon and exits at once; reaping
  // it leaves no zombie, and the daemon is nobody's child but init's.
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat(daemon, " failed to start; see ", log_path));
  }
  return absl::OkStatus();
}

}  // namespace

bool Client::ForkedAfterGrpc() { return forked_after_grpc; }

absl::Status Client::CallOnce(Transport& transport, const char* method,
                              const google::protobuf::MessageLite& request, absl::Duration timeout,
                              google::protobuf::MessageLite& response) {
  return CallInto(transport, method, request, timeout, response);
}

// Around fork(): the traffic reporter stopped (a thread waiting on
// traffic_mutex_ would stay queued on it in the child) and every lock held,
// so the child sees consistent state; the reporter starts again on both
// sides.
void Client::BeforeFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  {
    absl::MutexLock lock(&traffic_mutex_);
    stopping_ = true;
  }
  if (traffic_reporter_.joinable()) traffic_reporter_.join();
  mutex_.Lock();
  descriptor_mutex_.Lock();
  traffic_mutex_.Lock();
  stopping_ = false;
}

void Client::AfterForkInParent() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (!traffic_sources_.empty()) traffic_reporter_ = std::thread([this] { ReportTrafficLoop(); });
  traffic_mutex_.Unlock();
  descriptor_mutex_.Unlock();
  mutex_.Unlock();
}

void Client::AfterForkInChild() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // The parent's channel is never used (or destroyed) here: gRPC objects
  // belong to the process that made them. If it made any, gRPC is off
  // limits here (Stub says so); else the next call connects afresh.
  if (transport_ != nullptr) new std::shared_ptr<Transport>(std::move(transport_));
  if (grpc_used) forked_after_grpc = true;
  local_index_hits_ = 0;  // the parent's, which it reports itself
  AfterForkInParent();
}

std::unique_ptr<Client> Client::Open(ClientOptions options) {
  return std::unique_ptr<Client>(new Client(std::move(options)));
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  std::unique_ptr<Client> client = Open(std::move(options));
  RETURN_IF_ERROR(client->Connection().status());
  return client;
}

bool IsUnanswered(const absl::Status& status) {
  return status.GetPayload(kUnansweredPayload).has_value();
}

absl::StatusOr<kiln::v1::HelloResponse> Client::daemon() {
  RETURN_IF_ERROR(Connection().status());
  absl::MutexLock lock(&mutex_);
  return hello_;
}

absl::Status Client::RememberUnansweredLocked(const absl::Status& status, pid_t pid) {
  unanswered_ = Unanswered(status, options_.socket_path, pid);
  unanswered_until_ = absl::Now() + options_.unanswered_memory;
  return unanswered_;
}

absl::Status Client::ConnectLocked(bool replace_other_version) {
  RETURN_IF_ERROR(trusted_.status());
  if (absl::Now() < unanswered_until_) return unanswered_;
  const std::string& socket_path = options_.socket_path;
  const absl::Status directory =
      CheckTrustedPath(Dirname(socket_path), "socket directory", *trusted_);
  if (directory.code() == absl::StatusCode::kNotFound) {
    return absl::UnavailableError(directory.message());  // nothing listens there yet
  }
  RETURN_IF_ERROR(directory);
  ucred peer{};
  ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport,
                   ConnectTransport(socket_path, *trusted_, &peer));
  absl::StatusOr<kiln::v1::HelloResponse> answered =
      Hello(*transport, options_.client_name, std::min(absl::Seconds(5), options_.rpc_timeout));
  if (IsUnanswered(answered.status())) return RememberUnansweredLocked(answered.status(), peer.pid);
  if (answered.status().code() == absl::StatusCode::kCancelled) {
    // A draining kilnd cancels calls that reach it after its listener
    // closed: as good as nobody listening (its successor will).
    return absl::UnavailableError(
        absl::StrCat("kilnd on ", socket_path, " is shutting down: ", answered.status().message()));
  }
  ASSIGN_OR_RETURN(kiln::v1::HelloResponse hello, std::move(answered));
  if (hello.protocol_version() == kProtocolVersion && hello.abi_version() == KILN_ABI_VERSION) {
    hello_ = std::move(hello);
    transport_ = std::move(transport);
    return absl::OkStatus();
  }
  const std::string mismatch = absl::StrCat(
      "version mismatch: kilnd ", hello.daemon_version(), " (pid ", peer.pid, ") on ", socket_path,
      " speaks protocol ", hello.protocol_version(), " with ABI ", hello.abi_version(),
      "; this client speaks protocol ", kProtocolVersion, " with ABI ", KILN_ABI_VERSION);
  // A daemon some client started on demand, as this user, is ours to
  // replace: ask it to drain (it finishes running compiles and stores them),
  // then start one of this version, which waits for the old one's lock.
  if (!replace_other_version || !options_.auto_start || !hello.auto_started() ||
      peer.uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        mismatch, ". Stop that kilnd (kill ", peer.pid, ") or use a client of its version"));
  }
  if (kill(peer.pid, SIGTERM) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(mismatch, "; cannot ask it to drain: ", strerror(errno)));
  }
  return absl::UnavailableError(absl::StrCat(mismatch, "; asked it to drain"));
}

absl::StatusOr<std::shared_ptr<Transport>> Client::Connection() {
  if (forked_after_grpc) {
    return absl::UnavailableError(
        "this process was forked from one that had connected to kilnd, and gRPC does not "
        "survive fork(): it can run what is open or in the local index, but cannot ask kilnd. "
        "Prepare before fork from the local index only (warm the buckets with `kiln warmup` "
        "first), or connect after forking");
  }
  absl::MutexLock lock(&mutex_);
  if (transport_ != nullptr) return transport_;
  const std::string& socket_path = options_.socket_path;
  absl::Status result = ConnectLocked();
  if (result.ok()) return transport_;
  if (result.code() != absl::StatusCode::kUnavailable) return result;
  if (!options_.auto_start) {
    return absl::UnavailableError(
        absl::StrCat("no kilnd is listening on ", socket_path, " (", result.message(),
                     "); start one with `kilnd --socket=", socket_path, "`"));
  }

  // Start one, holding the start lock so that racing clients start one
  // daemon between them: whoever comes second finds it running.
  RETURN_IF_ERROR(EnsurePrivateDirectory(Dirname(socket_path)));
  const std::string lock_path = socket_path + ".start";
  const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock_fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", lock_path, ": ", strerror(errno)));
  }
  flock(lock_fd, LOCK_EX);
  result = ConnectLocked();
  if (result.code() == absl::StatusCode::kUnavailable) {
    result = SpawnDaemon(options_, socket_path, options_.cache_dir);
    if (result.ok()) result = WaitForDaemon();
  }
  flock(lock_fd, LOCK_UN);
  close(lock_fd);
  RETURN_IF_ERROR(result);
  return transport_;
}

absl::Status Client::WaitForDaemon() {
  const std::string& socket_path = options_.socket_path;
  // The new daemon waits for its predecessor's lock while that one drains:
  // as long as some kilnd holds the lock, one will answer soon.
  const absl::Time start = absl::Now();
  absl::Status result = absl::UnavailableError("not yet");
  while (result.code() == absl::StatusCode::kUnavailable) {
    absl::SleepFor(absl::Milliseconds(5));
    const std::function<bool()>& interrupted = InterruptScope::Check();
    if (interrupted && interrupted()) {
      return absl::CancelledError(
          absl::StrCat("waiting for the kilnd started on ", socket_path, " was interrupted"));
    }
    result = ConnectLocked();
    const absl::Duration waited = absl::Now() - start;
    if (waited > options_.start_timeout &&
        (waited > options_.rpc_timeout || !DaemonLockHeld(socket_path))) {
      break;
    }
  }
  if (result.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(
        absl::StrCat("started kilnd, but it did not answer on ", socket_path, " within ",
                     absl::FormatDuration(absl::Now() - start), " (", result.message(), "); see ",
                     options_.cache_dir, "/kilnd.log"));
  }
  return result;
}

absl::Status Client::RpcInto(const char* method, const google::protobuf::MessageLite& request,
                             google::protobuf::MessageLite& response) {
  // The daemon may go away under a call (idle timeout, a restart: a
  // draining daemon refuses queued compiles and cancels what outlives its
  // drain, after storing it), or a reconnect may reach it in the moment
  // before its listener closes: connect again — waiting for its successor,
  // starting one if allowed — and retry. Every call is idempotent.
  constexpr int kAttempts = 3;
  const ForkGuard::Released waiting;  // a fork need not wait for kilnd
  for (int attempt = 1;; ++attempt) {
    ASSIGN_OR_RETURN(std::shared_ptr<Transport> transport, Connection());
    const absl::Status called =
        CallInto(*transport, method, request, options_.rpc_timeout, response);
    if (IsUnanswered(called)) {
      absl::MutexLock lock(&mutex_);
      if (transport_ == transport) transport_.reset();
      return RememberUnansweredLocked(called, static_cast<pid_t>(hello_.pid()));
    }
    const absl::StatusCode code = called.code();
    if ((code != absl::StatusCode::kUnavailable && code != absl::StatusCode::kCancelled) ||
        attempt == kAttempts || InterruptScope::Interrupted()) {
      return called;
    }
    absl::MutexLock lock(&mutex_);
    if (transport_ == transport) transport_.reset();
  }
}

}  // namespace kiln
