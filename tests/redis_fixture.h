// Real Redis servers for tests (Debian's redis-server 7 and redis-cli): a
// standalone one on a Unix socket or TCP, or a Redis Cluster of masters.
// Each server lives in a fresh /tmp/kredisXXXXXX directory (short: Unix
// socket paths are limited to 108 bytes) with its log, its append-only file
// (fsync'ed on every write, so a SIGKILL loses nothing and Restart finds the
// data) and, in a cluster, its nodes.conf.
#ifndef KILN_TESTS_REDIS_FIXTURE_H_
#define KILN_TESTS_REDIS_FIXTURE_H_

#include <signal.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cache/remote/redis_client.h"

namespace kiln {

class RedisServer {
 public:
  struct Options {
    bool tcp = false;  // else a Unix socket (and no TCP)
    bool cluster_enabled = false;
    std::string password;  // requirepass
    int port = 0;          // TCP; 0: a free one whose cluster bus port (+10000) is free too
  };

  // Starts it and waits until it answers PING.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(Options options);
  // SIGKILLs it and removes its directory (its log is printed first when
  // the test has failed).
  ~RedisServer();

  std::string url() const;  // "unix:///tmp/kredis.../redis.sock" or "redis://127.0.0.1:PORT"
  RedisEndpoint endpoint() const;
  int port() const { return options_.port; }
  bool running() const { return pid_ > 0; }

  // Sends `signal` and reaps it.
  void Kill(int signal = SIGKILL);
  // Starts it again (killed first if running): same port, directory, data.
  absl::Status Restart();
  // redis-cli against it (with the password): its output, without the
  // trailing newline. An error reply is output like any other ("ERR ...",
  // redis-cli exits 0); Internal when redis-cli itself fails.
  absl::StatusOr<std::string> Cli(std::vector<std::string> args) const;
  // A number INFO shows as "FIELD:N" (total_net_output_bytes), or one
  // field of an "a=1,b=2" line (field "cmdstat_get", then "calls"); 0
  // when INFO does not show it (a command never called).
  absl::StatusOr<int64_t> Info(const std::string& field, const std::string& subfield = "") const;
  // The server's log so far.
  std::string Log() const;

 private:
  RedisServer(Options options, std::string dir)
      : options_(std::move(options)), dir_(std::move(dir)) {}
  absl::Status Launch();

  Options options_;
  const std::string dir_;
  pid_t pid_ = -1;
};

// A Redis Cluster of masters on 127.0.0.1 (no replicas), every slot served.
class RedisCluster {
 public:
  // Starts the nodes, joins them (redis-cli --cluster create: slots split
  // evenly, in node order) and waits until each says cluster_state:ok.
  static absl::StatusOr<std::unique_ptr<RedisCluster>> Start(int nodes = 3);

  // "redis://127.0.0.1:P1,redis://127.0.0.1:P2,...": every node a seed.
  std::string url() const;
  RedisServer& node(int i) { return *nodes_[i]; }
  int size() const { return static_cast<int>(nodes_.size()); }
  // Waits until every running node says cluster_state:ok (a restarted
  // master refuses commands for a moment after it is back).
  absl::Status WaitUntilOk(absl::Duration timeout = absl::Seconds(30));

 private:
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace kiln

#endif  // KILN_TESTS_REDIS_FIXTURE_H_
