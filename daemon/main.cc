// kilnd: the Kiln daemon. Flags, logging, then serve until SIGTERM/SIGINT or
// the idle timeout.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

#include "abi/kiln_abi.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "cache/local_index.h"
#include "cache/object_dir.h"
#include "cache/remote/redis_client.h"
#include "cache/remote/remote_tier.h"
#include "cache/remote/signing.h"
#include "cache/request_key.h"
#include "cache/rocksdb_store.h"
#include "codegen/compile/fallback_compiler.h"
#include "codegen/compile/subprocess_compiler.h"
#include "codegen/compile/toolchain.h"
#include "codegen/compile/worker_compiler.h"
#include "codegen/limits.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/paths.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "daemon/artifact_cache.h"
#include "daemon/metrics_server.h"
#include "daemon/prometheus.h"
#include "daemon/service.h"

ABSL_FLAG(std::string, socket, "",
          "Unix socket to listen on (default: $KILN_SOCKET, else $XDG_RUNTIME_DIR/kiln/kilnd.sock, "
          "else /tmp/kiln-$UID/kilnd.sock). Its directory must be private to this user.");
ABSL_FLAG(std::string, cache_dir, "",
          "Cache directory: the RocksDB store and the object files (default: $KILN_CACHE_DIR, "
          "else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln).");
ABSL_FLAG(int, compile_jobs, 2, "Compiles that may run at once.");
ABSL_FLAG(
    int, max_corrupt_copies, kiln::RocksDbStoreOptions().max_corrupt_copies,
    "Copies of damaged stores kept beside the store for inspection (<cache_dir>/db.corrupt-*, "
    "newest first); older ones are removed at start and when a new one is made. 0 keeps "
    "none.");
ABSL_FLAG(int64_t, max_cache_bytes, -1,
          "Evict least recently used entries (local-index hits count as uses) to keep the "
          "store within this many bytes; -1: the smaller of 10 GiB and 10% of the cache "
          "directory's file system; 0: no cap.");
ABSL_FLAG(absl::Duration, max_entry_age, absl::ZeroDuration(),
          "Evict entries unused for longer than this (e.g. 720h); 0: never.");
ABSL_FLAG(absl::Duration, gc_interval, absl::Minutes(1),
          "How often eviction checks the limits (also after a compile that passes the cap).");
ABSL_FLAG(absl::Duration, compile_timeout, absl::Seconds(120),
          "A compile still running after this is killed and fails.");
ABSL_FLAG(uint64_t, compile_memory_limit_mb, kiln::kDefaultCompileMemoryBytes >> 20,
          "Address space a compile may use (RLIMIT_AS of the compile worker and of clang++); "
          "a compile past it fails with ResourceExhausted naming the limit.");
ABSL_FLAG(int64_t, max_graph_nodes, kiln::limits::kDefaultMaxGraphNodes,
          "Refuse graphs of more nodes than this (InvalidArgument, before any codegen); at most "
          "131072 (kMaxNodes).");
ABSL_FLAG(absl::Duration, idle_timeout, absl::ZeroDuration(),
          "Exit after this long without a request (0: never). Auto-started daemons use 10m.");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(10),
          "After SIGTERM, calls still running this long are cancelled (their compiles still "
          "finish and are stored; clients retry against the next kilnd).");
ABSL_FLAG(uint32_t, testonly_protocol_version, kiln::kProtocolVersion,
          "For tests: speak this protocol version, standing in for another Kiln release.");
ABSL_FLAG(absl::Duration, lock_wait, absl::Minutes(3),
          "When another kilnd serves this socket (draining after SIGTERM, say), wait this long "
          "for it to exit before giving up.");
ABSL_FLAG(std::string, metrics_socket, "",
          "Unix socket (mode 0600) serving Prometheus text on GET /metrics (default: beside "
          "--socket, kilnd.sock -> kilnd.metrics.sock; \"none\": no metrics socket).");
ABSL_FLAG(int, metrics_port, 0,
          "Also serve /metrics on this TCP port of 127.0.0.1, never another interface (0: off).");
ABSL_FLAG(std::string, remote, "",
          "The fleet tier: redis://HOST:PORT, unix:///PATH, or a comma-separated list of "
          "redis://HOST:PORT seed nodes of a Redis Cluster. Empty: this machine alone. "
          "Connections are not encrypted (docs/DEPLOYMENT.md).");
ABSL_FLAG(std::string, remote_namespace, "kiln", "Prefix of the fleet tier's Redis keys.");
ABSL_FLAG(std::string, remote_signing_key, "",
          "Ed25519 private key (PEM, mode 0600) this kilnd signs the entries it publishes with. "
          "Without it kilnd only reads the fleet tier.");
ABSL_FLAG(std::string, remote_trusted_keys, "",
          "PEM file of the Ed25519 public keys whose entries this kilnd accepts (besides its "
          "own signing key's).");
ABSL_FLAG(std::string, remote_user, "", "Redis ACL user (default: Redis's default user).");
ABSL_FLAG(std::string, remote_password_file, "",
          "File (mode 0600) holding the Redis password; empty: no AUTH.");
ABSL_FLAG(absl::Duration, remote_timeout, absl::Milliseconds(250),
          "Bound on each connect and command to Redis.");
ABSL_FLAG(absl::Duration, remote_entry_ttl, absl::Hours(24 * 30),
          "How long an entry stays in the fleet tier after its compile.");
ABSL_FLAG(absl::Duration, remote_lease_ttl, absl::Seconds(15),
          "A compile lease lapses this long after its holder stops renewing it (it died).");
ABSL_FLAG(absl::Duration, remote_max_lease_wait, absl::Minutes(2),
          "How long a miss waits for another machine's compile before compiling itself.");
ABSL_FLAG(int64_t, remote_max_entry_bytes, int64_t{16} << 20,
          "The largest fleet-tier entry kilnd reads: a larger one is refused without being "
          "transferred (and compiled here), and a larger local artifact is not published.");
ABSL_FLAG(absl::Duration, testonly_compile_delay, absl::ZeroDuration(),
          "Tests only: every compile takes at least this long.");
ABSL_FLAG(absl::Duration, testonly_import_delay, absl::ZeroDuration(),
          "Tests only: every import takes at least this long.");
ABSL_FLAG(int64_t, max_artifact_bytes, int64_t{128} << 20,
          "The largest artifact (shared object) kilnd stores, from a compile, the fleet tier "
          "or a bundle; a bundle declaring a larger one is refused before it is read.");
ABSL_FLAG(int64_t, max_bundle_metadata_bytes, int64_t{64} << 20,
          "The most metadata the entries of one imported bundle may carry together (an import "
          "holds it all, with one blob at a time); a few kilobytes an entry.");
ABSL_FLAG(int64_t, max_request_bytes, kiln::kMaxRequestBytes,
          "The largest request kilnd reads from a client (gRPC's maximum receive message "
          "size); clients send at most 64 MiB.");
ABSL_FLAG(int, admin_threads, 1,
          "Threads for the admin calls (import, export, verify, gc, prune, pin, evict, ls, why), "
          "apart from compiles and hits.");
ABSL_FLAG(int, admin_queue, 16,
          "Admin calls that may wait for an admin thread; more are refused with "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error.");
ABSL_FLAG(std::string, compiler, "worker",
          "worker: long-lived kiln-compile-worker processes (falls back to subprocess when no "
          "worker can start); subprocess: one clang++ run per compile.");
ABSL_FLAG(bool, daemonize, false,
          "Detach at start (fork once, before any thread exists): the parent exits at once, so "
          "whoever started kilnd reaps it and the daemon is never its zombie.");

namespace kiln {
namespace {

// --max_cache_bytes, with -1 as the smaller of 10 GiB and a tenth of the
// file system `cache_dir` is on.
absl::StatusOr<int64_t> CacheCap(const std::string& cache_dir) {
  const int64_t flag = absl::GetFlag(FLAGS_max_cache_bytes);
  if (flag >= 0) return flag;
  if (flag != -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_cache_bytes=", flag, ": give bytes, 0 (no cap) or -1 (the default)"));
  }
  struct statvfs fs;
  if (statvfs(cache_dir.c_str(), &fs) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot size the file system of ", cache_dir, ": ", strerror(errno)));
  }
  const int64_t tenth = static_cast<int64_t>(fs.f_blocks) * static_cast<int64_t>(fs.f_frsize) / 10;
  return std::min(int64_t{10} << 30, tenth);
}

// Takes an exclusive lock on `path` for the process's life. While another
// kilnd holds it (one draining after SIGTERM, its compiles finishing), waits
// up to `patience` for it to exit: a replacement started during a restart
// takes over instead of failing its client.
absl::Status WaitForLock(const std::string& path, absl::Duration patience) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  const absl::Time deadline = absl::Now() + patience;
  bool logged = false;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (absl::Now() >= deadline) {
      close(fd);
      return absl::AlreadyExistsError(absl::StrCat("another kilnd still holds ", path, " after ",
                                                   absl::FormatDuration(patience)));
    }
    if (!logged) {
      KILN_LOG(INFO) << "another kilnd holds " << path << "; waiting for it to exit";
      logged = true;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::OkStatus();  // the fd stays open: the lock lives until exit
}

// A file's identity: what a path names now, to tell whether it is still
// what kilnd created or found at its start.
struct FileIdentity {
  dev_t device;
  ino_t inode;
  bool operator==(const FileIdentity& other) const {
    return device == other.device && inode == other.inode;
  }
  bool operator!=(const FileIdentity& other) const { return !(*this == other); }
};
std::optional<FileIdentity> IdentityOf(const std::string& path) {
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) return std::nullopt;
  return FileIdentity{info.st_dev, info.st_ino};
}

absl::StatusOr<std::unique_ptr<Compiler>> MakeCompiler(const std::string& cache_dir, int jobs) {
  const absl::Duration timeout = absl::GetFlag(FLAGS_compile_timeout);
  const uint64_t memory_limit = absl::GetFlag(FLAGS_compile_memory_limit_mb) << 20;
  auto subprocess = std::make_unique<SubprocessCompiler>(cache_dir + "/tmp", timeout, kDefaultClang,
                                                         memory_limit);
  const std::string choice = absl::GetFlag(FLAGS_compiler);
  if (choice == "subprocess") return subprocess;
  if (choice != "worker") {
    return absl::InvalidArgumentError(
        absl::StrCat("--compiler=", choice, " is not one of worker, subprocess"));
  }
  std::unique_ptr<Compiler> worker;
  auto worker_path = FindCompileWorker();
  if (worker_path.ok()) {
    WorkerCompilerOptions options;
    options.worker_path = *worker_path;
    options.jobs = jobs;
    options.timeout = timeout;
    options.memory_limit_bytes = memory_limit;
    options.temp_root = cache_dir + "/tmp";
    RETURN_IF_ERROR(MakeDirectories(options.temp_root, 0700));
    worker = std::make_unique<WorkerCompiler>(options);
  } else {
    KILN_LOG(WARNING) << worker_path.status() << "; compiling with clang++ subprocesses";
  }
  return std::unique_ptr<Compiler>(
      std::make_unique<FallbackCompiler>(std::move(worker), std::move(subprocess)));
}

// Redis's own limit on a string value (proto-max-bulk-len's default).
constexpr int64_t kMaxRemoteEntryBytes = int64_t{512} << 20;

// The fleet tier the --remote flags describe, or null without --remote.
absl::StatusOr<std::shared_ptr<RemoteTier>> MakeRemoteTier() {
  const std::string url = absl::GetFlag(FLAGS_remote);
  if (url.empty()) return nullptr;
  RedisClient::Options redis;
  ASSIGN_OR_RETURN(redis.seeds, ParseRedisUrl(url));
  redis.timeout = absl::GetFlag(FLAGS_remote_timeout);
  const int64_t max_entry_bytes = absl::GetFlag(FLAGS_remote_max_entry_bytes);
  if (max_entry_bytes <= 0 || max_entry_bytes > kMaxRemoteEntryBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--remote_max_entry_bytes=", max_entry_bytes,
                                                   " must be in 1-", kMaxRemoteEntryBytes));
  }
  // Room for RESP framing, and for a large cluster's CLUSTER SLOTS reply.
  redis.max_reply_bytes = static_cast<size_t>(max_entry_bytes) + (size_t{1} << 20);
  redis.username = absl::GetFlag(FLAGS_remote_user);
  if (const std::string path = absl::GetFlag(FLAGS_remote_password_file); !path.empty()) {
    ASSIGN_OR_RETURN(redis.password, ReadSecretFile(path, "Redis password file"));
    redis.password = std::string(absl::StripTrailingAsciiWhitespace(redis.password));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RedisClient> client, RedisClient::Create(std::move(redis)));
  absl::StatusOr<SigningKeys> keys = SigningKeys::Load(absl::GetFlag(FLAGS_remote_signing_key),
                                                       absl::GetFlag(FLAGS_remote_trusted_keys));
  if (!keys.ok()) {
    return absl::Status(keys.status().code(), absl::StrCat("--remote needs --remote_signing_key or "
                                                           "--remote_trusted_keys: ",
                                                           keys.status().message()));
  }
  RemoteTier::Options options;
  options.url = url;
  options.key_namespace = absl::GetFlag(FLAGS_remote_namespace);
  options.entry_ttl = absl::GetFlag(FLAGS_remote_entry_ttl);
  options.lease_ttl = absl::GetFlag(FLAGS_remote_lease_ttl);
  options.max_lease_wait = absl::GetFlag(FLAGS_remote_max_lease_wait);
  options.max_entry_bytes = max_entry_bytes;
  // A lease is renewed every third of its life, each renewal bounded by
  // the timeout: shorter, it would lapse under a live compile.
  const absl::Duration timeout = absl::GetFlag(FLAGS_remote_timeout);
  if (options.lease_ttl < std::max(absl::Seconds(1), 3 * timeout)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--remote_lease_ttl=", absl::FormatDuration(options.lease_ttl),
                     " must be at least 1s and three times --remote_timeout (",
                     absl::FormatDuration(timeout), ")"));
  }
  if (options.entry_ttl <= absl::ZeroDuration() || options.entry_ttl == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("--remote_entry_ttl must be a positive, finite duration");
  }
  if (options.max_lease_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--remote_max_lease_wait must not be negative");
  }
  return std::make_shared<RemoteTier>(std::move(client), *std::move(keys), options);
}

absl::Status Serve() {
  LogSeverity severity;
  if (!ParseLogSeverity(absl::GetFlag(FLAGS_log_level), &severity)) {
    return absl::InvalidArgumentError(absl::StrCat("--log_level=", absl::GetFlag(FLAGS_log_level),
                                                   " is not one of debug, info, warning, error"));
  }
  SetMinLogSeverity(severity);
  std::string socket = absl::GetFlag(FLAGS_socket);
  if (socket.empty()) socket = DefaultSocketPath();
  std::string cache_dir = absl::GetFlag(FLAGS_cache_dir);
  if (cache_dir.empty()) cache_dir = DefaultCacheDir();
  if (socket.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", socket, " is longer than ",
                                                   sizeof(sockaddr_un{}.sun_path) - 1, " bytes"));
  }

  RETURN_IF_ERROR(EnsurePrivateDirectory(Dirname(socket)));
  RETURN_IF_ERROR(WaitForLock(socket + ".lock", absl::GetFlag(FLAGS_lock_wait)));
  unlink(socket.c_str());  // stale: we hold the lock, so no kilnd is serving it

  // Private: clients dlopen what is in it, hashing first then opening by
  // path (client/loader.h).
  RETURN_IF_ERROR(EnsurePrivateDirectory(cache_dir));
  RocksDbStore::Options store_options;
  store_options.max_corrupt_copies = std::max(0, absl::GetFlag(FLAGS_max_corrupt_copies));
  ASSIGN_OR_RETURN(std::unique_ptr<RocksDbStore> store,
                   RocksDbStore::Open(cache_dir + "/db", store_options));
  // Every target's (the descriptor below must let clients key any of
  // them), probed only when the compiler or the CPU changed.
  ASSIGN_OR_RETURN(TargetToolchains toolchains,
                   DetectToolchainsRemembered(cache_dir + "/toolchains"));
  const kiln::v1::Toolchain& toolchain = toolchains.at(kiln::v1::TARGET_NATIVE);
  ArtifactCache::Options options;
  options.compile_threads = std::max(1, absl::GetFlag(FLAGS_compile_jobs));
  options.max_graph_nodes = absl::GetFlag(FLAGS_max_graph_nodes);
  if (options.max_graph_nodes < 1 || options.max_graph_nodes > limits::kMaxNodes) {
    return absl::InvalidArgumentError(absl::StrCat("--max_graph_nodes=", options.max_graph_nodes,
                                                   " is not in [1, ", limits::kMaxNodes, "]"));
  }
  ASSIGN_OR_RETURN(options.max_cache_bytes, CacheCap(cache_dir));
  options.max_entry_age = absl::GetFlag(FLAGS_max_entry_age);
  options.gc_interval = std::max(absl::Seconds(1), absl::GetFlag(FLAGS_gc_interval));
  // The store may have lost entries its index still names: checked while
  // serving, so that a start never reads every index file first.
  options.reconcile_index = true;
  ASSIGN_OR_RETURN(options.remote, MakeRemoteTier());
  options.testonly_compile_delay = absl::GetFlag(FLAGS_testonly_compile_delay);
  options.testonly_import_delay = absl::GetFlag(FLAGS_testonly_import_delay);
  options.max_artifact_bytes = absl::GetFlag(FLAGS_max_artifact_bytes);
  options.max_bundle_metadata_bytes = absl::GetFlag(FLAGS_max_bundle_metadata_bytes);
  const int64_t max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  for (const auto& [flag, value] :
       {std::pair<const char*, int64_t>{"max_artifact_bytes", options.max_artifact_bytes},
        {"max_bundle_metadata_bytes", options.max_bundle_metadata_bytes},
        {"max_request_bytes", max_request_bytes}}) {
    if (value <= 0 || value > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, "=", value, ": give a positive byte count below 2 GiB"));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Compiler> compiler,
                   MakeCompiler(cache_dir, options.compile_threads));
  // Same-host clients find hits through this without a round trip.
  LocalIndex index(cache_dir);
  kiln::v1::CacheDescriptor descriptor;
  descriptor.set_protocol_version(kProtocolVersion);
  descriptor.set_abi_version(KILN_ABI_VERSION);
  descriptor.set_kiln_version(kKilnVersion);
  SetDescriptorToolchainDigests(DigestToolchains(toolchains), descriptor);
  descriptor.set_machine_id(MachineId());
  RETURN_IF_ERROR(index.WriteDescriptor(descriptor));
  Compiler* const warm = compiler.get();
  ArtifactCache cache(std::move(store), ObjectDirectory(cache_dir + "/objects"), index,
                      std::move(compiler), toolchains, options);
  // Start a worker now so that the first real compile does not wait for it.
  // Declared after `cache`, which owns the compiler: joined before the
  // compiler is destroyed, on every way out of Serve.
  struct JoinOnExit {
    std::thread thread;
    ~JoinOnExit() {
      if (thread.joinable()) thread.join();
    }
  } warmup{std::thread([warm] {
    const absl::Status warmed = warm->Warmup();
    if (!warmed.ok()) KILN_LOG(WARNING) << "compiler warm-up failed: " << warmed;
  })};
  KilnService::Options service_options;
  service_options.auto_started = absl::GetFlag(FLAGS_daemonize);
  service_options.protocol_version = absl::GetFlag(FLAGS_testonly_protocol_version);
  // The Stop RPC drains as SIGTERM does: the supervisor below receives it.
  service_options.stop = [] { kill(getpid(), SIGTERM); };
  service_options.admin.threads = std::max(1, absl::GetFlag(FLAGS_admin_threads));
  service_options.admin.max_queued = std::max(1, absl::GetFlag(FLAGS_admin_queue));
  TrafficStore traffic(cache_dir + "/traffic");
  KilnService service(&cache, &traffic, cache_dir, service_options);

  MetricsServer::Options metrics_options;
  metrics_options.socket_path = absl::GetFlag(FLAGS_metrics_socket);
  metrics_options.port = absl::GetFlag(FLAGS_metrics_port);
  if (metrics_options.socket_path.empty()) {
    metrics_options.socket_path = DefaultMetricsSocketPath(socket);
    metrics_options.socket_optional = true;
  }
  if (metrics_options.socket_path == "none") metrics_options.socket_path.clear();
  ASSIGN_OR_RETURN(
      std::unique_ptr<MetricsServer> metrics,
      MetricsServer::Start(metrics_options, [&cache] { return PrometheusText(cache.Stats()); }));

  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_request_bytes));
  // A reply carries at most one artifact's bytes.
  builder.SetMaxSendMessageSize(
      static_cast<int>(std::max<int64_t>(256 << 20, options.max_artifact_bytes + (1 << 20))));
  const mode_t old_umask = umask(077);  // the socket is created 0600
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  umask(old_umask);
  if (server == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", socket));
  }
  chmod(socket.c_str(), 0600);
  KILN_LOG(INFO) << "kilnd " << kKilnVersion << " serving " << socket << " (cache " << cache_dir
                 << ", compiler " << toolchain.compiler_version() << ", cpu " << toolchain.cpu()
                 << ")";
  if (options.remote != nullptr) {
    KILN_LOG(INFO) << "fleet tier " << absl::GetFlag(FLAGS_remote) << " ("
                   << (options.remote->can_publish() ? "reads and publishes" : "reads only") << ")";
  }

  // Signals are blocked in every thread (see main); this one waits for them,
  // for the idle timeout and for the cache directory or the socket to go,
  // then shuts the server down. A cache directory removed under kilnd (a
  // user's `rm -rf ~/.cache/kiln`) would fail every compile and keep the
  // removed store's disk space; a socket removed (a cleaner of /tmp) leaves
  // a kilnd no client reaches, holding the lock a new one waits for. Either
  // way it exits with an error, and the next client (or systemd) starts a
  // fresh kilnd.
  const absl::Duration idle_timeout = absl::GetFlag(FLAGS_idle_timeout);
  const std::optional<FileIdentity> cache_identity = IdentityOf(cache_dir);
  const std::optional<FileIdentity> socket_identity = IdentityOf(socket);
  std::string gone;  // what was removed or replaced, if that ended it
  std::thread supervisor([&] {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    const timespec tick = {1, 0};
    while (true) {
      const int signal = sigtimedwait(&signals, nullptr, &tick);
      if (signal > 0) {
        KILN_LOG(INFO) << "received " << strsignal(signal) << "; shutting down";
        break;
      }
      if (idle_timeout > absl::ZeroDuration() && !service.busy() &&
          absl::Now() - service.last_activity() > idle_timeout) {
        KILN_LOG(INFO) << "idle for " << absl::FormatDuration(idle_timeout) << "; exiting";
        break;
      }
      if (IdentityOf(cache_dir) != cache_identity) {
        gone = absl::StrCat("cache directory ", cache_dir, " was removed or replaced");
      } else if (IdentityOf(socket) != socket_identity) {
        gone = absl::StrCat("socket ", socket, " was removed or replaced");
      }
      if (!gone.empty()) {
        KILN_LOG(ERROR) << gone << "; exiting so that a fresh kilnd starts";
        break;
      }
    }
    // New clients find no socket and wait for the lock's next holder;
    // gRPC would otherwise accept their connections and cancel their calls
    // for the whole drain. (No successor binds before this process exits:
    // the lock is held until then; a socket that is no longer ours is left
    // to whoever made it.)
    if (IdentityOf(socket) == socket_identity) unlink(socket.c_str());
    cache.Shutdown();  // no new compiles; running ones finish
    server->Shutdown(absl::ToChronoTime(absl::Now() + absl::GetFlag(FLAGS_drain_timeout)));
  });
  server->Wait();
  supervisor.join();
  metrics.reset();  // removes its socket
  if (!gone.empty()) return absl::FailedPreconditionError(gone);
  KILN_LOG(INFO) << "kilnd stopped";
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "the Kiln compilation cache daemon.\n"
      "Serves compile requests from Kiln clients over a Unix socket; stores artifacts in\n"
      "RocksDB under the cache directory. Usually started on demand by the client.\n\n"
      "Usage: kilnd [FLAGS]\n"
      "Example: kilnd --socket=/tmp/kiln-$UID/kilnd.sock --compile_jobs=2 --idle_timeout=10m\n\n"
      "Environment: KILN_SOCKET and KILN_CACHE_DIR are the defaults of --socket and\n"
      "--cache_dir (the client and the kiln CLI read them too).");
  // --help lists kilnd's own flags (not Abseil's or gRPC's; --helpfull has all).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "daemon/main.cc");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_daemonize)) {
    // The only fork in Kiln: before gRPC, RocksDB or any thread exists.
    const pid_t child = fork();
    if (child < 0) {
      std::cerr << "kilnd: fork failed: " << strerror(errno) << "\n";
      return 1;
    }
    if (child > 0) _exit(0);
    setsid();
  }
  // Block the shutdown signals before any thread starts, so only the
  // supervisor receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  const absl::Status status = kiln::Serve();
  if (!status.ok()) {
    std::cerr << "kilnd: " << status.message() << "\n";
    return status.code() == absl::StatusCode::kAlreadyExists ? 3 : 1;
  }
  return 0;
}
