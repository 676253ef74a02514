// ArtifactCache with the in-memory store and a fake compiler: which compile
// failures are remembered, for how long, and how Evict forgets them.
#include "daemon/artifact_cache.h"

#include <google/protobuf/util/json_util.h>

#include <atomic>

#include "absl/synchronization/notification.h"
#include "cache/memory_store.h"
#include "cache/request_key.h"
#include "common/files.h"
#include "gtest/gtest.h"

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

// Fails with `failure` while it is set; counts every call.
class FakeCompiler : public Compiler {
 public:
  explicit FakeCompiler(std::atomic<int>* calls, absl::Status* failure)
      : calls_(calls), failure_(failure) {}
  absl::StatusOr<CompiledObject> Compile(absl::string_view, kiln::v1::Target) override {
    ++*calls_;
    if (!failure_->ok()) return *failure_;
    CompiledObject object;
    object.shared_object = "fake shared object";
    object.compiler = "fake";
    return object;
  }
  const char* name() const override { return "fake"; }

 private:
  std::atomic<int>* const calls_;
  absl::Status* const failure_;
};

class ArtifactCacheTest : public ::testing::Test {
 protected:
  static TargetToolchains Toolchains() {
    return {{kiln::v1::TARGET_NATIVE, kiln::v1::Toolchain()}};
  }

  void SetUp() override {
    auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    ASSERT_TRUE(
        google::protobuf::util::JsonStringToMessage(kReluGraph, request_.mutable_graph()).ok());
    ArtifactCache::Options options;
    options.compile_threads = 1;
    options.now = [this] { return now_; };
    cache_ = std::make_unique<ArtifactCache>(
        std::make_unique<MemoryStore>(), ObjectDirectory(dir_ + "/objects"), LocalIndex(dir_),
        std::make_unique<FakeCompiler>(&calls_, &failure_), Toolchains(), options);
  }
  void TearDown() override {
    cache_.reset();
    RemoveRecursively(dir_).IgnoreError();
  }

  absl::StatusOr<kiln::v1::CompileResponse> Compile() {
    absl::Notification finished;
    absl::StatusOr<kiln::v1::CompileResponse> result = absl::UnknownError("not called");
    cache_->Compile(request_, /*allow_compile=*/true,
                    [&](absl::StatusOr<kiln::v1::CompileResponse> response) {
                      result = std::move(response);
                      finished.Notify();
                    });
    finished.WaitForNotification();
    return result;
  }

  // The key the cache computes for request_, as the client would.
  std::string Key() {
    auto keyed = KeyRequest(request_, DigestToolchains(Toolchains()));
    EXPECT_TRUE(keyed.ok()) << keyed.status();
    return keyed->key.key;
  }

  std::string dir_;
  kiln::v1::CompileRequest request_;
  std::atomic<int> calls_{0};
  absl::Status failure_;
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
  std::unique_ptr<ArtifactCache> cache_;
};

TEST_F(ArtifactCacheTest, ACompilerErrorIsRememberedUntilEvicted) {
  failure_ = absl::InternalError("kernel.cc:3:1: error: unknown type name 'flaot'");
  EXPECT_EQ(Compile().status(), failure_);
  EXPECT_EQ(calls_, 1);
  now_ += absl::Minutes(9);
  EXPECT_EQ(Compile().status(), failure_) << "the retry gets the same error";
  EXPECT_EQ(calls_, 1) << "without compiling again";
  EXPECT_EQ(cache_->Stats().remembered_failures(), 1);
  EXPECT_EQ(cache_->Stats().failures_replayed(), 1);

  const std::string key = Key();
  auto evicted = cache_->Evict(key.substr(0, 10));  // no store entry: the failure alone
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(*evicted, key);
  EXPECT_EQ(cache_->Stats().remembered_failures(), 0);
  failure_ = absl::OkStatus();
  auto compiled = Compile();
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(compiled->artifact().key(), key);
  EXPECT_EQ(calls_, 2);
  EXPECT_EQ(cache_->Evict(key.substr(0, 10)).value_or("failed"), key) << "a stored entry too";
  EXPECT_EQ(cache_->Evict(key).status(), absl::NotFoundError("no entry with key " + key));
}

TEST_F(ArtifactCacheTest, ARememberedFailureExpires) {
  failure_ = absl::DeadlineExceededError("compile did not finish within 2m");
  EXPECT_EQ(Compile().status(), failure_);
  EXPECT_EQ(Compile().status(), failure_);
  EXPECT_EQ(calls_, 1);
  now_ += absl::Minutes(10);
  EXPECT_EQ(Compile().status(), failure_);
  EXPECT_EQ(calls_, 2) << "ten minutes on, the compile runs again";
}

TEST_F(ArtifactCacheTest, TransientFailuresAreNotRemembered) {
  const absl::Status transient[] = {
      absl::UnavailableError("cannot start the compile worker"),
      absl::ResourceExhaustedError("no space left on device in /tmp/kiln"),
      absl::InternalError("compile worker crashed (signal 9: Killed); its stderr is in the log"),
      absl::InternalError("clang++ failed (signal 9): "),
  };
  int expected_calls = 0;
  for (const absl::Status& failure : transient) {
    failure_ = failure;
    EXPECT_EQ(Compile().status(), failure);
    EXPECT_EQ(Compile().status(), failure);
    expected_calls += 2;
    EXPECT_EQ(calls_, expected_calls) << "retried: " << failure;
  }
  EXPECT_EQ(cache_->Stats().remembered_failures(), 0);
}

TEST(IsDeterministicFailureTest, ChoosesByCodeAndCrash) {
  EXPECT_TRUE(IsDeterministicFailure(absl::InternalError("kernel.cc:1: error: x")));
  EXPECT_TRUE(IsDeterministicFailure(absl::DeadlineExceededError("compile did not finish")));
  EXPECT_FALSE(IsDeterministicFailure(absl::InternalError("compile worker exited (status 1)")));
  EXPECT_FALSE(IsDeterministicFailure(absl::UnavailableError("shutting down")));
  EXPECT_FALSE(IsDeterministicFailure(absl::ResourceExhaustedError("no space left")));
}

}  // namespace
}  // namespace kiln
