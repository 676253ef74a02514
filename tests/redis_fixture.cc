#include "tests/redis_fixture.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

constexpr char kRedisServer[] = "/usr/bin/redis-server";
constexpr char kRedisCli[] = "/usr/bin/redis-cli";
constexpr absl::Duration kStartTimeout = absl::Seconds(30);
constexpr int kClusterBusOffset = 10000;

// Binds 127.0.0.1:`port` (0: any) and returns the port bound, or 0.
int BindablePort(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t length = sizeof(address);
  int bound = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    bound = ntohs(address.sin_port);
  }
  close(fd);
  return bound;
}

// A free port whose cluster bus port is free too (racy, as any such
// choice: another process may take it before redis-server binds it).
absl::StatusOr<int> FreePortPair() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = BindablePort(0);
    if (port > 0 && port + kClusterBusOffset <= 65535 &&
        BindablePort(port + kClusterBusOffset) == port + kClusterBusOffset) {
      return port;
    }
  }
  return absl::UnavailableError("no free TCP port pair (port, port + 10000) on 127.0.0.1");
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(Options options) {
  if (options.tcp && options.port == 0) {
    ASSIGN_OR_RETURN(options.port, FreePortPair());
  }
  ASSIGN_OR_RETURN(std::string dir, MakeTempDirectory("/tmp/kredisXXXXXX"));
  std::unique_ptr<RedisServer> server(new RedisServer(std::move(options), std::move(dir)));
  RETURN_IF_ERROR(server->Launch());
  return server;
}

RedisServer::~RedisServer() {
  Kill(SIGKILL);
  // The log goes with the directory: show it while it can still explain.
  if (::testing::Test::HasFailure()) {
    const std::string log = Log();
    std::cerr << "redis-server's log (" << dir_ << "), last 3000 bytes:\n"
              << (log.size() > 3000 ? log.substr(log.size() - 3000) : log);
  }
  RemoveRecursively(dir_).IgnoreError();
}

std::string RedisServer::url() const {
  return options_.tcp ? absl::StrCat("redis://127.0.0.1:", options_.port)
                      : absl::StrCat("unix://", endpoint().unix_path);
}

RedisEndpoint RedisServer::endpoint() const {
  RedisEndpoint endpoint;
  if (options_.tcp) {
    endpoint.host = "127.0.0.1";
    endpoint.port = options_.port;
  } else {
    endpoint.unix_path = dir_ + "/redis.sock";
  }
  return endpoint;
}

absl::Status RedisServer::Launch() {
  std::vector<std::string> argv = {
      kRedisServer, "--daemonize", "no", "--dir", dir_, "--logfile", dir_ + "/redis.log", "--bind",
      "127.0.0.1", "--save", "",
      // Every write reaches the disk before its reply: SIGKILL loses nothing.
      "--appendonly", "yes", "--appendfsync", "always",
      // DEBUG SLEEP plays a slow server (from local connections only).
      "--enable-debug-command", "local"};
  if (options_.tcp) {
    argv.insert(argv.end(), {"--port", absl::StrCat(options_.port)});
  } else {
    argv.insert(argv.end(),
                {"--port", "0", "--unixsocket", endpoint().unix_path, "--unixsocketperm", "700"});
  }
  if (!options_.password.empty()) argv.insert(argv.end(), {"--requirepass", options_.password});
  if (options_.cluster_enabled) {
    argv.insert(argv.end(),
                {"--cluster-enabled", "yes", "--cluster-config-file", dir_ + "/nodes.conf"});
  }
  // Messages from before the log file is open (bad options) go there too.
  const std::string log_path = dir_ + "/redis.log";
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) return absl::InternalError(absl::StrCat("cannot open ", log_path));
  SpawnOptions spawn;
  spawn.redirects = {{log, STDOUT_FILENO}, {log, STDERR_FILENO}};
  spawn.close_other_fds = true;
  const absl::StatusOr<pid_t> pid = SpawnProcess(argv, spawn);
  close(log);
  if (!pid.ok()) return pid.status();
  pid_ = *pid;

  const absl::Time deadline = absl::Now() + kStartTimeout;
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(
          absl::StrCat("redis-server exited at start (wait status ", status, "): ", Log()));
    }
    // Until then PING fails to connect, or answers LOADING.
    absl::StatusOr<std::string> pong = Cli({"PING"});
    if (pong.ok() && *pong == "PONG") return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("redis-server in ", dir_,
                                                  " did not answer PING within ",
                                                  absl::FormatDuration(kStartTimeout)));
}

void RedisServer::Kill(int signal) {
  if (pid_ <= 0) return;
  kill(pid_, signal);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

absl::Status RedisServer::Restart() {
  Kill(SIGKILL);
  return Launch();
}

absl::StatusOr<std::string> RedisServer::Cli(std::vector<std::string> args) const {
  std::vector<std::string> argv = {kRedisCli};
  if (options_.tcp) {
    argv.insert(argv.end(), {"-h", "127.0.0.1", "-p", absl::StrCat(options_.port)});
  } else {
    argv.insert(argv.end(), {"-s", endpoint().unix_path});
  }
  if (!options_.password.empty()) {
    argv.insert(argv.end(), {"-a", options_.password, "--no-auth-warning"});
  }
  argv.insert(argv.end(), args.begin(), args.end());
  ASSIGN_OR_RETURN(ProcessResult result, RunProcess(argv, absl::Seconds(30)));
  if (result.exit_code != 0) {
    return absl::InternalError(absl::StrCat("redis-cli ", absl::StrJoin(args, " "), " exited ",
                                            result.exit_code, ": ", result.output));
  }
  if (absl::EndsWith(result.output, "\n")) result.output.pop_back();
  return result.output;
}

absl::StatusOr<int64_t> RedisServer::Info(const std::string& field,
                                          const std::string& subfield) const {
  ASSIGN_OR_RETURN(const std::string info, Cli({"INFO", "everything"}));
  for (absl::string_view line : absl::StrSplit(info, absl::ByAnyChar("\r\n"))) {
    if (!absl::ConsumePrefix(&line, field + ":")) continue;
    if (!subfield.empty()) {
      for (absl::string_view pair : absl::StrSplit(line, ',')) {
        if (absl::ConsumePrefix(&pair, subfield + "=")) line = pair;
      }
    }
    int64_t value = 0;
    if (!absl::SimpleAtoi(line, &value)) {
      return absl::InternalError(absl::StrCat("INFO ", field, " ", subfield, ": \"", line, "\""));
    }
    return value;
  }
  return 0;
}

std::string RedisServer::Log() const { return ReadFile(dir_ + "/redis.log").value_or(""); }

absl::StatusOr<std::unique_ptr<RedisCluster>> RedisCluster::Start(int nodes) {
  std::unique_ptr<RedisCluster> cluster(new RedisCluster());
  std::vector<std::string> create = {kRedisCli, "--cluster", "create"};
  for (int i = 0; i < nodes; ++i) {
    RedisServer::Options options;
    options.tcp = true;
    options.cluster_enabled = true;
    ASSIGN_OR_RETURN(std::unique_ptr<RedisServer> node, RedisServer::Start(options));
    create.push_back(absl::StrCat("127.0.0.1:", node->port()));
    cluster->nodes_.push_back(std::move(node));
  }
  create.push_back("--cluster-yes");
  ASSIGN_OR_RETURN(ProcessResult created, RunProcess(create, absl::Seconds(60)));
  if (created.exit_code != 0) {
    return absl::InternalError(absl::StrCat("redis-cli --cluster create exited ", created.exit_code,
                                            ": ", created.output));
  }
  RETURN_IF_ERROR(cluster->WaitUntilOk());
  return cluster;
}

std::string RedisCluster::url() const {
  return absl::StrJoin(nodes_, ",", [](std::string* out, const std::unique_ptr<RedisServer>& node) {
    out->append(node->url());
  });
}

absl::Status RedisCluster::WaitUntilOk(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (const std::unique_ptr<RedisServer>& node : nodes_) {
    if (!node->running()) continue;
    while (true) {
      absl::StatusOr<std::string> info = node->Cli({"CLUSTER", "INFO"});
      if (info.ok() && absl::StrContains(*info, "cluster_state:ok")) break;
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "redis cluster node ", node->url(), " not ok after ", absl::FormatDuration(timeout),
            ": ", info.ok() ? *info : info.status().ToString()));
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
