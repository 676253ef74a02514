// Local index records: checksummed, never followed through a symlink, and
// reconciled with the store.
#include "cache/local_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "cache/index_reconcile.h"
#include "cache/memory_store.h"
#include "common/files.h"
#include "common/sha256.h"
#include "gtest/gtest.h"

// Every fsync of this process, counted: the libraries under test call this
// definition, which the executable exports in place of libc's.
std::atomic<int> fsync_calls{0};
extern "C" int fsync(int fd) {
  ++fsync_calls;
  return static_cast<int>(syscall(SYS_fsync, fd));
}

namespace kiln {
namespace {

class LocalIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
  }
  void TearDown() override { RemoveRecursively(dir_).IgnoreError(); }

  static kiln::v1::ArtifactMetadata Entry(const std::string& key) {
    kiln::v1::ArtifactMetadata metadata;
    metadata.set_key(key);
    metadata.set_digest(Sha256Hex(key));
    metadata.mutable_signature()->set_scratch_bytes(4096);
    return metadata;
  }

  std::string dir_;
};

TEST_F(LocalIndexTest, ARecordReadsBack) {
  LocalIndex index(dir_);
  ASSERT_TRUE(index.Publish(Entry("aa01")).ok());
  auto found = index.Find("aa01");
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->signature().scratch_bytes(), 4096);
  EXPECT_EQ(*index.Find("aa02"), std::nullopt);
  kiln::v1::CacheDescriptor descriptor;
  descriptor.set_machine_id("this-host");
  ASSERT_TRUE(index.WriteDescriptor(descriptor).ok());
  EXPECT_EQ((*index.ReadDescriptor())->machine_id(), "this-host");
}

TEST_F(LocalIndexTest, AFlippedByteIsNeverTrusted) {
  LocalIndex index(dir_);
  ASSERT_TRUE(index.Publish(Entry("aa01")).ok());
  const std::string path = index.PathFor("aa01");
  std::string bytes = *ReadFile(path);
  bytes[bytes.size() - 3] ^= 0x01;  // in the payload: still parses as a proto
  ASSERT_TRUE(WriteFileAtomically(path, bytes, 0444).ok());
  EXPECT_EQ(index.Find("aa01").status(),
            absl::DataLossError(path + " fails its checksum; not trusted"));

  bytes = *ReadFile(path);
  bytes.pop_back();
  ASSERT_TRUE(WriteFileAtomically(path, bytes, 0444).ok());
  EXPECT_EQ(index.Find("aa01").status().code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(WriteFileAtomically(path, Entry("aa01").SerializeAsString(), 0444).ok());
  EXPECT_EQ(index.Find("aa01").status().code(), absl::StatusCode::kDataLoss)
      << "a bare proto (the old format) is not a record";
}

TEST_F(LocalIndexTest, ARecordUnderAnotherKeysNameIsNotTrusted) {
  LocalIndex index(dir_);
  ASSERT_TRUE(index.Publish(Entry("aa01")).ok());
  ASSERT_TRUE(MakeDirectories(dir_ + "/index/aa", 0700).ok());
  ASSERT_EQ(rename(index.PathFor("aa01").c_str(), index.PathFor("aa02").c_str()), 0);
  EXPECT_EQ(
      index.Find("aa02").status(),
      absl::DataLossError(index.PathFor("aa02") + " holds the record of key aa01; not trusted"));
}

TEST_F(LocalIndexTest, ASymlinkedRecordIsNotFollowed) {
  LocalIndex elsewhere(dir_ + "/elsewhere");
  ASSERT_TRUE(elsewhere.Publish(Entry("aa01")).ok());
  LocalIndex index(dir_);
  ASSERT_TRUE(MakeDirectories(dir_ + "/index/aa", 0700).ok());
  ASSERT_EQ(symlink(elsewhere.PathFor("aa01").c_str(), index.PathFor("aa01").c_str()), 0);
  EXPECT_EQ(index.Find("aa01").status(),
            absl::FailedPreconditionError(index.PathFor("aa01") +
                                          " is a symbolic link; index records are never followed"));
  // Publishing replaces the link with a real record.
  ASSERT_TRUE(index.Publish(Entry("aa01")).ok());
  EXPECT_TRUE(index.Find("aa01")->has_value());
}

TEST_F(LocalIndexTest, AnAliasNamesItsKeyAndOnlyUnderItsOwnDigest) {
  LocalIndex index(dir_);
  const std::string request = Sha256Hex("request"), other = Sha256Hex("other");
  ASSERT_TRUE(index.PublishAlias(request, "aa01").ok());
  EXPECT_EQ(*index.FindAlias(request), "aa01");
  EXPECT_EQ(*index.FindAlias(other), std::nullopt);
  EXPECT_EQ(*index.AliasDigests(), std::vector<std::string>{request});
  EXPECT_TRUE(index.Keys()->empty()) << "aliases are not entries";

  ASSERT_TRUE(MakeDirectories(Dirname(index.AliasPathFor(other)), 0700).ok());
  ASSERT_EQ(rename(index.AliasPathFor(request).c_str(), index.AliasPathFor(other).c_str()), 0);
  EXPECT_EQ(
      index.FindAlias(other).status(),
      absl::DataLossError(absl::StrCat(index.AliasPathFor(other), " holds the alias of request ",
                                       request, "; not trusted")));
  std::string bytes = *ReadFile(index.AliasPathFor(other));
  bytes.back() ^= 0x01;
  ASSERT_TRUE(WriteFileAtomically(index.AliasPathFor(other), bytes, 0444).ok());
  EXPECT_EQ(index.FindAlias(other).status(),
            absl::DataLossError(index.AliasPathFor(other) + " fails its checksum; not trusted"));
}

// An alias is written on the reply path of a hit and only saves a round
// trip, so it costs no fsync; an index record does.
TEST_F(LocalIndexTest, PublishingAnAliasDoesNotSync) {
  LocalIndex index(dir_);
  const int before = fsync_calls;
  ASSERT_TRUE(index.PublishAlias(Sha256Hex("request"), "aa01").ok());
  EXPECT_EQ(fsync_calls - before, 0);
  EXPECT_EQ(*index.FindAlias(Sha256Hex("request")), "aa01");
  ASSERT_TRUE(index.Publish(Entry("aa01")).ok());
  EXPECT_EQ(fsync_calls - before, 1);
}

// One walk gives every record's last touch, as LastTouched gives each.
TEST_F(LocalIndexTest, AllTouchedGivesEveryRecordsLastUse) {
  LocalIndex index(dir_);
  for (const char* key : {"aa01", "bb01"}) ASSERT_TRUE(index.Publish(Entry(key)).ok());
  const struct timespec times[2] = {{0, UTIME_OMIT}, {1'000'000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, index.PathFor("bb01").c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
  auto touched = index.AllTouched();
  ASSERT_TRUE(touched.ok()) << touched.status();
  ASSERT_EQ(touched->size(), 2u);
  EXPECT_EQ(touched->at("bb01"), absl::FromUnixSeconds(1'000'000));
  EXPECT_EQ(touched->at("aa01"), *index.LastTouched("aa01"));
}

TEST_F(LocalIndexTest, ReconcileRemovesDamagedAndLostRecords) {
  MemoryStore store;
  LocalIndex index(dir_);
  for (const char* key : {"aa01", "aa02", "bb01"}) {
    kiln::v1::ArtifactMetadata entry = Entry(key);
    entry.set_digest(Sha256Hex(std::string("blob-") + key));
    ASSERT_TRUE(index.Publish(entry).ok());
    if (std::string(key) != "aa02") {
      ASSERT_TRUE(store.Put(entry, std::string("blob-") + key).ok());  // aa02 was lost
    }
  }
  const std::string damaged = index.PathFor("bb01");
  std::string bytes = *ReadFile(damaged);
  bytes.back() ^= 0x01;
  ASSERT_TRUE(WriteFileAtomically(damaged, bytes, 0444).ok());

  auto result = ReconcileLocalIndex(store, index);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->checked, 3);
  EXPECT_EQ(result->lost, 1);
  EXPECT_EQ(result->damaged, 1);
  EXPECT_TRUE(index.Find("aa01")->has_value());
  EXPECT_EQ(*index.Find("aa02"), std::nullopt);
  EXPECT_EQ(*index.Find("bb01"), std::nullopt);
}

TEST_F(LocalIndexTest, ReconcileRemovesAliasesOfKeysNoLongerIndexed) {
  MemoryStore store;
  LocalIndex index(dir_);
  kiln::v1::ArtifactMetadata kept = Entry("aa01");
  kept.set_digest(Sha256Hex("blob"));
  ASSERT_TRUE(store.Put(kept, "blob").ok());
  ASSERT_TRUE(index.Publish(kept).ok());
  ASSERT_TRUE(index.PublishAlias(Sha256Hex("a"), "aa01").ok());
  ASSERT_TRUE(index.PublishAlias(Sha256Hex("b"), "aa01").ok());
  ASSERT_TRUE(index.PublishAlias(Sha256Hex("c"), "cc01").ok());  // evicted since
  const std::string damaged = index.AliasPathFor(Sha256Hex("b"));
  std::string bytes = *ReadFile(damaged);
  bytes.back() ^= 0x01;
  ASSERT_TRUE(WriteFileAtomically(damaged, bytes, 0444).ok());

  auto result = ReconcileLocalIndex(store, index);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stale_aliases, 2);
  EXPECT_EQ(*index.FindAlias(Sha256Hex("a")), "aa01");
  EXPECT_EQ(*index.FindAlias(Sha256Hex("b")), std::nullopt);
  EXPECT_EQ(*index.FindAlias(Sha256Hex("c")), std::nullopt);
}

}  // namespace
}  // namespace kiln
