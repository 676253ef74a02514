// The fleet tier against a real redis-server on a Unix socket
// (tests/redis_fixture.h). Each tier has its own RedisClient: a machine.
#include "cache/remote/remote_tier.h"

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/redis_fixture.h"

namespace kiln {
namespace {

constexpr char kKey[] = "0123abcd";
constexpr char kObject[] =
    "\x7f"
    "ELF, compiled once";

kiln::v1::ArtifactMetadata MetadataFor(const std::string& key, const std::string& object) {
  kiln::v1::ArtifactMetadata metadata;
  metadata.set_key(key);
  metadata.set_digest(Sha256Hex(object));
  metadata.set_object_bytes(static_cast<int64_t>(object.size()));
  metadata.set_graph_name("matmul");
  metadata.set_compiler("worker");
  return metadata;
}

// Polls `condition` until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

class RemoteTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisServer::Start({});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto pair = GenerateSigningKeyPair();
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = *std::move(pair);
  }

  std::unique_ptr<RedisClient> Client(absl::Duration timeout = absl::Milliseconds(200)) {
    RedisClient::Options options;
    options.seeds = {server_->endpoint()};
    options.timeout = timeout;
    options.min_backoff = absl::Milliseconds(20);
    options.max_backoff = absl::Milliseconds(100);
    auto client = RedisClient::Create(std::move(options));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // A writer signs with pair_'s private key; a reader only trusts its public key.
  std::unique_ptr<RemoteTier> Tier(bool writer = true, RemoteTier::Options options = {}) {
    auto keys = writer ? SigningKeys::FromPem(pair_.private_key, "")
                       : SigningKeys::FromPem("", pair_.public_key);
    EXPECT_TRUE(keys.ok()) << keys.status();
    options.url = server_->url();
    return std::make_unique<RemoteTier>(Client(), *std::move(keys), options);
  }

  std::unique_ptr<RedisServer> server_;
  KeyPairPem pair_;
};

TEST_F(RemoteTierTest, EntryRoundTripsAndDamagedOnesAreRefused) {
  auto writer = Tier();
  auto reader = Tier(/*writer=*/false);
  const kiln::v1::ArtifactMetadata metadata = MetadataFor(kKey, kObject);
  auto value = writer->EncodeEntry(metadata, kObject);
  ASSERT_TRUE(value.ok()) << value.status();
  auto fetched = reader->DecodeEntry(kKey, *value);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->metadata.ShortDebugString(), metadata.ShortDebugString());
  EXPECT_EQ(fetched->object, kObject);

  // Each damage of `value`, and what DecodeEntry says of it.
  auto damaged = [&](const std::function<void(kiln::v1::RemoteEntry&)>& damage) {
    kiln::v1::RemoteEntry entry;
    EXPECT_TRUE(entry.ParseFromString(*value));
    damage(entry);
    return entry.SerializeAsString();
  };
  auto expect_refused = [&](const std::string& key, const std::string& bad, absl::StatusCode code,
                            const std::string& message) {
    absl::Status status = reader->DecodeEntry(key, bad).status();
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), message)) << status;
  };
  expect_refused(kKey, "\xff\xff not a proto", absl::StatusCode::kDataLoss, "not a Kiln entry");
  // A field RemoteEntry does not have (field 5, a varint): parsed, junk
  // would cost tens of bytes of unknown fields per two bytes.
  expect_refused(kKey, *value + std::string("\x28\x01"), absl::StatusCode::kDataLoss,
                 "not a Kiln entry");
  expect_refused(kKey,
                 damaged([](kiln::v1::RemoteEntry& entry) { (*entry.mutable_object())[3] ^= 1; }),
                 absl::StatusCode::kDataLoss, "does not match the digest");
  expect_refused("another-key", *value, absl::StatusCode::kDataLoss,
                 absl::StrCat("signed as the entry of key ", kKey));
  expect_refused(
      kKey, damaged([](kiln::v1::RemoteEntry& entry) { (*entry.mutable_signature())[0] ^= 1; }),
      absl::StatusCode::kPermissionDenied, "bad signature");
  auto stranger_pair = GenerateSigningKeyPair();
  ASSERT_TRUE(stranger_pair.ok()) << stranger_pair.status();
  auto stranger_keys = SigningKeys::FromPem(stranger_pair->private_key, "");
  ASSERT_TRUE(stranger_keys.ok()) << stranger_keys.status();
  RemoteTier stranger(Client(), *std::move(stranger_keys), {});
  auto forged = stranger.EncodeEntry(metadata, kObject);
  ASSERT_TRUE(forged.ok()) << forged.status();
  expect_refused(kKey, *forged, absl::StatusCode::kPermissionDenied, "not trusted");

  // A forged entry in Redis is refused and compiled over, under a lease
  // (one machine overwrites it while the others wait).
  auto redis = Client();
  ASSERT_TRUE(redis->Command({"SET", writer->EntryKey(kKey), *forged}).ok());
  RemoteTier::Claim claim = writer->FetchOrLease(kKey);
  EXPECT_FALSE(claim.entry.has_value());
  EXPECT_NE(claim.lease, nullptr);
  EXPECT_EQ(writer->stats().refused, 1);
  EXPECT_EQ(writer->stats().misses, 1);
  writer->PublishBehind(metadata, kObject, std::move(claim.lease));
  writer->Flush();
  RemoteTier::Claim again = reader->FetchOrLease(kKey);
  ASSERT_TRUE(again.entry.has_value());
  EXPECT_EQ(again.entry->object, kObject);
}

TEST_F(RemoteTierTest, WaiterGetsTheLeaseHoldersPublish) {
  auto holder = Tier();
  auto waiter = Tier();
  RemoteTier::Claim first = holder->FetchOrLease(kKey);
  EXPECT_FALSE(first.entry.has_value());
  ASSERT_NE(first.lease, nullptr);

  RemoteTier::Claim second;
  std::thread thread([&] { second = waiter->FetchOrLease(kKey); });
  EXPECT_TRUE(WaitFor([&] { return waiter->stats().lease_waits == 1; }));
  holder->PublishBehind(MetadataFor(kKey, kObject), kObject, std::move(first.lease));
  thread.join();

  ASSERT_TRUE(second.entry.has_value());
  EXPECT_EQ(second.entry->object, kObject);
  EXPECT_EQ(second.lease, nullptr);
  const RemoteTier::Stats stats = waiter->stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 0);
  EXPECT_EQ(stats.lease_waits, 1);
  EXPECT_EQ(stats.lease_takeovers, 0);
  holder->Flush();
  EXPECT_EQ(holder->stats().publishes, 1);
  EXPECT_EQ(holder->stats().misses, 1);
  EXPECT_EQ(server_->Cli({"EXISTS", holder->LeaseKey(kKey)}).value_or(""), "0");
}

TEST_F(RemoteTierTest, RacingMachinesCompileOnce) {
  constexpr int kTiers = 3, kThreadsPerTier = 4, kThreads = kTiers * kThreadsPerTier;
  std::vector<std::unique_ptr<RemoteTier>> tiers;
  for (int i = 0; i < kTiers; ++i) tiers.push_back(Tier());
  absl::Notification start;
  std::atomic<int> leases{0}, entries{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, tier = tiers[t % kTiers].get()] {
      start.WaitForNotification();
      RemoteTier::Claim claim = tier->FetchOrLease(kKey);
      if (claim.lease != nullptr) {
        ++leases;
        tier->PublishBehind(MetadataFor(kKey, kObject), kObject, std::move(claim.lease));
      } else if (claim.entry.has_value() && claim.entry->object == kObject) {
        ++entries;
      }
    });
  }
  start.Notify();
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(leases, 1);
  EXPECT_EQ(entries, kThreads - 1);
  RemoteTier::Stats sum;
  for (auto& tier : tiers) {
    tier->Flush();
    const RemoteTier::Stats stats = tier->stats();
    sum.hits += stats.hits;
    sum.misses += stats.misses;
    sum.publishes += stats.publishes;
    sum.errors += stats.errors;
    sum.refused += stats.refused;
    sum.lease_takeovers += stats.lease_takeovers;
  }
  EXPECT_EQ(sum.hits, kThreads - 1);
  EXPECT_EQ(sum.misses, 1);
  EXPECT_EQ(sum.publishes, 1);
  EXPECT_EQ(sum.errors, 0);
  EXPECT_EQ(sum.refused, 0);
  EXPECT_EQ(sum.lease_takeovers, 0);
}

TEST_F(RemoteTierTest, WaiterTakesOverFromAHolderThatGoesAway) {
  auto holder = Tier();
  auto waiter = Tier();
  RemoteTier::Claim first = holder->FetchOrLease(kKey);
  ASSERT_NE(first.lease, nullptr);
  RemoteTier::Claim second;
  std::thread thread([&] { second = waiter->FetchOrLease(kKey); });
  EXPECT_TRUE(WaitFor([&] { return waiter->stats().lease_waits == 1; }));
  first.lease.reset();  // its compile failed, and its kilnd shut down
  holder.reset();
  thread.join();

  EXPECT_FALSE(second.entry.has_value());
  EXPECT_NE(second.lease, nullptr);
  EXPECT_EQ(waiter->stats().lease_takeovers, 1);
  EXPECT_EQ(waiter->stats().misses, 1);
}

TEST_F(RemoteTierTest, WaiterTakesOverALeaseThatLapses) {
  auto waiter = Tier();
  auto redis = Client();
  // A holder that died: its lease is never renewed nor released.
  ASSERT_TRUE(redis->Command({"SET", waiter->LeaseKey(kKey), "dead-holder", "PX", "300"}).ok());
  RemoteTier::Claim claim = waiter->FetchOrLease(kKey);
  EXPECT_FALSE(claim.entry.has_value());
  EXPECT_NE(claim.lease, nullptr);
  EXPECT_EQ(waiter->stats().lease_waits, 1);
  EXPECT_EQ(waiter->stats().lease_takeovers, 1);
  const std::string holder = server_->Cli({"GET", waiter->LeaseKey(kKey)}).value_or("");
  EXPECT_NE(holder, "dead-holder");
  EXPECT_FALSE(holder.empty());
}

// A value larger than max_entry_bytes is refused without being sent, and
// a larger entry of this machine's is not published.
TEST_F(RemoteTierTest, AValueOverTheCapIsRefusedWithoutBeingSent) {
  RemoteTier::Options options;
  options.max_entry_bytes = 1 << 20;
  auto tier = Tier(/*writer=*/true, options);
  auto redis = Client(absl::Seconds(30));
  ASSERT_TRUE(redis->Command({"SET", tier->EntryKey(kKey), std::string(8 << 20, 'x')}).ok());
  const int64_t sent_before = server_->Info("total_net_output_bytes").value_or(-1);

  testing::internal::CaptureStderr();
  RemoteTier::Claim claim = tier->FetchOrLease(kKey);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(claim.entry.has_value());
  EXPECT_NE(claim.lease, nullptr) << "compiled here, to overwrite it";
  EXPECT_LT(server_->Info("total_net_output_bytes").value_or(-1) - sent_before, 64 << 10);
  EXPECT_EQ(server_->Info("cmdstat_get", "calls").value_or(-1), 0);
  EXPECT_TRUE(absl::StrContains(log,
                                "refused the fleet tier's entry for 0123abcd: it is 8388608 bytes, "
                                "over the cap of 1048576 (--remote_max_entry_bytes); not fetched"))
      << log;
  EXPECT_EQ(tier->stats().refused, 1);
  EXPECT_EQ(tier->stats().bytes_read, 0);

  const std::string large(2 << 20, 'y');
  tier->PublishBehind(MetadataFor(kKey, large), large, std::move(claim.lease));
  tier->Flush();
  EXPECT_EQ(tier->stats().publishes, 0);
  EXPECT_EQ(tier->stats().publishes_dropped, 1);
  EXPECT_EQ(server_->Cli({"STRLEN", tier->EntryKey(kKey)}).value_or(""), "8388608");
  EXPECT_EQ(server_->Cli({"EXISTS", tier->LeaseKey(kKey)}).value_or(""), "0") << "released";
}

// While another machine compiles over a refused value, the waiter polls
// without fetching that value again; the holder's publish is fetched.
TEST_F(RemoteTierTest, ARefusedValueIsFetchedOncePerWait) {
  auto stranger_pair = GenerateSigningKeyPair();
  ASSERT_TRUE(stranger_pair.ok()) << stranger_pair.status();
  auto stranger_keys = SigningKeys::FromPem(stranger_pair->private_key, "");
  ASSERT_TRUE(stranger_keys.ok()) << stranger_keys.status();
  RemoteTier stranger(Client(), *std::move(stranger_keys), {});
  const std::string padded(1 << 20, 'z');
  auto forged = stranger.EncodeEntry(MetadataFor(kKey, padded), padded);
  ASSERT_TRUE(forged.ok()) << forged.status();
  auto redis = Client(absl::Seconds(30));
  ASSERT_TRUE(redis->Command({"SET", stranger.EntryKey(kKey), *forged}).ok());

  auto holder = Tier();
  RemoteTier::Claim held = holder->FetchOrLease(kKey);  // refuses it, and compiles over it
  ASSERT_NE(held.lease, nullptr);
  ASSERT_EQ(server_->Cli({"CONFIG", "RESETSTAT"}).value_or(""), "OK");

  auto waiter = Tier();
  RemoteTier::Claim claim;
  std::thread thread([&] { claim = waiter->FetchOrLease(kKey); });
  EXPECT_TRUE(WaitFor([&] { return waiter->stats().lease_waits == 1; }));
  absl::SleepFor(absl::Seconds(1));  // a dozen looks
  holder->PublishBehind(MetadataFor(kKey, kObject), kObject, std::move(held.lease));
  thread.join();

  ASSERT_TRUE(claim.entry.has_value());
  EXPECT_EQ(claim.entry->object, kObject);
  const RemoteTier::Stats stats = waiter->stats();
  EXPECT_EQ(stats.refused, 1);
  EXPECT_EQ(stats.hits, 1);
  // The forged value (a MiB) went out once; the holder's entry is small.
  const int64_t sent = server_->Info("total_net_output_bytes").value_or(-1);
  EXPECT_GT(sent, int64_t{1} << 20);
  EXPECT_LT(sent, int64_t{2} << 20);
}

// A lease without a TTL has no holder that would ever release it: a
// writer takes it over at once, and a reader does not wait on it.
TEST_F(RemoteTierTest, ALeaseWithoutATtlIsTakenOverAtOnce) {
  RemoteTier::Options options;
  options.max_lease_wait = absl::Seconds(3);
  auto writer = Tier(/*writer=*/true, options);
  auto reader = Tier(/*writer=*/false, options);
  auto redis = Client();
  ASSERT_TRUE(redis->Command({"SET", writer->LeaseKey(kKey), "planted"}).ok());
  ASSERT_TRUE(redis->Command({"SET", writer->LeaseKey("another"), "planted"}).ok());

  RemoteTier::Claim read = reader->FetchOrLease("another");
  EXPECT_EQ(read.lease, nullptr);
  EXPECT_EQ(reader->stats().lease_waits, 0);
  EXPECT_EQ(reader->stats().misses, 1);

  RemoteTier::Claim claim = writer->FetchOrLease(kKey);
  ASSERT_NE(claim.lease, nullptr);
  EXPECT_EQ(writer->stats().lease_waits, 0);
  EXPECT_EQ(writer->stats().lease_takeovers, 1);
  EXPECT_NE(server_->Cli({"GET", writer->LeaseKey(kKey)}).value_or("planted"), "planted");
  int64_t ttl = 0;
  ASSERT_TRUE(absl::SimpleAtoi(server_->Cli({"PTTL", writer->LeaseKey(kKey)}).value_or(""), &ttl));
  EXPECT_GT(ttl, 0) << "ours now, with a TTL";
  EXPECT_LE(ttl, absl::ToInt64Milliseconds(options.lease_ttl));
}

TEST_F(RemoteTierTest, RedisDownIsALocalCompileUntilItIsBack) {
  auto tier = Tier();
  ASSERT_NE(tier->FetchOrLease("warm").lease, nullptr);  // connected once
  server_->Kill();

  const absl::Time start = absl::Now();
  RemoteTier::Claim claim = tier->FetchOrLease(kKey);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_FALSE(claim.entry.has_value());
  EXPECT_EQ(claim.lease, nullptr);
  tier->PublishBehind(MetadataFor(kKey, kObject), kObject, nullptr);
  tier->Flush();
  RemoteTier::Stats stats = tier->stats();
  EXPECT_GT(stats.errors, 0);
  EXPECT_FALSE(stats.available);
  EXPECT_EQ(stats.publishes_dropped, 1);
  EXPECT_EQ(stats.publishes, 0);

  ASSERT_TRUE(server_->Restart().ok());
  // Back once the client's backoff has passed.
  EXPECT_TRUE(WaitFor([&] {
    claim = tier->FetchOrLease(kKey);
    return claim.lease != nullptr;
  }));
  EXPECT_TRUE(tier->stats().available);
  tier->PublishBehind(MetadataFor(kKey, kObject), kObject, std::move(claim.lease));
  tier->Flush();
  EXPECT_EQ(tier->stats().publishes, 1);
  RemoteTier::Claim again = Tier()->FetchOrLease(kKey);
  ASSERT_TRUE(again.entry.has_value());
  EXPECT_EQ(again.entry->object, kObject);
}

TEST_F(RemoteTierTest, ReaderNeverLeasesNorWrites) {
  auto reader = Tier(/*writer=*/false);
  EXPECT_FALSE(reader->can_publish());
  RemoteTier::Claim claim = reader->FetchOrLease(kKey);
  EXPECT_FALSE(claim.entry.has_value());
  EXPECT_EQ(claim.lease, nullptr);
  reader->PublishBehind(MetadataFor(kKey, kObject), kObject, nullptr);
  reader->Flush();

  const RemoteTier::Stats stats = reader->stats();
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.lease_waits, 0);
  EXPECT_EQ(stats.publishes, 0);
  EXPECT_EQ(stats.publishes_dropped, 0);
  EXPECT_EQ(stats.errors, 0);
  EXPECT_EQ(server_->Cli({"DBSIZE"}).value_or(""), "0");  // neither entry nor lease
}

}  // namespace
}  // namespace kiln
