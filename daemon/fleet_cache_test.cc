// ArtifactCache with a fleet tier: caches ("machines") with their own
// in-memory stores and a counting fake compiler, sharing a real
// redis-server (tests/redis_fixture.h). Run under TSan too: fleet jobs,
// compile jobs, the tier's writer and renewer share these objects.
#include <google/protobuf/util/json_util.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "cache/memory_store.h"
#include "cache/remote/remote_tier.h"
#include "cache/remote/signing.h"
#include "common/files.h"
#include "daemon/artifact_cache.h"
#include "gtest/gtest.h"
#include "tests/redis_fixture.h"

namespace kiln {
namespace {

constexpr char kReluGraph[] = R"json({
  "name": "relu",
  "inputs": [{"value": 0, "name": "x",
              "type": {"dtype": "FLOAT32", "sizes": [{"constant": 4}, {"constant": 4}]}}],
  "nodes": [{"name": "relu", "op": "aten.relu.default", "inputs": [0], "outputs": [1],
             "outputTypes": [{"dtype": "FLOAT32",
                              "sizes": [{"constant": 4}, {"constant": 4}]}]}],
  "outputs": [1]
})json";

class CountingCompiler : public Compiler {
 public:
  explicit CountingCompiler(std::atomic<int>* calls) : calls_(calls) {}
  absl::StatusOr<CompiledObject> Compile(absl::string_view source, kiln::v1::Target) override {
    ++*calls_;
    CompiledObject object;
    object.shared_object = absl::StrCat("fake shared object of ", source);
    object.compiler = "fake";
    return object;
  }
  const char* name() const override { return "fake"; }

 private:
  std::atomic<int>* const calls_;
};

// One machine: its own directory, store and compiler; the fleet tier when
// `redis` is given.
struct Machine {
  Machine(const RedisServer* redis, const std::string& signing_key,
          absl::Duration compile_delay = absl::ZeroDuration()) {
    dir = *MakeTempDirectory("/tmp/kfleetXXXXXX");
    ArtifactCache::Options options;
    options.compile_threads = 2;
    options.testonly_compile_delay = compile_delay;
    if (redis != nullptr) {
      RedisClient::Options client;
      client.seeds = {redis->endpoint()};
      RemoteTier::Options tier;
      tier.lease_ttl = absl::Seconds(2);
      options.remote = std::make_shared<RemoteTier>(*RedisClient::Create(client),
                                                    *SigningKeys::FromPem(signing_key, ""), tier);
      remote = options.remote.get();
    }
    cache = std::make_unique<ArtifactCache>(
        std::make_unique<MemoryStore>(), ObjectDirectory(dir + "/objects"), LocalIndex(dir),
        std::make_unique<CountingCompiler>(&compiles),
        TargetToolchains{{kiln::v1::TARGET_NATIVE, kiln::v1::Toolchain()}}, options);
  }
  ~Machine() {
    cache.reset();
    RemoveRecursively(dir).IgnoreError();
  }

  absl::StatusOr<kiln::v1::CompileResponse> Compile(const kiln::v1::CompileRequest& request) {
    absl::Notification finished;
    absl::StatusOr<kiln::v1::CompileResponse> result = absl::UnknownError("not called");
    cache->Compile(request, /*allow_compile=*/true,
                   [&](absl::StatusOr<kiln::v1::CompileResponse> response) {
                     result = std::move(response);
                     finished.Notify();
                   });
    finished.WaitForNotification();
    return result;
  }

  std::string dir;
  std::atomic<int> compiles{0};
  RemoteTier* remote = nullptr;
  std::unique_ptr<ArtifactCache> cache;
};

class FleetCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = RedisServer::Start({});
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
    key_ = GenerateSigningKeyPair()->private_key;
    ASSERT_TRUE(
        google::protobuf::util::JsonStringToMessage(kReluGraph, request_.mutable_graph()).ok());
  }

  std::unique_ptr<RedisServer> redis_;
  std::string key_;
  kiln::v1::CompileRequest request_;
};

TEST_F(FleetCacheTest, AMachineStoresWhatAnotherCompiledAndCompilesNothing) {
  Machine a(redis_.get(), key_), b(redis_.get(), key_);
  ASSERT_TRUE(a.Compile(request_).ok());
  a.remote->Flush();  // the publish is behind the reply

  absl::StatusOr<kiln::v1::CompileResponse> fetched = b.Compile(request_);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_TRUE(fetched->cache_hit());
  EXPECT_EQ(a.compiles, 1);
  EXPECT_EQ(b.compiles, 0);
  EXPECT_EQ(b.cache->Stats().remote().hits(), 1);
  EXPECT_EQ(b.cache->Stats().entries(), 1) << "stored locally";
  EXPECT_EQ(b.cache->Stats().misses(), 1) << "a local miss, answered by the fleet tier";

  // The next request on B is a local hit: Redis is not asked.
  ASSERT_TRUE(b.Compile(request_).ok());
  EXPECT_EQ(b.cache->Stats().hits(), 1);
  EXPECT_EQ(b.cache->Stats().remote().hits(), 1);
}

TEST_F(FleetCacheTest, ConcurrentMissesOnTwoMachinesCompileOnce) {
  Machine a(redis_.get(), key_, absl::Milliseconds(300)),
      b(redis_.get(), key_, absl::Milliseconds(300));
  std::vector<std::thread> clients;
  std::atomic<int> failed{0};
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] {
      if (!(i % 2 == 0 ? a : b).Compile(request_).ok()) ++failed;
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(a.compiles + b.compiles, 1);
}

TEST_F(FleetCacheTest, ShutdownEndsAWaitForAnotherMachinesLease) {
  // The request's key, from a machine without the tier.
  std::string key;
  {
    Machine alone(nullptr, "");
    absl::StatusOr<kiln::v1::CompileResponse> response = alone.Compile(request_);
    ASSERT_TRUE(response.ok()) << response.status();
    key = response->artifact().key();
  }
  // A machine that never finishes holds the lease.
  ASSERT_EQ(*redis_->Cli({"SET", "kiln:l:" + key, "elsewhere", "PX", "60000"}), "OK");
  Machine a(redis_.get(), key_);
  absl::Notification answered;
  absl::StatusOr<kiln::v1::CompileResponse> result = absl::UnknownError("not called");
  a.cache->Compile(request_, /*allow_compile=*/true,
                   [&](absl::StatusOr<kiln::v1::CompileResponse> response) {
                     result = std::move(response);
                     answered.Notify();
                   });
  for (int i = 0; i < 400 && a.cache->Stats().remote().lease_waits() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(a.cache->Stats().remote().lease_waits(), 1);
  const absl::Time start = absl::Now();
  a.cache->Shutdown();
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "not the lease's minute";
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
  EXPECT_EQ(a.compiles, 0);
}

}  // namespace
}  // namespace kiln
