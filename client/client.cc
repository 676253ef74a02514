#include "client/client.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "codegen/abi/kiln_abi.h"
#include "common/files.h"
#include "common/paths.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "common/version.h"

extern char** environ;

namespace kiln {
namespace {

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::unique_ptr<kiln::v1::Kiln::Stub> NewStub(const std::string& socket_path) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(256 << 20);
  arguments.SetMaxSendMessageSize(256 << 20);
  return kiln::v1::Kiln::NewStub(grpc::CreateCustomChannel(
      "unix:" + socket_path, grpc::InsecureChannelCredentials(), arguments));
}

// One handshake attempt. Unavailable when nothing listens.
absl::StatusOr<kiln::v1::HelloResponse> Hello(kiln::v1::Kiln::Stub& stub,
                                              const std::string& client_name) {
  kiln::v1::HelloRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_abi_version(KILN_ABI_VERSION);
  request.set_client(client_name);
  kiln::v1::HelloResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  RETURN_IF_ERROR(FromGrpc(stub.Hello(&context, request, &response)));
  // The daemon refuses a mismatched client; a client refuses an old daemon
  // that did not know to.
  if (response.protocol_version() != kProtocolVersion ||
      response.abi_version() != KILN_ABI_VERSION) {
    return absl::FailedPreconditionError(absl::StrCat(
        "version mismatch: kilnd ", response.daemon_version(), " (pid ", response.pid(),
        ") speaks protocol ", response.protocol_version(), " with ABI ", response.abi_version(),
        "; this client speaks protocol ", kProtocolVersion, " with ABI ", KILN_ABI_VERSION));
  }
  return response;
}

bool SocketExists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISSOCK(info.st_mode);
}

std::string FindDaemon(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = getenv("KILN_DAEMON"); env != nullptr && env[0] != '\0') return env;
  const std::string sibling = ExecutableDirectory() + "/kilnd";
  if (access(sibling.c_str(), X_OK) == 0) return sibling;
  // A Bazel-built binary with kilnd in its data: <exe>.runfiles/kiln/daemon/kilnd.
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    const std::string runfiles = std::string(self, n) + ".runfiles/kiln/daemon/kilnd";
    if (access(runfiles.c_str(), X_OK) == 0) return runfiles;
  }
  return "kilnd";  // posix_spawnp searches PATH
}

absl::Status SpawnDaemon(const ClientOptions& options, const std::string& socket_path,
                         const std::string& cache_dir) {
  RETURN_IF_ERROR(MakeDirectories(cache_dir, 0700));
  const std::string log_path = cache_dir + "/kilnd.log";
  const std::string daemon = FindDaemon(options.daemon_path);
  std::vector<std::string> argv = {
      daemon, "--daemonize", "--socket=" + socket_path, "--cache_dir=" + cache_dir,
      absl::StrCat("--idle_timeout=", absl::FormatDuration(options.daemon_idle_timeout))};
  std::vector<char*> args;
  for (std::string& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // Its own session: no controlling terminal, no signals meant for our
  // process group, and it outlives us.
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
  pid_t pid;
  const int error =
      posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    return absl::UnavailableError(absl::StrCat("cannot start ", daemon, ": ", strerror(error),
                                               ". Set KILN_DAEMON to the kilnd binary"));
  }
  // With --daemonize this child forks the daemon and exits at once; reaping
  // it leaves no zombie, and the daemon is nobody's child but init's.
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat(daemon, " failed to start; see ", log_path));
  }
  return absl::OkStatus();
}

}  // namespace

Client::Client(std::string socket_path, std::unique_ptr<kiln::v1::Kiln::Stub> stub,
               kiln::v1::HelloResponse hello, absl::Duration rpc_timeout)
    : socket_path_(std::move(socket_path)),
      stub_(std::move(stub)),
      hello_(std::move(hello)),
      rpc_timeout_(rpc_timeout) {}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  const std::string socket_path =
      options.socket_path.empty() ? DefaultSocketPath() : options.socket_path;
  const std::string cache_dir = options.cache_dir.empty() ? DefaultCacheDir() : options.cache_dir;
  auto stub = NewStub(socket_path);
  auto connected = [&]() -> absl::StatusOr<std::unique_ptr<Client>> {
    ASSIGN_OR_RETURN(auto hello, Hello(*stub, options.client_name));
    return std::unique_ptr<Client>(
        new Client(socket_path, std::move(stub), std::move(hello), options.rpc_timeout));
  };
  if (SocketExists(socket_path)) {
    auto client = connected();
    if (client.ok() || client.status().code() != absl::StatusCode::kUnavailable) return client;
  }
  if (!options.auto_start) {
    return absl::UnavailableError(absl::StrCat("no kilnd is listening on ", socket_path,
                                               "; start one with `kilnd --socket=", socket_path,
                                               "`"));
  }

  // Start one, holding the start lock so that racing clients start one
  // daemon between them: whoever comes second finds it running.
  const std::string directory = Dirname(socket_path);
  RETURN_IF_ERROR(EnsurePrivateDirectory(directory));
  const std::string lock_path = socket_path + ".start";
  const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", lock_path, ": ", strerror(errno)));
  }
  flock(lock_fd, LOCK_EX);
  absl::StatusOr<std::unique_ptr<Client>> result =
      absl::UnavailableError("no kilnd answered");
  if (SocketExists(socket_path)) result = connected();
  if (!result.ok() && result.status().code() == absl::StatusCode::kUnavailable) {
    absl::Status spawned = SpawnDaemon(options, socket_path, cache_dir);
    if (!spawned.ok()) {
      result = spawned;
    } else {
      const absl::Time deadline = absl::Now() + options.start_timeout;
      while (absl::Now() < deadline) {
        if (SocketExists(socket_path)) {
          result = connected();
          if (result.ok() || result.status().code() != absl::StatusCode::kUnavailable) break;
        }
        absl::SleepFor(absl::Milliseconds(5));
      }
      if (!result.ok() && result.status().code() == absl::StatusCode::kUnavailable) {
        result = absl::UnavailableError(absl::StrCat(
            "started kilnd, but it did not answer on ", socket_path, " within ",
            absl::FormatDuration(options.start_timeout), "; see ", cache_dir, "/kilnd.log"));
      }
    }
  }
  flock(lock_fd, LOCK_UN);
  close(lock_fd);
  return result;
}

namespace {

template <typename Request, typename Response, typename Method>
absl::StatusOr<Response> Call(kiln::v1::Kiln::Stub& stub, Method method, const Request& request,
                              absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  Response response;
  RETURN_IF_ERROR(FromGrpc((stub.*method)(&context, request, &response)));
  return response;
}

}  // namespace

absl::StatusOr<kiln::v1::CompileResponse> Client::Compile(const kiln::v1::CompileRequest& request) {
  return Call<kiln::v1::CompileRequest, kiln::v1::CompileResponse>(
      *stub_, &kiln::v1::Kiln::Stub::Compile, request, rpc_timeout_);
}

absl::StatusOr<kiln::v1::CompileResponse> Client::Lookup(const kiln::v1::CompileRequest& request) {
  return Call<kiln::v1::CompileRequest, kiln::v1::CompileResponse>(
      *stub_, &kiln::v1::Kiln::Stub::Lookup, request, rpc_timeout_);
}

absl::StatusOr<kiln::v1::StatsResponse> Client::Stats() {
  return Call<kiln::v1::StatsRequest, kiln::v1::StatsResponse>(
      *stub_, &kiln::v1::Kiln::Stub::Stats, kiln::v1::StatsRequest(), rpc_timeout_);
}

absl::StatusOr<kiln::v1::ListResponse> Client::List() {
  return Call<kiln::v1::ListRequest, kiln::v1::ListResponse>(
      *stub_, &kiln::v1::Kiln::Stub::List, kiln::v1::ListRequest(), rpc_timeout_);
}

absl::StatusOr<kiln::v1::ArtifactMetadata> Client::Show(const std::string& key) {
  kiln::v1::ShowRequest request;
  request.set_key(key);
  ASSIGN_OR_RETURN(auto response, (Call<kiln::v1::ShowRequest, kiln::v1::ShowResponse>(
                                      *stub_, &kiln::v1::Kiln::Stub::Show, request, rpc_timeout_)));
  return response.artifact();
}

absl::StatusOr<std::string> Client::Evict(const std::string& key) {
  kiln::v1::EvictRequest request;
  request.set_key(key);
  ASSIGN_OR_RETURN(auto response, (Call<kiln::v1::EvictRequest, kiln::v1::EvictResponse>(
                                      *stub_, &kiln::v1::Kiln::Stub::Evict, request, rpc_timeout_)));
  return response.key();
}

}  // namespace kiln
