// ArtifactCache with the in-memory store and a fake compiler: which compile
// failures are remembered, for how long, and how Evict forgets them;
// eviction; and the fleet tier.
#include "daemon/artifact_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "cache/memory_store.h"
#include "cache/remote/remote_tier.h"
#include "cache/remote/signing.h"
#include "cache/request_key.h"
#include "cache/rocksdb_store.h"
#include "common/files.h"
#include "common/sha256.h"
#include "daemon/admin/list.h"
#include "daemon/admin/pin.h"
#include "daemon/admin/prune.h"
#include "daemon/admin/verify.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/sst_file_reader.h"
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

// The nice value of each of this process's threads (/proc/self/task/*/stat,
// the 19th field).
std::vector<int> ThreadNiceness() {
  std::vector<int> niceness;
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return niceness;
  while (const dirent* task = readdir(tasks)) {
    if (task->d_name[0] == '.') continue;
    const absl::StatusOr<std::string> stat =
        ReadFile(absl::StrCat("/proc/self/task/", task->d_name, "/stat"));
    if (!stat.ok()) continue;  // the thread ended
    // After "pid (comm) ", fields 3 on: the nice value is the 17th of them.
    const std::vector<std::string> fields = absl::StrSplit(stat->substr(stat->rfind(')') + 2), ' ');
    niceness.push_back(std::stoi(fields.at(16)));
  }
  closedir(tasks);
  return niceness;
}

// Fails with `failure` while it is set; counts every call.
absl::StatusOr<kiln::v1::PinResponse> SetPinned(LocalTier& tier, const std::string& key,
                                                bool pinned) {
  kiln::v1::PinRequest request;
  request.set_key(key);
  request.set_pinned(pinned);
  return admin::Pin(tier, request);
}

class FakeCompiler : public Compiler {
 public:
  explicit FakeCompiler(std::atomic<int>* calls, absl::Status* failure)
      : calls_(calls), failure_(failure) {}
  absl::StatusOr<CompiledObject> Compile(absl::string_view source, kiln::v1::Target) override {
    ++*calls_;
    if (!failure_->ok()) return *failure_;
    CompiledObject object;
    object.shared_object = absl::StrCat("fake shared object of ", source);
    object.compiler = "fake";
    return object;
  }
  const char* name() const override { return "fake"; }

 private:
  std::atomic<int>* const calls_;
  absl::Status* const failure_;
};

// Compiles `request` on `cache` and waits for its answer.
absl::StatusOr<kiln::v1::CompileResponse> CompileAndWait(ArtifactCache& cache,
                                                         const kiln::v1::CompileRequest& request) {
  absl::Notification finished;
  absl::StatusOr<kiln::v1::CompileResponse> result = absl::UnknownError("not called");
  cache.Compile(request, /*allow_compile=*/true,
                [&](absl::StatusOr<kiln::v1::CompileResponse> response) {
                  result = std::move(response);
                  finished.Notify();
                });
  finished.WaitForNotification();
  return result;
}

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
    auto store = std::make_unique<MemoryStore>();
    store_ = store.get();
    cache_ = std::make_unique<ArtifactCache>(
        std::move(store), ObjectDirectory(dir_ + "/objects"), LocalIndex(dir_),
        std::make_unique<FakeCompiler>(&calls_, &failure_), Toolchains(), options);
  }
  void TearDown() override {
    cache_.reset();
    RemoveRecursively(dir_).IgnoreError();
  }

  absl::StatusOr<kiln::v1::CompileResponse> Compile() { return CompileAndWait(*cache_, request_); }

  // request_ becomes relu at n x n: another key, and other object bytes.
  void SetSize(int n) {
    for (kiln::v1::TensorType* type :
         {request_.mutable_graph()->mutable_inputs(0)->mutable_type(),
          request_.mutable_graph()->mutable_nodes(0)->mutable_output_types(0)}) {
      for (kiln::v1::Dim& dim : *type->mutable_sizes()) dim.set_constant(n);
    }
  }

  // Compiles relu at n x n at now_; its key and object bytes.
  std::pair<std::string, int64_t> CompileSize(int n) {
    SetSize(n);
    absl::StatusOr<kiln::v1::CompileResponse> response = Compile();
    EXPECT_TRUE(response.ok()) << response.status();
    return {response->artifact().key(), response->artifact().object_bytes()};
  }

  static std::vector<std::string> Keys(const admin::GcResult& result) {
    std::vector<std::string> keys;
    for (const EntryUsage& entry : result.evicted) keys.push_back(entry.key);
    return keys;
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
  MemoryStore* store_ = nullptr;  // owned by cache_
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
      absl::InternalError("clang++ crashed (signal 9 in clang or a process it started) on the "
                          "generated source; its report is in kilnd's log"),
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

TEST_F(ArtifactCacheTest, GcEvictsLeastRecentlyUsedFirstAndNeverPinnedOrFreshEntries) {
  const auto [a, a_bytes] = CompileSize(4);
  now_ += absl::Minutes(1);
  const auto [b, b_bytes] = CompileSize(5);
  now_ += absl::Minutes(1);
  const auto [c, c_bytes] = CompileSize(6);
  now_ += absl::Minutes(1);
  const auto [d, d_bytes] = CompileSize(7);
  now_ += absl::Minutes(1);
  CompileSize(5);  // a daemon hit: b is used now
  // The index files were published by the wall clock, ahead of now_: put
  // them at the epoch, then a client's local-index hit marks a's (now, by
  // the wall clock): a is the newest.
  for (const std::string& key : {a, b, c, d}) {
    const struct timespec epoch[2] = {{0, 0}, {0, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, LocalIndex(dir_).PathFor(key).c_str(), epoch, 0), 0);
  }
  ASSERT_TRUE(LocalIndex(dir_).Touch(a).ok());
  ASSERT_TRUE(SetPinned(cache_->tier(), c.substr(0, 8), true).ok());
  now_ += absl::Minutes(5);
  const int64_t total = a_bytes + b_bytes + c_bytes + d_bytes;

  admin::GcLimits dry;
  dry.max_bytes = a_bytes + c_bytes;
  dry.dry_run = true;
  absl::StatusOr<admin::GcResult> planned = cache_->Gc(dry);
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_EQ(Keys(*planned), (std::vector<std::string>{d, b}));
  EXPECT_EQ(planned->bytes_before, total);
  EXPECT_EQ(planned->bytes_after, a_bytes + c_bytes);
  EXPECT_TRUE(cache_->Show(d).ok()) << "a dry run evicts nothing";

  admin::GcLimits cap;
  cap.max_bytes = a_bytes + c_bytes;
  absl::StatusOr<admin::GcResult> done = cache_->Gc(cap);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(Keys(*done), (std::vector<std::string>{d, b}));
  EXPECT_EQ(cache_->Show(d).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(LocalIndex(dir_).Find(d)->has_value()) << "the index forgets it";
  EXPECT_TRUE(cache_->Show(c).ok()) << "pinned";
  EXPECT_EQ(cache_->Stats().evictions(), 2);
  EXPECT_EQ(cache_->Stats().bytes_stored(), a_bytes + c_bytes);

  // Nothing fits under 1 byte but the pinned entry and the one touched
  // (by the wall clock: in this test's future) stay.
  cap.max_bytes = 1;
  done = cache_->Gc(cap);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->evicted.empty());
  ASSERT_TRUE(SetPinned(cache_->tier(), c, false).ok());
  done = cache_->Gc(cap);
  EXPECT_EQ(Keys(*done), (std::vector<std::string>{c}));
}

TEST_F(ArtifactCacheTest, GcEvictsWhatIsUnusedForLongerThanTheMaxAge) {
  const auto [old_key, old_bytes] = CompileSize(4);
  now_ += absl::Minutes(10);
  const auto [new_key, new_bytes] = CompileSize(5);
  now_ += absl::Minutes(5);
  for (const std::string& key : {old_key, new_key}) {  // published by the wall clock: see above
    const struct timespec epoch[2] = {{0, 0}, {0, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, LocalIndex(dir_).PathFor(key).c_str(), epoch, 0), 0);
  }
  admin::GcLimits age;
  age.max_age = absl::Minutes(8);
  absl::StatusOr<admin::GcResult> done = cache_->Gc(age);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(Keys(*done), (std::vector<std::string>{old_key}));
  EXPECT_EQ(done->bytes_after, new_bytes);
  EXPECT_TRUE(cache_->Show(new_key).ok());
}

// A cache whose store lost an entry its index still names (a damaged
// database set aside, say) serves at once and drops that index record in
// the background; the entries it still has keep theirs.
TEST_F(ArtifactCacheTest, TheIndexIsReconciledWithTheStoreInTheBackground) {
  const std::string kept = CompileSize(4).first;
  const std::string lost = CompileSize(8).first;
  const LocalIndex index(dir_);
  ASSERT_TRUE(index.Find(lost).ok() && index.Find(lost)->has_value());
  auto survivor = std::make_unique<MemoryStore>();
  auto metadata = store_->Lookup(kept);
  ASSERT_TRUE(metadata.ok() && metadata->has_value());
  auto blob = store_->ReadBlob((*metadata)->digest());
  ASSERT_TRUE(blob.ok() && blob->has_value());
  ASSERT_TRUE(survivor->Put(**metadata, **blob).ok());
  cache_.reset();
  ArtifactCache::Options options;
  options.compile_threads = 1;
  options.reconcile_index = true;
  cache_ = std::make_unique<ArtifactCache>(
      std::move(survivor), ObjectDirectory(dir_ + "/objects"), LocalIndex(dir_),
      std::make_unique<FakeCompiler>(&calls_, &failure_), Toolchains(), options);
  SetSize(4);
  absl::StatusOr<kiln::v1::CompileResponse> hit = Compile();
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_TRUE(hit->cache_hit());
  for (int i = 0; i < 1000 && index.Find(lost).ok() && index.Find(lost)->has_value(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  auto lost_record = index.Find(lost);
  ASSERT_TRUE(lost_record.ok()) << lost_record.status();
  EXPECT_FALSE(lost_record->has_value()) << "the store has no entry " << lost;
  auto kept_record = index.Find(kept);
  ASSERT_TRUE(kept_record.ok()) << kept_record.status();
  EXPECT_TRUE(kept_record->has_value());
  // At the lowest CPU priority, and only that thread (the others keep the
  // test's own, which a harness may have lowered too).
  const int own = getpriority(PRIO_PROCESS, 0);
  ASSERT_LT(own, 19);
  const std::vector<int> niceness = ThreadNiceness();
  EXPECT_EQ(std::count(niceness.begin(), niceness.end(), 19), 1);
  EXPECT_EQ(std::count(niceness.begin(), niceness.end(), own), niceness.size() - 1);
}

// A store that rebuilt itself around damage: `kiln stats`, `kiln ls` and
// the metrics (from Stats) show what it holds afterwards.
TEST_F(ArtifactCacheTest, StatsAndListingsShowWhatTheStoreHoldsAfterARebuild) {
  auto opened = RocksDbStore::Open(dir_ + "/db");
  ASSERT_TRUE(opened.ok()) << opened.status();
  RocksDbStore* const store = opened->get();
  ArtifactCache::Options options;
  options.compile_threads = 1;
  options.now = [this] { return now_; };
  cache_ = std::make_unique<ArtifactCache>(
      *std::move(opened), ObjectDirectory(dir_ + "/objects"), LocalIndex(dir_),
      std::make_unique<FakeCompiler>(&calls_, &failure_), Toolchains(), options);
  for (int n = 1; n <= 5; ++n) CompileSize(n);
  ASSERT_TRUE(store->FlushForTesting().ok());
  cache_.reset();
  // A byte in every data block of the entries' tables ("fake" is their
  // compiler; the blobs' tables hold "fake shared object of ..."), none in
  // their metadata: the store opens, and loses every entry when it heals.
  int tables = 0;
  for (const auto& file : std::filesystem::directory_iterator(dir_ + "/db")) {
    const std::string path = file.path().string();
    absl::StatusOr<std::string> bytes = ReadFile(path);
    if (file.path().extension() != ".sst" || !bytes.ok() || !absl::StrContains(*bytes, "fake") ||
        absl::StrContains(*bytes, "fake shared object")) {
      continue;
    }
    rocksdb::SstFileReader reader{rocksdb::Options()};
    ASSERT_TRUE(reader.Open(path).ok());
    const uint64_t data_size = reader.GetTableProperties()->data_size;
    for (uint64_t at = 10; at < data_size; at += 64) (*bytes)[at] ^= 0x40;
    ASSERT_TRUE(WriteFileAtomically(path, *bytes, 0644).ok());
    ++tables;
  }
  ASSERT_GT(tables, 0);

  opened = RocksDbStore::Open(dir_ + "/db");
  ASSERT_TRUE(opened.ok()) << opened.status();
  cache_ = std::make_unique<ArtifactCache>(
      *std::move(opened), ObjectDirectory(dir_ + "/objects"), LocalIndex(dir_),
      std::make_unique<FakeCompiler>(&calls_, &failure_), Toolchains(), options);
  EXPECT_EQ(cache_->Stats().entries(), 5) << "nothing has read the damaged block yet";
  auto verified = admin::Verify(cache_->tier(), /*repair=*/false);  // reads it: the store rebuilds
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->bad_entries(), 5);
  const kiln::v1::StatsResponse stats = cache_->Stats();
  EXPECT_EQ(stats.entries(), 0);
  EXPECT_EQ(stats.blobs(), 0);
  EXPECT_EQ(stats.bytes_stored(), 0);
  for (const auto order : {kiln::v1::ListRequest::ORDER_LAST_USE, kiln::v1::ListRequest::ORDER_KEY,
                           kiln::v1::ListRequest::ORDER_SIZE}) {
    kiln::v1::ListRequest request;
    request.set_order(order);
    auto listed = admin::List(cache_->tier(), cache_->UsesUnread(), request);
    ASSERT_TRUE(listed.ok()) << listed.status();
    EXPECT_EQ(listed->entries_size(), 0) << kiln::v1::ListRequest::Order_Name(order);
  }
  SetSize(3);
  auto compiled = Compile();
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_FALSE(compiled->cache_hit());
  EXPECT_EQ(cache_->Stats().entries(), 1);
}

TEST_F(ArtifactCacheTest, AListingBeforeTheFirstWalkOfTheIndexShowsTheStoresUsesAndSaysSo) {
  // The entry's store record says it was last used at now_ (a fake clock,
  // 1970); its index file's modification time, a local-index use, is now.
  const std::string key = CompileSize(4).first;
  const int64_t stored_use = absl::ToUnixMillis(now_);
  auto metadata = store_->Lookup(key);
  ASSERT_TRUE(metadata.ok() && metadata->has_value());
  auto blob = store_->ReadBlob((*metadata)->digest());
  ASSERT_TRUE(blob.ok() && blob->has_value());
  auto reopen = [&](absl::Duration first_walk_delay) {
    cache_.reset();
    auto store = std::make_unique<MemoryStore>();
    ASSERT_TRUE(store->Put(**metadata, **blob).ok());
    store_ = store.get();
    ArtifactCache::Options options;
    options.compile_threads = 1;
    options.now = [this] { return now_; };
    options.reconcile_index = true;  // a background thread, as kilnd has
    options.testonly_first_walk_delay = first_walk_delay;
    cache_ = std::make_unique<ArtifactCache>(
        std::move(store), ObjectDirectory(dir_ + "/objects"), LocalIndex(dir_),
        std::make_unique<FakeCompiler>(&calls_, &failure_), Toolchains(), options);
  };
  kiln::v1::ListRequest request;
  request.set_order(kiln::v1::ListRequest::ORDER_LAST_USE);

  reopen(absl::Hours(1));  // shut down long before it walks
  absl::StatusOr<kiln::v1::ListResponse> early =
      admin::List(cache_->tier(), cache_->UsesUnread(), request);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_TRUE(early->local_uses_unread());
  ASSERT_EQ(early->uses_size(), 1);
  EXPECT_EQ(early->uses(0).last_use_unix_ms(), stored_use);

  reopen(absl::ZeroDuration());
  absl::StatusOr<kiln::v1::ListResponse> later =
      admin::List(cache_->tier(), cache_->UsesUnread(), request);
  for (int i = 0; i < 1000 && later.ok() && later->local_uses_unread(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    later = admin::List(cache_->tier(), cache_->UsesUnread(), request);
  }
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_FALSE(later->local_uses_unread());
  ASSERT_EQ(later->uses_size(), 1);
  const std::optional<absl::Time> touched = LocalIndex(dir_).LastTouched(key);
  ASSERT_TRUE(touched.has_value());
  EXPECT_EQ(later->uses(0).last_use_unix_ms(), absl::ToUnixMillis(*touched));
  EXPECT_GT(later->uses(0).last_use_unix_ms(), stored_use);
}

TEST_F(ArtifactCacheTest, PinNeedsAKeyPrefixThatNamesEntries) {
  EXPECT_EQ(SetPinned(cache_->tier(), "abc", true).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SetPinned(cache_->tier(), "abcdef", true).status(),
            absl::NotFoundError("no entry with key abcdef"));
}

TEST_F(ArtifactCacheTest, PruneRemovesOnlyEntriesThatCanNeverHitHere) {
  const auto [current, current_bytes] = CompileSize(4);
  // Entries as an older kilnd, another compiler or another CPU left them.
  const kiln::v1::ArtifactMetadata stored = *cache_->Show(current);
  auto put = [&](const std::string& key, auto change) {
    kiln::v1::ArtifactMetadata entry = stored;
    entry.set_key(key);
    change(entry);
    const std::string blob = "object of " + key;
    entry.set_digest(Sha256Hex(blob));
    ASSERT_TRUE(store_->Put(entry, blob).ok());
  };
  const std::string toolchain(64, 'a'), codegen(64, 'b'), target(64, 'c');
  put(toolchain, [](kiln::v1::ArtifactMetadata& entry) {
    entry.mutable_key_components()->set_toolchain("another");
    entry.mutable_toolchain()->set_compiler_version("clang 18");
    entry.mutable_toolchain()->set_cpu("znver4");
  });
  put(codegen, [](kiln::v1::ArtifactMetadata& entry) {
    entry.mutable_key_components()->set_codegen_version("older");
  });
  put(target,
      [](kiln::v1::ArtifactMetadata& entry) { entry.set_target(kiln::v1::TARGET_X86_64_V4); });

  absl::StatusOr<kiln::v1::PruneResponse> dry =
      admin::Prune(cache_->tier(), cache_->toolchain_digests(), /*dry_run=*/true);
  ASSERT_TRUE(dry.ok()) << dry.status();
  ASSERT_EQ(dry->pruned_size(), 3);
  EXPECT_EQ(dry->pruned(0).key(), toolchain);
  EXPECT_EQ(dry->pruned(0).reason(), "another toolchain or CPU (clang 18, cpu znver4)");
  EXPECT_EQ(dry->pruned(1).reason(), "another codegen or ABI version");
  EXPECT_EQ(dry->pruned(2).reason(), "target TARGET_X86_64_V4 is not compiled for here");
  EXPECT_EQ(cache_->Stats().entries(), 4) << "a dry run removes nothing";

  ASSERT_TRUE(admin::Prune(cache_->tier(), cache_->toolchain_digests(), /*dry_run=*/false).ok());
  EXPECT_EQ(cache_->Stats().entries(), 1);
  EXPECT_TRUE(cache_->Show(current).ok());
}

TEST(ArtifactCacheBackgroundTest, ACompilePastTheCapWakesEviction) {
  auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(dir.ok());
  std::atomic<int> calls{0};
  absl::Status ok;
  ArtifactCache::Options options;
  options.compile_threads = 1;
  options.max_cache_bytes = 1;
  options.gc_interval = absl::Hours(1);  // only the compile can wake it
  options.eviction_grace = absl::ZeroDuration();
  ArtifactCache cache(std::make_unique<MemoryStore>(), ObjectDirectory(*dir + "/objects"),
                      LocalIndex(*dir), std::make_unique<FakeCompiler>(&calls, &ok),
                      {{kiln::v1::TARGET_NATIVE, kiln::v1::Toolchain()}}, options);
  kiln::v1::CompileRequest request;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(kReluGraph, request.mutable_graph()).ok());
  auto compiled = CompileAndWait(cache, request);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  for (int i = 0; i < 1000 && cache.Stats().evictions() == 0; ++i)
    absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(cache.Stats().evictions(), 1);
  EXPECT_EQ(cache.Stats().entries(), 0);
  RemoveRecursively(*dir).IgnoreError();
}

TEST(ArtifactCacheLimitsTest, AnArtifactPastTheLimitIsNotStored) {
  auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(dir.ok());
  std::atomic<int> calls{0};
  absl::Status ok;
  ArtifactCache::Options options;
  options.compile_threads = 1;
  options.max_artifact_bytes = 10;  // FakeCompiler's objects are longer
  ArtifactCache cache(std::make_unique<MemoryStore>(), ObjectDirectory(*dir + "/objects"),
                      LocalIndex(*dir), std::make_unique<FakeCompiler>(&calls, &ok),
                      {{kiln::v1::TARGET_NATIVE, kiln::v1::Toolchain()}}, options);
  kiln::v1::CompileRequest request;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(kReluGraph, request.mutable_graph()).ok());
  const absl::Status status = CompileAndWait(cache, request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(status.message()),
              ::testing::MatchesRegex(
                  "the artifact of [0-9a-f]{12} is [0-9]+ bytes, past the limit of 10 \\(kilnd "
                  "--max_artifact_bytes\\)"));
  EXPECT_EQ(cache.Stats().entries(), 0);
  RemoveRecursively(*dir).IgnoreError();
}

// The fleet tier: caches ("machines") with their own in-memory stores
// sharing a real redis-server (tests/redis_fixture.h). Under TSan too:
// fleet jobs, compile jobs, the tier's writer and renewer share these.
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
        std::make_unique<FakeCompiler>(&compiles, &failure),
        TargetToolchains{{kiln::v1::TARGET_NATIVE, kiln::v1::Toolchain()}}, options);
  }
  ~Machine() {
    cache.reset();
    RemoveRecursively(dir).IgnoreError();
  }

  absl::StatusOr<kiln::v1::CompileResponse> Compile(const kiln::v1::CompileRequest& request) {
    return CompileAndWait(*cache, request);
  }

  std::string dir;
  std::atomic<int> compiles{0};
  absl::Status failure = absl::OkStatus();
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
