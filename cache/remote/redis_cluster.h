// The Redis Cluster protocol as a client sees it, without I/O: which hash
// slot a key is in, which master serves each slot (from CLUSTER SLOTS), and
// the MOVED / ASK redirections a node answers with. redis_client.cc does the
// talking. Reference: the Redis Cluster specification ("Keys distribution
// model", "Redirection and resharding").
#ifndef KILN_CACHE_REMOTE_REDIS_CLUSTER_H_
#define KILN_CACHE_REMOTE_REDIS_CLUSTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cache/remote/redis_client.h"

namespace kiln {

inline constexpr int kRedisClusterSlots = 16384;

// CRC16-XMODEM of the key, or of its hash tag: the bytes between the first
// '{' and the first '}' after it, when there are any. Keys sharing a tag
// share a slot. In [0, kRedisClusterSlots).
int KeySlot(absl::string_view key);

// "host:port" -> endpoint; an empty host is `asked`'s (a node that does not
// know its own address says ":6380"). nullopt when it does not parse.
std::optional<RedisEndpoint> ParseClusterEndpoint(absl::string_view text,
                                                  const RedisEndpoint& asked);

// The master of each slot. Copyable; not thread-safe (the client guards it).
class RedisSlotMap {
 public:
  RedisSlotMap();

  // From the reply to CLUSTER SLOTS sent to `asked`:
  //   reply := [range...]
  //   range := [start, end, master, replica...]
  //   node  := [host, port, id, ...]   (host "" or nil: `asked`'s host)
  // InvalidArgument naming the range that does not fit this grammar.
  static absl::StatusOr<RedisSlotMap> Parse(const RedisReply& cluster_slots,
                                            const RedisEndpoint& asked);

  // The master of `slot`; nullptr when no node serves it.
  const RedisEndpoint* Find(int slot) const;
  void Set(int slot, const RedisEndpoint& master);
  // Every master, each once, in the order first seen.
  const std::vector<RedisEndpoint>& masters() const { return masters_; }
  // "0-5460 127.0.0.1:7000\n5461-16383 127.0.0.1:7001\n": ranges in slot
  // order, unserved slots left out.
  std::string ToString() const;

 private:
  int IndexOf(const RedisEndpoint& master);

  std::vector<RedisEndpoint> masters_;
  std::vector<int16_t> master_of_slot_;  // index into masters_, -1: none
};

// A node's answer that the key's slot is elsewhere: MOVED (for good) or ASK
// (for this one command, during a migration).
struct RedisRedirect {
  enum class Kind { kMoved, kAsk };
  Kind kind = Kind::kMoved;
  int slot = 0;
  RedisEndpoint endpoint;
};

// "MOVED 3999 127.0.0.1:6381" or "ASK 3999 :6381" (error text sent by
// `asked`) -> the redirect; nullopt for any other error, malformed ones
// included (the client then returns the error as it is).
std::optional<RedisRedirect> ParseRedirect(absl::string_view error, const RedisEndpoint& asked);

}  // namespace kiln

#endif  // KILN_CACHE_REMOTE_REDIS_CLUSTER_H_
