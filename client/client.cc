#include "client/client.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "cache/key.h"
#include "cache/local_index.h"
#include "cache/object_dir.h"
#include "codegen/abi/kiln_abi.h"
#include "codegen/guards.h"
#include "codegen/pipeline.h"
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
  const std::string self = ExecutablePath();
  if (!self.empty()) {
    const std::string sibling = Dirname(self) + "/kilnd";
    if (access(sibling.c_str(), X_OK) == 0) return sibling;
    // A Bazel-built binary with kilnd in its data.
    const std::string runfiles = self + ".runfiles/kiln/daemon/kilnd";
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
  // None of the worker's other descriptors (listening sockets, pipes) may
  // live on in the daemon.
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // Its own session: no controlling terminal, no signals meant for our
  // process group, and it outlives us. Default signal mask and handlers:
  // whatever the worker blocked or ignored, kilnd must see SIGTERM.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
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

Client::Client(ClientOptions options) : options_(std::move(options)) {
  if (options_.socket_path.empty()) options_.socket_path = DefaultSocketPath();
  if (options_.cache_dir.empty()) options_.cache_dir = DefaultCacheDir();
}

std::unique_ptr<Client> Client::Open(ClientOptions options) {
  return std::unique_ptr<Client>(new Client(std::move(options)));
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  std::unique_ptr<Client> client = Open(std::move(options));
  RETURN_IF_ERROR(client->Stub().status());
  return client;
}

absl::StatusOr<kiln::v1::HelloResponse> Client::daemon() {
  RETURN_IF_ERROR(Stub().status());
  absl::MutexLock lock(&mutex_);
  return hello_;
}

absl::StatusOr<std::shared_ptr<kiln::v1::Kiln::Stub>> Client::Stub() {
  absl::MutexLock lock(&mutex_);
  if (stub_ != nullptr) return stub_;
  const std::string& socket_path = options_.socket_path;
  auto stub = NewStub(socket_path);
  auto connected = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(hello_, Hello(*stub, options_.client_name));
    stub_ = std::move(stub);
    return absl::OkStatus();
  };
  if (SocketExists(socket_path)) {
    const absl::Status status = connected();
    if (status.ok()) return stub_;
    if (status.code() != absl::StatusCode::kUnavailable) return status;
  }
  if (!options_.auto_start) {
    return absl::UnavailableError(absl::StrCat("no kilnd is listening on ", socket_path,
                                               "; start one with `kilnd --socket=", socket_path,
                                               "`"));
  }

  // Start one, holding the start lock so that racing clients start one
  // daemon between them: whoever comes second finds it running.
  RETURN_IF_ERROR(EnsurePrivateDirectory(Dirname(socket_path)));
  const std::string lock_path = socket_path + ".start";
  const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", lock_path, ": ", strerror(errno)));
  }
  flock(lock_fd, LOCK_EX);
  absl::Status result = absl::UnavailableError("no kilnd answered");
  if (SocketExists(socket_path)) result = connected();
  if (result.code() == absl::StatusCode::kUnavailable) {
    result = SpawnDaemon(options_, socket_path, options_.cache_dir);
    if (result.ok()) {
      result = absl::UnavailableError("not yet");
      const absl::Time deadline = absl::Now() + options_.start_timeout;
      while (absl::Now() < deadline) {
        if (SocketExists(socket_path)) {
          result = connected();
          if (result.code() != absl::StatusCode::kUnavailable) break;
        }
        absl::SleepFor(absl::Milliseconds(5));
      }
      if (result.code() == absl::StatusCode::kUnavailable) {
        result = absl::UnavailableError(absl::StrCat(
            "started kilnd, but it did not answer on ", socket_path, " within ",
            absl::FormatDuration(options_.start_timeout), "; see ", options_.cache_dir,
            "/kilnd.log"));
      }
    }
  }
  flock(lock_fd, LOCK_UN);
  close(lock_fd);
  RETURN_IF_ERROR(result);
  return stub_;
}

std::optional<kiln::v1::CompileResponse> Client::FindLocal(
    const kiln::v1::CompileRequest& request) {
  const LocalIndex index(options_.cache_dir);
  kiln::v1::Toolchain toolchain;
  {
    // Read until found (a daemon may start after this process), then kept.
    absl::MutexLock lock(&descriptor_mutex_);
    if (!descriptor_.has_value()) {
      auto descriptor = index.ReadDescriptor();
      if (descriptor.ok() && descriptor->has_value() &&
          (*descriptor)->protocol_version() == kProtocolVersion &&
          (*descriptor)->abi_version() == KILN_ABI_VERSION &&
          (*descriptor)->machine_id() == MachineId()) {
        descriptor_ = **descriptor;
      }
    }
    if (!descriptor_.has_value()) return std::nullopt;
    toolchain = descriptor_->toolchain();
  }
  // The daemon's key computation, here: a graph it would refuse is left
  // for it to refuse, with its message.
  auto graph = PrepareGraph(request.graph());
  if (!graph.ok()) return std::nullopt;
  auto guards = ResolveGuards(*graph, request.guards());
  if (!guards.ok()) return std::nullopt;
  CodegenInputs inputs;
  inputs.graph = *std::move(graph);
  inputs.guards = *std::move(guards);
  inputs.options = request.options();
  inputs.toolchain = std::move(toolchain);
  const std::string key = ComputeCacheKey(inputs).key;
  auto entry = index.Find(key);
  if (!entry.ok() || !entry->has_value()) return std::nullopt;
  const std::string path = ObjectDirectory(options_.cache_dir + "/objects").PathFor((*entry)->digest());
  if (access(path.c_str(), R_OK) != 0) return std::nullopt;
  kiln::v1::CompileResponse response;
  *response.mutable_artifact() = **std::move(entry);
  response.set_object_path(path);
  response.set_cache_hit(true);
  return response;
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

template <typename Request, typename Response, typename Method>
absl::StatusOr<Response> Client::Rpc(Method method, const Request& request) {
  ASSIGN_OR_RETURN(std::shared_ptr<kiln::v1::Kiln::Stub> stub, Stub());
  absl::StatusOr<Response> response =
      Call<Request, Response>(*stub, method, request, options_.rpc_timeout);
  if (response.status().code() != absl::StatusCode::kUnavailable) return response;
  // The daemon went away (idle timeout, restart): connect again, starting
  // one if allowed, and retry once.
  {
    absl::MutexLock lock(&mutex_);
    if (stub_ == stub) stub_.reset();
  }
  ASSIGN_OR_RETURN(stub, Stub());
  return Call<Request, Response>(*stub, method, request, options_.rpc_timeout);
}

absl::StatusOr<kiln::v1::CompileResponse> Client::Compile(const kiln::v1::CompileRequest& request) {
  return Rpc<kiln::v1::CompileRequest, kiln::v1::CompileResponse>(&kiln::v1::Kiln::Stub::Compile,
                                                                  request);
}

absl::StatusOr<kiln::v1::CompileResponse> Client::Lookup(const kiln::v1::CompileRequest& request) {
  return Rpc<kiln::v1::CompileRequest, kiln::v1::CompileResponse>(&kiln::v1::Kiln::Stub::Lookup,
                                                                  request);
}

absl::StatusOr<kiln::v1::StatsResponse> Client::Stats() {
  return Rpc<kiln::v1::StatsRequest, kiln::v1::StatsResponse>(&kiln::v1::Kiln::Stub::Stats,
                                                              kiln::v1::StatsRequest());
}

absl::StatusOr<kiln::v1::ListResponse> Client::List() {
  return Rpc<kiln::v1::ListRequest, kiln::v1::ListResponse>(&kiln::v1::Kiln::Stub::List,
                                                            kiln::v1::ListRequest());
}

absl::StatusOr<kiln::v1::ArtifactMetadata> Client::Show(const std::string& key) {
  kiln::v1::ShowRequest request;
  request.set_key(key);
  ASSIGN_OR_RETURN(auto response, (Rpc<kiln::v1::ShowRequest, kiln::v1::ShowResponse>(
                                      &kiln::v1::Kiln::Stub::Show, request)));
  return response.artifact();
}

absl::StatusOr<std::string> Client::Evict(const std::string& key) {
  kiln::v1::EvictRequest request;
  request.set_key(key);
  ASSIGN_OR_RETURN(auto response, (Rpc<kiln::v1::EvictRequest, kiln::v1::EvictResponse>(
                                      &kiln::v1::Kiln::Stub::Evict, request)));
  return response.key();
}

}  // namespace kiln
