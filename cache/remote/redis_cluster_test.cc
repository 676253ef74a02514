#include "cache/remote/redis_cluster.h"

#include "gtest/gtest.h"

namespace kiln {
namespace {

RedisReply Int(int64_t value) {
  RedisReply reply;
  reply.type = RedisReply::Type::kInteger;
  reply.integer = value;
  return reply;
}

RedisReply Str(std::string value) {
  RedisReply reply;
  reply.type = RedisReply::Type::kString;
  reply.str = std::move(value);
  return reply;
}

RedisReply Array(std::vector<RedisReply> elements) {
  RedisReply reply;
  reply.type = RedisReply::Type::kArray;
  reply.elements = std::move(elements);
  return reply;
}

// One range of a CLUSTER SLOTS reply, as Redis 7 sends it: each node is
// [host, port, id, {metadata}].
RedisReply Range(int start, int end, const std::string& host, int port) {
  return Array({Int(start), Int(end), Array({Str(host), Int(port), Str("id"), Array({})}),
                Array({Str("127.0.0.1"), Int(port + 100), Str("replica-id"), Array({})})});
}

RedisEndpoint Tcp(const std::string& host, int port) {
  RedisEndpoint endpoint;
  endpoint.host = host;
  endpoint.port = port;
  return endpoint;
}

const RedisEndpoint kAsked = Tcp("10.0.0.9", 7009);

TEST(KeySlotTest, IsCrc16XmodemModuloSlotCount) {
  EXPECT_EQ(KeySlot("123456789"), 0x31C3 % 16384);  // the specification's check value
  EXPECT_EQ(KeySlot("123456789"), 12739);
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot(""), 0);
  EXPECT_NE(KeySlot(std::string("a\0b", 3)), KeySlot("a"));  // NUL is hashed, not an end
}

TEST(KeySlotTest, HashesTheTagAlone) {
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("{user1000}.followers"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("user1000"), 3443);
  // Only the first '{' and the first '}' after it count.
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), KeySlot("bar"));
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
  EXPECT_EQ(KeySlot("{bar"), 4015);
  // An empty tag, or none closed, tags nothing: the whole key is hashed.
  EXPECT_EQ(KeySlot("foo{}{bar}"), 8363);
  EXPECT_NE(KeySlot("foo{}{bar}"), KeySlot("bar"));
  EXPECT_NE(KeySlot("foo{bar"), KeySlot("bar"));
}

TEST(RedisSlotMapTest, MapsEachRangeToItsMaster) {
  auto map = RedisSlotMap::Parse(
      Array({Range(0, 5460, "127.0.0.1", 7000), Range(5461, 10922, "127.0.0.1", 7001),
             Range(10923, 16383, "127.0.0.1", 7002)}),
      kAsked);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->ToString(),
            "0-5460 127.0.0.1:7000\n5461-10922 127.0.0.1:7001\n10923-16383 127.0.0.1:7002\n");
  ASSERT_NE(map->Find(5461), nullptr);
  EXPECT_EQ(*map->Find(5461), Tcp("127.0.0.1", 7001));
  EXPECT_EQ(map->masters().size(), 3u);
}

TEST(RedisSlotMapTest, KeepsGapsAndSplitRangesAndUnknownHosts) {
  // A master with two ranges, slots nobody serves, a master that does not
  // know its address ("": the node that was asked) and the old reply form
  // [host, port] without an id.
  RedisReply old_form = Array({Int(300), Int(399), Array({Str("host-b"), Int(7001)})});
  auto map =
      RedisSlotMap::Parse(Array({Range(0, 99, "host-a", 7000), Range(200, 299, "host-a", 7000),
                                 old_form, Range(16383, 16383, "", 7002)}),
                          kAsked);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->ToString(),
            "0-99 host-a:7000\n200-299 host-a:7000\n300-399 host-b:7001\n"
            "16383-16383 10.0.0.9:7002\n");
  EXPECT_EQ(map->Find(100), nullptr);
  EXPECT_EQ(map->masters().size(), 3u);
}

TEST(RedisSlotMapTest, SetMovesOneSlot) {
  auto map = RedisSlotMap::Parse(Array({Range(0, 16383, "a", 1)}), kAsked);
  ASSERT_TRUE(map.ok()) << map.status();
  map->Set(3999, Tcp("b", 2));
  EXPECT_EQ(map->ToString(), "0-3998 a:1\n3999-3999 b:2\n4000-16383 a:1\n");
  map->Set(16384, Tcp("c", 3));  // out of range: ignored
  EXPECT_EQ(map->masters().size(), 2u);
}

TEST(RedisSlotMapTest, RejectsMalformedRepliesNamingTheRange) {
  const auto error = [](const RedisReply& reply) {
    auto map = RedisSlotMap::Parse(reply, kAsked);
    EXPECT_EQ(map.status().code(), absl::StatusCode::kInvalidArgument) << map.status();
    return std::string(map.status().message());
  };
  EXPECT_EQ(error(Str("nope")), "CLUSTER SLOTS reply is not an array");
  const RedisReply good = Range(0, 10, "a", 1);
  EXPECT_EQ(error(Array({good, Array({Int(11), Int(20)})})),
            "CLUSTER SLOTS reply from 10.0.0.9:7009: range 1 is not [start, end, master, ...]");
  EXPECT_EQ(error(Array({Range(20, 10, "a", 1)})),
            "CLUSTER SLOTS reply from 10.0.0.9:7009: range 0 has no valid slot range");
  EXPECT_EQ(error(Array({Range(0, 16384, "a", 1)})),
            "CLUSTER SLOTS reply from 10.0.0.9:7009: range 0 has no valid slot range");
  EXPECT_EQ(error(Array({Array({Int(0), Int(1), Array({Str("a"), Str("7000")})})})),
            "CLUSTER SLOTS reply from 10.0.0.9:7009: range 0 has no master [host, port, ...]");
  EXPECT_EQ(error(Array({Range(0, 1, "a", 70000)})),
            "CLUSTER SLOTS reply from 10.0.0.9:7009: range 0 has a master without host or "
            "valid port");
}

TEST(RedirectTest, ParsesMovedAndAsk) {
  auto moved = ParseRedirect("MOVED 3999 127.0.0.1:6381", kAsked);
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->kind, RedisRedirect::Kind::kMoved);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->endpoint, Tcp("127.0.0.1", 6381));

  auto ask = ParseRedirect("ASK 3999 127.0.0.1:6381", kAsked);
  ASSERT_TRUE(ask.has_value());
  EXPECT_EQ(ask->kind, RedisRedirect::Kind::kAsk);
  EXPECT_EQ(ask->slot, 3999);
  EXPECT_EQ(ask->endpoint.ToString(), "127.0.0.1:6381");

  // An unknown endpoint means the asked node's host, with the port given.
  auto same_host = ParseRedirect("MOVED 0 :6380", kAsked);
  ASSERT_TRUE(same_host.has_value());
  EXPECT_EQ(same_host->endpoint, Tcp("10.0.0.9", 6380));

  auto ipv6 = ParseRedirect("ASK 16383 ::1:6379", kAsked);
  ASSERT_TRUE(ipv6.has_value());
  EXPECT_EQ(ipv6->endpoint.ToString(), "[::1]:6379");
}

TEST(RedirectTest, OtherAndMalformedErrorsAreNotRedirects) {
  for (const char* error :
       {"ERR unknown command", "MOVED", "MOVED 3999", "MOVED 3999 127.0.0.1:6381 extra",
        "MOVED x 127.0.0.1:6381", "MOVED -1 127.0.0.1:6381", "MOVED 16384 127.0.0.1:6381",
        "MOVED 3999 127.0.0.1", "MOVED 3999 127.0.0.1:0", "MOVED 3999 127.0.0.1:65536",
        "MOVED 3999 127.0.0.1:port", "moved 3999 127.0.0.1:6381", "ASKING 1 a:1", ""}) {
    EXPECT_FALSE(ParseRedirect(error, kAsked).has_value()) << error;
  }
  // A Unix-socket node cannot say "the same host".
  RedisEndpoint unix_node;
  unix_node.unix_path = "/tmp/redis.sock";
  EXPECT_FALSE(ParseRedirect("MOVED 1 :6380", unix_node).has_value());
}

}  // namespace
}  // namespace kiln
