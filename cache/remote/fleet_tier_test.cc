// The fleet tier over a local tier and over a recording one, against a real
// redis-server (tests/redis_fixture.h): another machine is a RemoteTier of
// its own.
#include "cache/remote/fleet_tier.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cache/local_tier.h"
#include "cache/memory_store.h"
#include "common/files.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/redis_fixture.h"

namespace kiln {
namespace {

constexpr char kKey[] = "0123abcd";
constexpr char kObject[] =
    "\x7f"
    "ELF, compiled once";

kiln::v1::ArtifactMetadata Metadata() {
  kiln::v1::ArtifactMetadata metadata;
  metadata.set_key(kKey);
  metadata.set_digest(Sha256Hex(kObject));
  metadata.set_object_bytes(static_cast<int64_t>(std::string(kObject).size()));
  return metadata;
}

class FleetTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisServer::Start({});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto pair = GenerateSigningKeyPair();
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = *std::move(pair);
    auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
    ASSERT_TRUE(dir.ok()) << dir.status();
    local_ = std::make_unique<LocalTier>(std::make_unique<MemoryStore>(),
                                         ObjectDirectory(*dir + "/objects"), LocalIndex(*dir),
                                         int64_t{1} << 20, [] { return absl::Now(); });
    fleet_ = std::make_unique<FleetTier>(local_.get(), Machine());
  }

  // Another machine's view of the fleet.
  std::shared_ptr<RemoteTier> Machine() {
    RedisClient::Options options;
    options.seeds = {server_->endpoint()};
    auto client = RedisClient::Create(std::move(options));
    EXPECT_TRUE(client.ok()) << client.status();
    auto keys = SigningKeys::FromPem(pair_.private_key, "");
    EXPECT_TRUE(keys.ok()) << keys.status();
    RemoteTier::Options tier;
    tier.url = server_->url();
    return std::make_shared<RemoteTier>(*std::move(client), *std::move(keys), tier);
  }

  std::unique_ptr<RedisServer> server_;
  KeyPairPem pair_;
  std::unique_ptr<LocalTier> local_;
  std::unique_ptr<FleetTier> fleet_;
};

TEST_F(FleetTierTest, AMissHoldsTheLeaseUntilItIsAbandoned) {
  Tier::Query query{kKey};
  absl::StatusOr<Tier::Found> found = fleet_->Find(query);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_FALSE(found->response.has_value());
  EXPECT_EQ(found->look_again_after, absl::ZeroDuration()) << "compile here";

  std::shared_ptr<RemoteTier> other = Machine();
  RemoteTier::Wait other_wait;
  RemoteTier::Claim waits = other->Look(kKey, &other_wait);
  EXPECT_GT(waits.look_again_after, absl::ZeroDuration()) << "this machine holds the lease";
  EXPECT_EQ(waits.lease, nullptr);

  fleet_->Abandon(kKey);
  RemoteTier::Wait fresh;
  RemoteTier::Claim taken = other->Look(kKey, &fresh);
  EXPECT_EQ(taken.look_again_after, absl::ZeroDuration());
  EXPECT_NE(taken.lease, nullptr) << "the abandoned lease is free";
}

TEST_F(FleetTierTest, ACommitIsStoredHereAndPublishedToTheFleet) {
  Tier::Query query{kKey};
  ASSERT_TRUE(fleet_->Find(query).ok());
  ASSERT_TRUE(fleet_->Commit(Metadata(), kObject, /*synced=*/true).ok());
  fleet_->remote().Flush();

  Tier::Query local_query{kKey, /*want_bytes=*/true};
  absl::StatusOr<Tier::Found> here = local_->Find(local_query);
  ASSERT_TRUE(here.ok()) << here.status();
  ASSERT_TRUE(here->response.has_value());
  EXPECT_EQ(here->response->object_bytes(), kObject);

  RemoteTier::Claim there = Machine()->FetchOrLease(kKey);
  ASSERT_TRUE(there.entry.has_value()) << "published, and the lease released";
  EXPECT_EQ(there.entry->object, kObject);
}

TEST_F(FleetTierTest, AnotherMachinesEntryIsStoredHereAndAnswered) {
  std::shared_ptr<RemoteTier> other = Machine();
  other->PublishBehind(Metadata(), kObject, nullptr);
  other->Flush();

  Tier::Query query{kKey, /*want_bytes=*/true};
  absl::StatusOr<Tier::Found> found = fleet_->Find(query);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->response.has_value());
  EXPECT_TRUE(found->response->cache_hit());
  EXPECT_EQ(found->response->object_bytes(), kObject);
  EXPECT_EQ(ReadFile(found->response->object_path()).value_or(""), kObject);
  Tier::Query local_query{kKey};
  absl::StatusOr<Tier::Found> here = local_->Find(local_query);
  ASSERT_TRUE(here.ok()) << here.status();
  EXPECT_TRUE(here->response.has_value()) << "stored in the local tier";
}

// A tier that keeps committed entries in a map and logs each call.
class RecordingTier : public Tier {
 public:
  absl::StatusOr<Found> Find(Query& query) override {
    calls.push_back("Find " + query.key);
    Found found;
    if (auto it = objects.find(query.key); it != objects.end()) {
      found.response.emplace().set_object_bytes(it->second);
    }
    return found;
  }
  absl::Status Commit(const kiln::v1::ArtifactMetadata& metadata, std::string object,
                      bool synced) override {
    calls.push_back(absl::StrCat("Commit ", metadata.key(), synced ? " synced" : " unsynced"));
    objects[metadata.key()] = std::move(object);
    return absl::OkStatus();
  }
  std::vector<std::string> calls;
  std::map<std::string, std::string> objects;
};

TEST_F(FleetTierTest, WrapsAnyTierAndCommitsAFetchedEntryToItUnsynced) {
  std::shared_ptr<RemoteTier> other = Machine();
  other->PublishBehind(Metadata(), kObject, nullptr);
  other->Flush();
  RecordingTier inner;
  FleetTier fleet(&inner, Machine());

  Tier::Query query{kKey};
  absl::StatusOr<Tier::Found> found = fleet.Find(query);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->response.has_value());
  EXPECT_EQ(found->response->object_bytes(), kObject);
  EXPECT_EQ(absl::StrJoin(inner.calls, "; "),
            absl::StrCat("Find ", kKey, "; Commit ", kKey, " unsynced; Find ", kKey));
}

}  // namespace
}  // namespace kiln
