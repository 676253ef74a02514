// A small synchronous Redis client over hiredis (Debian libhiredis-dev 0.14,
// which has neither cluster support nor TLS): one standalone server or a
// Redis Cluster, found from seed nodes. Cluster routing (hash slots,
// MOVED/ASK, refreshing the slot map) is redis_cluster.h; this file owns
// the connections.
//
// Connections are plain TCP or Unix sockets, not encrypted: run Redis on a
// trusted network or behind a TLS tunnel (docs/DEPLOYMENT.md).
//
// Replies are read 16 KiB at a time and counted: one larger than
// Options::max_reply_bytes fails (the connection is dropped) once that many
// bytes have arrived, so no reply, whatever length it announces, makes the
// client hold more than about the cap.
//
// Faults: every connect and command is bounded by Options::timeout. A node
// that cannot be reached is not tried again until its backoff (doubling
// from min_backoff to max_backoff) has passed; until then commands for it
// fail at once with Unavailable. In a cluster, a MOVED or an unreachable
// master makes the client read the slot map again from another node (at
// most once a second): after a failover the slots have a new master.
// SIGPIPE is blocked in the calling thread around each command, so a
// server that goes away cannot kill a process that does not ignore it.
// Thread-safe: commands to one node are serialized on its connection.
#ifndef KILN_CACHE_REMOTE_REDIS_CLIENT_H_
#define KILN_CACHE_REMOTE_REDIS_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace kiln {

struct RedisEndpoint {
  std::string host;  // TCP, with port
  int port = 0;
  std::string unix_path;         // or a Unix socket
  std::string ToString() const;  // "host:port" or "unix:///path"
};
bool operator==(const RedisEndpoint& a, const RedisEndpoint& b);
inline bool operator!=(const RedisEndpoint& a, const RedisEndpoint& b) { return !(a == b); }

// "redis://HOST:PORT", "unix:///PATH", or a comma-separated list of
// redis://HOST:PORT seeds (Redis Cluster). InvalidArgument naming the part
// that does not parse.
absl::StatusOr<std::vector<RedisEndpoint>> ParseRedisUrl(absl::string_view url);

// A reply, copied out of hiredis. kError only ever appears inside an array
// (EXEC's results): an error reply to the command itself is a status.
struct RedisReply {
  enum class Type { kNil, kString, kStatus, kInteger, kArray, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisReply> elements;  // kArray
};

class RedisClient {
 public:
  struct Options {
    std::vector<RedisEndpoint> seeds;
    std::string username;  // ACL user (AUTH user password); empty: AUTH password
    std::string password;  // empty: no AUTH
    absl::Duration timeout = absl::Milliseconds(250);  // connect, and each command
    absl::Duration min_backoff = absl::Milliseconds(100);
    absl::Duration max_backoff = absl::Seconds(10);
    size_t max_reply_bytes = size_t{64} << 20;  // bytes of one reply, as sent
  };

  // Does not connect: the first command does (so kilnd starts while Redis
  // is down). InvalidArgument without seeds, or unless 0 < timeout,
  // 0 < min_backoff <= max_backoff and 0 < max_reply_bytes.
  static absl::StatusOr<std::unique_ptr<RedisClient>> Create(Options options);
  virtual ~RedisClient() = default;

  // Runs one command (binary-safe arguments); args[key_arg] is the key that
  // routes it in a cluster (without one, any master serves it). Error
  // replies are statuses: PermissionDenied for NOAUTH/WRONGPASS/NOPERM,
  // Unavailable for the passing CLUSTERDOWN/TRYAGAIN/LOADING/MASTERDOWN,
  // FailedPrecondition for others, each with Redis's message and the node;
  // MOVED and ASK are followed (a bounded number of times) and never
  // returned. Unavailable when the node is down or in backoff (the message
  // names it and says when it is tried again), DeadlineExceeded when it did
  // not answer in time (the connection is then dropped and reopened by the
  // next command, at once: a slow node is not a down one).
  // ResourceExhausted when the reply passes max_reply_bytes (the message
  // names the cap; the connection is reopened by the next command).
  // InvalidArgument without arguments.
  virtual absl::StatusOr<RedisReply> Command(absl::Span<const std::string> args,
                                             size_t key_arg = 1) = 0;

  // Whether the seeds turned out to be a Redis Cluster (known after the
  // first command that reached one).
  virtual bool cluster() const = 0;
};

}  // namespace kiln

#endif  // KILN_CACHE_REMOTE_REDIS_CLIENT_H_
