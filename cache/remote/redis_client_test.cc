// The client against real redis-server processes (tests/redis_fixture.h):
// a standalone server on a Unix socket, and a three-master cluster.
#include "cache/remote/redis_client.h"

#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cache/remote/redis_cluster.h"
#include "gtest/gtest.h"
#include "tests/redis_fixture.h"

namespace kiln {
namespace {

using Args = std::vector<std::string>;

std::unique_ptr<RedisClient> ClientFor(const std::string& url, RedisClient::Options options = {}) {
  auto seeds = ParseRedisUrl(url);
  EXPECT_TRUE(seeds.ok()) << seeds.status();
  options.seeds = seeds.value_or(std::vector<RedisEndpoint>());
  auto client = RedisClient::Create(std::move(options));
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

std::unique_ptr<RedisServer> StartServer(RedisServer::Options options = {}) {
  auto server = RedisServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::unique_ptr<RedisCluster> StartCluster() {
  auto cluster = RedisCluster::Start(3);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? *std::move(cluster) : nullptr;
}

// The string a GET answered, "(nil)", or the error.
std::string Get(RedisClient& client, const std::string& key) {
  auto reply = client.Command({"GET", key});
  if (!reply.ok()) return reply.status().ToString();
  if (reply->type == RedisReply::Type::kNil) return "(nil)";
  return reply->str;
}

absl::Status Set(RedisClient& client, const std::string& key, const std::string& value) {
  return client.Command({"SET", key, value}).status();
}

// Which node serves each slot, from each node's own line of CLUSTER NODES
// ("<id> <address> myself,master - 0 0 1 connected 0-5460 [93->-id]").
std::vector<int> NodeOfSlot(RedisCluster& cluster) {
  std::vector<int> node_of_slot(kRedisClusterSlots, -1);
  for (int i = 0; i < cluster.size(); ++i) {
    auto nodes = cluster.node(i).Cli({"CLUSTER", "NODES"});
    EXPECT_TRUE(nodes.ok()) << nodes.status();
    for (absl::string_view line : absl::StrSplit(nodes.value_or(""), '\n')) {
      const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
      if (fields.size() < 9 || !absl::StrContains(fields[2], "myself")) continue;
      for (size_t f = 8; f < fields.size(); ++f) {
        const std::vector<absl::string_view> range = absl::StrSplit(fields[f], '-');
        int first = -1, last = -1;
        if (!absl::SimpleAtoi(range[0], &first)) continue;  // "[93->-id]": a migration
        if (range.size() < 2 || !absl::SimpleAtoi(range[1], &last)) last = first;
        for (int slot = first; slot <= last && slot < kRedisClusterSlots; ++slot) {
          node_of_slot[slot] = i;
        }
      }
    }
  }
  return node_of_slot;
}

std::string NodeId(RedisServer& node) { return node.Cli({"CLUSTER", "MYID"}).value_or("?"); }

TEST(ParseRedisUrlTest, AcceptsTcpSeedsAndUnixSockets) {
  auto one = ParseRedisUrl("redis://127.0.0.1:6379");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].host, "127.0.0.1");
  EXPECT_EQ((*one)[0].port, 6379);

  auto seeds = ParseRedisUrl("redis://redis-a:7000,redis://10.0.0.2:7001,redis://[::1]:7002");
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  ASSERT_EQ(seeds->size(), 3u);
  EXPECT_EQ((*seeds)[0].ToString(), "redis-a:7000");
  EXPECT_EQ((*seeds)[1].ToString(), "10.0.0.2:7001");
  EXPECT_EQ((*seeds)[2].host, "::1");
  EXPECT_EQ((*seeds)[2].ToString(), "[::1]:7002");

  auto unix_socket = ParseRedisUrl("unix:///run/redis/redis.sock");
  ASSERT_TRUE(unix_socket.ok()) << unix_socket.status();
  ASSERT_EQ(unix_socket->size(), 1u);
  EXPECT_EQ((*unix_socket)[0].unix_path, "/run/redis/redis.sock");
  EXPECT_EQ((*unix_socket)[0].ToString(), "unix:///run/redis/redis.sock");
}

TEST(ParseRedisUrlTest, NamesThePartThatDoesNotParse) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "redis URL is empty"},
      {"http://h:1",
       "redis URL \"http://h:1\": \"http://h:1\" does not start with redis:// or "
       "unix://"},
      {"redis://h", "redis URL \"redis://h\": \"redis://h\" has no :PORT"},
      {"redis://:6379", "redis URL \"redis://:6379\": \"redis://:6379\" has no host"},
      {"redis://h:0", "redis URL \"redis://h:0\": port \"0\" is not a number in 1-65535"},
      {"redis://h:65536",
       "redis URL \"redis://h:65536\": port \"65536\" is not a number in "
       "1-65535"},
      {"redis://h:6379/0",
       "redis URL \"redis://h:6379/0\": port \"6379/0\" is not a number in "
       "1-65535"},
      {"redis://a:1,b:2",
       "redis URL \"redis://a:1,b:2\": \"b:2\" does not start with redis:// "
       "or unix://"},
      {"redis://a:1,",
       "redis URL \"redis://a:1,\": \"\" does not start with redis:// or "
       "unix://"},
      {"redis://[::1:6379", "redis URL \"redis://[::1:6379\": host \"[::1\" has no closing ]"},
      {"unix://redis.sock",
       "redis URL \"unix://redis.sock\": the socket path \"redis.sock\" is "
       "not absolute"},
  };
  for (const auto& [url, message] : cases) {
    auto parsed = ParseRedisUrl(url);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << url;
    EXPECT_EQ(parsed.status().message(), message) << url;
  }
}

TEST(RedisClientTest, CreateWantsSeeds) {
  auto client = RedisClient::Create({});
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client.status().message(), "redis client without seeds");
}

TEST(RedisClientTest, SetsAndGetsBinarySafeValues) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ClientFor(server->url());
  ASSERT_NE(client, nullptr);

  const std::string key("key\0with\0nuls", 13);
  const std::string value("\0value\r\n\0", 9);
  ASSERT_TRUE(Set(*client, key, value).ok());
  EXPECT_EQ(Get(*client, key), value);
  EXPECT_FALSE(client->cluster());

  std::string megabyte(1 << 20, '\0');
  std::mt19937 random(15);
  for (char& byte : megabyte) byte = static_cast<char>(random());
  ASSERT_TRUE(Set(*client, "big", megabyte).ok());
  EXPECT_EQ(Get(*client, "big"), megabyte);

  EXPECT_EQ(Get(*client, "missing"), "(nil)");
  auto pushed = client->Command({"RPUSH", "list", "a", "b"});
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->type, RedisReply::Type::kInteger);
  EXPECT_EQ(pushed->integer, 2);
  auto range = client->Command({"LRANGE", "list", "0", "-1"});
  ASSERT_TRUE(range.ok()) << range.status();
  ASSERT_EQ(range->type, RedisReply::Type::kArray);
  ASSERT_EQ(range->elements.size(), 2u);
  EXPECT_EQ(range->elements[1].str, "b");

  // Error replies are statuses naming the node.
  auto wrong_type = client->Command({"INCR", "list"});
  EXPECT_EQ(wrong_type.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(wrong_type.status().message(),
            absl::StrCat("redis ", server->endpoint().ToString(),
                         ": WRONGTYPE Operation against a key holding the wrong kind of value"));
  EXPECT_EQ(client->Command({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RedisClientTest, AuthenticatesWithThePassword) {
  RedisServer::Options options;
  options.password = "open sesame";
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);

  RedisClient::Options right;
  right.password = "open sesame";
  auto client = ClientFor(server->url(), right);
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(Set(*client, "k", "v").ok());

  right.username = "default";  // AUTH user password (ACLs)
  auto with_user = ClientFor(server->url(), right);
  ASSERT_NE(with_user, nullptr);
  EXPECT_EQ(Get(*with_user, "k"), "v");

  RedisClient::Options wrong;
  wrong.password = "open barley";
  auto wrong_client = ClientFor(server->url(), wrong);
  ASSERT_NE(wrong_client, nullptr);
  auto refused = wrong_client->Command({"GET", "k"});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "WRONGPASS")) << refused.status();
  // Refusing a password is not being down: no backoff, the same answer.
  EXPECT_EQ(wrong_client->Command({"GET", "k"}).status().code(),
            absl::StatusCode::kPermissionDenied);

  auto anonymous = ClientFor(server->url());
  ASSERT_NE(anonymous, nullptr);
  auto no_auth = anonymous->Command({"GET", "k"});
  EXPECT_EQ(no_auth.status().code(), absl::StatusCode::kPermissionDenied) << no_auth.status();
  EXPECT_TRUE(absl::StrContains(no_auth.status().message(), "NOAUTH")) << no_auth.status();
}

TEST(RedisClientTest, KilledServerIsUnavailableUntilBackAndBackoffPassed) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RedisClient::Options options;
  options.min_backoff = absl::Seconds(2);  // far longer than a restart takes
  options.max_backoff = absl::Seconds(4);
  auto client = ClientFor(server->url(), options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(Set(*client, "k", "kept").ok());

  server->Kill();
  const absl::Time start = absl::Now();
  auto lost = client->Command({"GET", "k"});  // on the old connection
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  auto refused = client->Command({"GET", "k"});  // a new connection is refused
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "tried again in 2s"))
      << refused.status();
  const absl::Time refused_at = absl::Now();

  ASSERT_TRUE(server->Restart().ok());
  auto backing_off = client->Command({"GET", "k"});  // up again, but not tried yet
  EXPECT_EQ(backing_off.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(
      absl::StrContains(backing_off.status().message(),
                        absl::StrCat("redis ", server->endpoint().ToString(), " is unreachable: ")))
      << backing_off.status();
  EXPECT_TRUE(absl::StrContains(backing_off.status().message(), "; tried again in "))
      << backing_off.status();

  absl::SleepFor(refused_at + options.min_backoff + absl::Milliseconds(100) - absl::Now());
  EXPECT_EQ(Get(*client, "k"), "kept");
}

TEST(RedisClientTest, SlowCommandIsDeadlineExceededThenBacksOffLikeADownNode) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RedisClient::Options options;
  options.timeout = absl::Milliseconds(100);
  auto client = ClientFor(server->url(), options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(Set(*client, "k", "v").ok());

  const absl::Time start = absl::Now();
  auto slow = client->Command({"DEBUG", "SLEEP", "0.5"});
  EXPECT_EQ(slow.status().code(), absl::StatusCode::kDeadlineExceeded) << slow.status();
  EXPECT_EQ(slow.status().message(), absl::StrCat("redis ", server->endpoint().ToString(),
                                                  " did not answer DEBUG within 100ms"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  // A slow node costs one timeout, not one per command: it backs off.
  auto during = client->Command({"GET", "k"});
  EXPECT_EQ(during.status().code(), absl::StatusCode::kUnavailable) << during.status();
  EXPECT_NE(during.status().message().find("did not answer DEBUG"), absl::string_view::npos);
  absl::SleepFor(absl::Milliseconds(600));  // Redis is single-threaded: let it wake
  EXPECT_EQ(Get(*client, "k"), "v");        // on a new connection, the backoff passed
}

// A value of `bytes` random bytes (incompressible, as an object is).
std::string RandomBytes(size_t bytes, unsigned seed) {
  std::string value(bytes, '\0');
  std::mt19937 random(seed);
  for (char& byte : value) byte = static_cast<char>(random());
  return value;
}

// Writes the large values: with appendfsync always, a SET of megabytes
// can outlast the default timeout.
RedisClient::Options Uncapped() {
  RedisClient::Options options;
  options.timeout = absl::Seconds(30);
  return options;
}

// GET of a value past max_reply_bytes (256 KiB) through `capped`: refused
// once the cap has arrived, and the next command works on a new
// connection. `server` serves the keys.
void ExpectReplyPastTheCapRefused(RedisClient& capped, RedisClient& uncapped,
                                  const std::string& node, RedisServer& server) {
  constexpr size_t kValueBytes = 64 << 20;
  // One hash tag: one master serves both keys in a cluster.
  ASSERT_TRUE(Set(uncapped, "{fleet}big", RandomBytes(kValueBytes, 7)).ok());
  ASSERT_TRUE(Set(uncapped, "{fleet}small", "fits").ok());
  const int64_t sent_before = server.Info("total_net_output_bytes").value_or(-1);
  auto big = capped.Command({"GET", "{fleet}big"});
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_EQ(big.status().message(),
            absl::StrCat("redis ", node,
                         ": the reply to GET is larger than the cap of 262144 bytes "
                         "(max_reply_bytes); not read further"));
  // Redis wrote what the socket buffers took before the client hung up
  // (megabytes over TCP): far from all.
  const int64_t sent = server.Info("total_net_output_bytes").value_or(-1) - sent_before;
  EXPECT_LT(sent, int64_t{kValueBytes} / 4);
  EXPECT_EQ(Get(capped, "{fleet}small"), "fits");
}

TEST(RedisClientTest, AReplyPastTheCapIsRefusedBeforeItIsReadWhole) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RedisClient::Options options;
  options.max_reply_bytes = 256 << 10;
  auto capped = ClientFor(server->url(), options);
  auto uncapped = ClientFor(server->url(), Uncapped());
  ASSERT_NE(capped, nullptr);
  ASSERT_NE(uncapped, nullptr);
  ExpectReplyPastTheCapRefused(*capped, *uncapped, server->endpoint().ToString(), *server);
}

TEST(RedisClusterClientTest, AReplyPastTheCapIsRefusedBeforeItIsReadWhole) {
  auto cluster = StartCluster();
  ASSERT_NE(cluster, nullptr);
  RedisClient::Options options;
  options.max_reply_bytes = 256 << 10;
  auto capped = ClientFor(cluster->url(), options);
  auto uncapped = ClientFor(cluster->url(), Uncapped());
  ASSERT_NE(capped, nullptr);
  ASSERT_NE(uncapped, nullptr);
  RedisServer& master = cluster->node(NodeOfSlot(*cluster)[KeySlot("{fleet}big")]);
  ExpectReplyPastTheCapRefused(*capped, *uncapped, master.endpoint().ToString(), master);
}

TEST(RedisClusterClientTest, SpreadsKeysOverEveryMaster) {
  auto cluster = StartCluster();
  ASSERT_NE(cluster, nullptr);
  auto client = ClientFor(cluster->url());
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(Set(*client, absl::StrCat("key-", i), absl::StrCat("value-", i)).ok()) << i;
  }
  EXPECT_TRUE(client->cluster());
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(Get(*client, absl::StrCat("key-", i)), absl::StrCat("value-", i));
  }
  int total = 0;
  for (int i = 0; i < cluster->size(); ++i) {
    auto size = cluster->node(i).Cli({"DBSIZE"});
    ASSERT_TRUE(size.ok()) << size.status();
    int keys = 0;
    ASSERT_TRUE(absl::SimpleAtoi(*size, &keys)) << *size;
    EXPECT_GT(keys, 0) << "node " << i;
    total += keys;
  }
  EXPECT_EQ(total, 200);
}

TEST(RedisClusterClientTest, FollowsMovedFromOneSeed) {
  auto cluster = StartCluster();
  ASSERT_NE(cluster, nullptr);
  auto client = ClientFor(cluster->node(0).url());  // the others are found
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(Set(*client, absl::StrCat("key-", i), "v").ok()) << i;
  }

  // Move the slot of "moved" to another master behind the client's back
  // (the resharding steps of the cluster specification): the client's
  // map still names the old one, which answers MOVED.
  const std::string key = "moved";
  ASSERT_TRUE(Set(*client, key, "here").ok());
  const int slot = KeySlot(key);
  const int from = NodeOfSlot(*cluster)[slot];
  const int to = (from + 1) % cluster->size();
  RedisServer& source = cluster->node(from);
  RedisServer& target = cluster->node(to);
  const std::string slot_text = absl::StrCat(slot);
  EXPECT_EQ(target.Cli({"CLUSTER", "SETSLOT", slot_text, "IMPORTING", NodeId(source)}).value_or(""),
            "OK");
  EXPECT_EQ(source.Cli({"CLUSTER", "SETSLOT", slot_text, "MIGRATING", NodeId(target)}).value_or(""),
            "OK");
  EXPECT_EQ(
      source
          .Cli({"MIGRATE", "127.0.0.1", absl::StrCat(target.port()), "", "0", "5000", "KEYS", key})
          .value_or(""),
      "OK");
  for (int i = 0; i < cluster->size(); ++i) {
    EXPECT_EQ(cluster->node(i)
                  .Cli({"CLUSTER", "SETSLOT", slot_text, "NODE", NodeId(target)})
                  .value_or(""),
              "OK");
  }

  EXPECT_EQ(Get(*client, key), "here");
  ASSERT_TRUE(Set(*client, key, "there").ok());
  EXPECT_EQ(target.Cli({"GET", key}).value_or(""), "there");
  // The old master refused the GET with MOVED (Redis counts it as rejected):
  // "cmdstat_get:calls=51,usec=...,rejected_calls=1,failed_calls=0".
  const std::string stats = source.Cli({"INFO", "commandstats"}).value_or("");
  const size_t get_stats = stats.find("cmdstat_get:");
  ASSERT_NE(get_stats, std::string::npos) << stats;
  EXPECT_TRUE(absl::StrContains(stats.substr(get_stats, stats.find('\n', get_stats) - get_stats),
                                ",rejected_calls=1,"))
      << stats;
  for (int i = 0; i < 50; ++i) EXPECT_EQ(Get(*client, absl::StrCat("key-", i)), "v");
}

TEST(RedisClusterClientTest, FollowsAskDuringAMigration) {
  auto cluster = StartCluster();
  ASSERT_NE(cluster, nullptr);
  auto client = ClientFor(cluster->url());
  ASSERT_NE(client, nullptr);
  // Two keys in one slot (one hash tag): one migrates, one stays.
  ASSERT_TRUE(Set(*client, "{ask}moves", "moved").ok());
  ASSERT_TRUE(Set(*client, "{ask}stays", "stayed").ok());

  const int slot = KeySlot("ask");
  const int from = NodeOfSlot(*cluster)[slot];
  RedisServer& source = cluster->node(from);
  RedisServer& target = cluster->node((from + 1) % cluster->size());
  const std::string slot_text = absl::StrCat(slot);
  EXPECT_EQ(target.Cli({"CLUSTER", "SETSLOT", slot_text, "IMPORTING", NodeId(source)}).value_or(""),
            "OK");
  EXPECT_EQ(source.Cli({"CLUSTER", "SETSLOT", slot_text, "MIGRATING", NodeId(target)}).value_or(""),
            "OK");
  EXPECT_EQ(source
                .Cli({"MIGRATE", "127.0.0.1", absl::StrCat(target.port()), "", "0", "5000", "KEYS",
                      "{ask}moves"})
                .value_or(""),
            "OK");
  // Without ASKING the target would answer MOVED back to the source.
  EXPECT_TRUE(absl::StartsWith(target.Cli({"GET", "{ask}moves"}).value_or(""), "MOVED"));

  EXPECT_EQ(Get(*client, "{ask}moves"), "moved");    // source: ASK -> target
  EXPECT_EQ(Get(*client, "{ask}stays"), "stayed");   // still the source's
  EXPECT_EQ(Get(*client, "{ask}missing"), "(nil)");  // ASK -> target, which has none
  EXPECT_EQ(Get(*client, "{ask}moves"), "moved");    // ASK again: the slot is not remapped
}

TEST(RedisClusterClientTest, RestartedMasterIsUnavailableThenServesItsSlotsAgain) {
  auto cluster = StartCluster();
  ASSERT_NE(cluster, nullptr);
  RedisClient::Options options;
  options.min_backoff = absl::Milliseconds(200);
  options.max_backoff = absl::Seconds(1);
  auto client = ClientFor(cluster->url(), options);
  ASSERT_NE(client, nullptr);
  const std::vector<int> node_of_slot = NodeOfSlot(*cluster);
  std::vector<std::string> keys_of[3];
  for (int i = 0; i < 100; ++i) {
    const std::string key = absl::StrCat("key-", i);
    ASSERT_TRUE(Set(*client, key, absl::StrCat("value-", i)).ok()) << i;
    ASSERT_GE(node_of_slot[KeySlot(key)], 0) << key;
    keys_of[node_of_slot[KeySlot(key)]].push_back(key);
  }
  ASSERT_FALSE(keys_of[1].empty());
  ASSERT_FALSE(keys_of[0].empty());

  cluster->node(1).Kill();
  for (int attempt = 0; attempt < 3; ++attempt) {
    const absl::Time start = absl::Now();
    auto down = client->Command({"GET", keys_of[1][0]});
    EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
    EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  }
  EXPECT_EQ(Get(*client, keys_of[0][0]), "value-" + keys_of[0][0].substr(4));  // others serve

  ASSERT_TRUE(cluster->node(1).Restart().ok());
  ASSERT_TRUE(cluster->WaitUntilOk().ok());
  // Back once its backoff has passed (and it has left CLUSTERDOWN).
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::string value = Get(*client, keys_of[1][0]);
  while (value != "value-" + keys_of[1][0].substr(4) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
    value = Get(*client, keys_of[1][0]);
  }
  EXPECT_EQ(value, "value-" + keys_of[1][0].substr(4));
  for (const std::string& key : keys_of[1]) EXPECT_EQ(Get(*client, key), "value-" + key.substr(4));
}

TEST(RedisClusterClientTest, ThreadsShareTheClient) {
  auto cluster = StartCluster();
  ASSERT_NE(cluster, nullptr);
  auto client = ClientFor(cluster->url());
  ASSERT_NE(client, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&client, t] {
      for (int i = 0; i < 50; ++i) {
        const std::string key = absl::StrCat("thread-", t, "-", i);
        EXPECT_TRUE(Set(*client, key, key).ok());
        EXPECT_EQ(Get(*client, key), key);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace
}  // namespace kiln
