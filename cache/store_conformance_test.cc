// One suite, every ArtifactStore implementation.
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cache/memory_store.h"
#include "cache/object_dir.h"
#include "cache/rocksdb_store.h"
#include "common/files.h"
#include "common/sha256.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

struct Backend {
  std::string name;
  // Creates a store in `dir` (ignored by the in-memory one).
  std::function<std::unique_ptr<ArtifactStore>(const std::string& dir)> open;
  std::function<void(ArtifactStore&, const std::string& digest)> corrupt;
  std::function<void(ArtifactStore&, const std::string& key)> corrupt_entry;
};

class StoreConformanceTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    store_ = GetParam().open(dir_ + "/db");
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override {
    store_.reset();
    RemoveRecursively(dir_).IgnoreError();
  }

  static kiln::v1::ArtifactMetadata Entry(const std::string& key, const std::string& blob) {
    kiln::v1::ArtifactMetadata metadata;
    metadata.set_key(key);
    metadata.set_digest(Sha256Hex(blob));
    metadata.set_object_bytes(blob.size());
    return metadata;
  }

  std::string dir_;
  std::unique_ptr<ArtifactStore> store_;
};

TEST_P(StoreConformanceTest, MissIsAValue) {
  auto entry = store_->Lookup("abc");
  ASSERT_TRUE(entry.ok());
  EXPECT_FALSE(entry->has_value());
  auto blob = store_->ReadBlob(Sha256Hex("x"));
  ASSERT_TRUE(blob.ok());
  EXPECT_FALSE(blob->has_value());
}

TEST_P(StoreConformanceTest, PutThenReadBack) {
  ASSERT_TRUE(store_->Put(Entry("k1", "object-bytes"), "object-bytes").ok());
  auto entry = store_->Lookup("k1");
  ASSERT_TRUE(entry.ok() && entry->has_value());
  EXPECT_EQ((*entry)->digest(), Sha256Hex("object-bytes"));
  auto blob = store_->ReadBlob(Sha256Hex("object-bytes"));
  ASSERT_TRUE(blob.ok() && blob->has_value());
  EXPECT_EQ(**blob, "object-bytes");
  auto totals = store_->Totals();
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->entries, 1);
  EXPECT_EQ(totals->blobs, 1);
  EXPECT_EQ(totals->blob_bytes, 12);
}

TEST_P(StoreConformanceTest, PutRefusesAWrongDigest) {
  kiln::v1::ArtifactMetadata entry = Entry("k1", "object-bytes");
  EXPECT_EQ(store_->Put(entry, "other-bytes"),
            absl::InvalidArgumentError("entry k1: digest does not match the blob"));
  EXPECT_FALSE(store_->Lookup("k1")->has_value());
}

TEST_P(StoreConformanceTest, UsageRecordsUsesAndPinsAndTotalsCountSharedBlobsOnce) {
  kiln::v1::ArtifactMetadata first = Entry("k1", "shared");
  first.set_created_unix_ms(1000);
  kiln::v1::ArtifactMetadata second = Entry("k2", "shared");
  second.set_created_unix_ms(2000);
  kiln::v1::ArtifactMetadata third = Entry("k3", "own");
  third.set_created_unix_ms(3000);
  third.set_graph_name("mlp");  // the listing's fields, copied into the usage record
  third.mutable_timings()->set_total_ms(12.5);
  third.set_source_graph("g3");
  ASSERT_TRUE(store_->Put(first, "shared").ok());
  ASSERT_TRUE(store_->Put(second, "shared").ok());
  ASSERT_TRUE(store_->Put(third, "own").ok());
  ASSERT_TRUE(store_->RecordUse("k1", absl::FromUnixMillis(5000)).ok());
  ASSERT_TRUE(store_->RecordUse("k1", absl::FromUnixMillis(4000)).ok());  // older: kept 5000
  ASSERT_TRUE(store_->SetPinned("k3", true).ok());
  EXPECT_EQ(store_->RecordUse("nope", absl::Now()), absl::NotFoundError("no entry nope"));
  EXPECT_EQ(store_->SetPinned("nope", true), absl::NotFoundError("no entry nope"));

  auto usage = store_->Usage();
  ASSERT_TRUE(usage.ok()) << usage.status();
  ASSERT_EQ(usage->size(), 3u);
  EXPECT_EQ((*usage)[0].key, "k1");
  EXPECT_EQ((*usage)[0].last_use, absl::FromUnixMillis(5000));
  EXPECT_EQ((*usage)[1].last_use, absl::FromUnixMillis(2000));
  EXPECT_EQ((*usage)[1].digest, Sha256Hex("shared"));
  EXPECT_EQ((*usage)[1].object_bytes, 6);
  EXPECT_FALSE((*usage)[1].pinned);
  EXPECT_TRUE((*usage)[2].pinned);
  EXPECT_EQ((*usage)[2].graph_name, "mlp");
  EXPECT_EQ((*usage)[2].created, absl::FromUnixMillis(3000));
  EXPECT_EQ((*usage)[2].compile_ms, 12.5);
  EXPECT_EQ((*usage)[2].source_graph, "g3");
  EXPECT_EQ((*usage)[0].graph_name, "");

  auto totals = store_->Totals();
  EXPECT_EQ(totals->entries, 3);
  EXPECT_EQ(totals->blobs, 2);
  EXPECT_EQ(totals->blob_bytes, 6 + 3);
  // The shared blob stays with its last entry (an unsynced eviction, as a
  // gc's but its last, is the same eviction); a re-Put keeps the pin.
  EXPECT_EQ(*store_->Evict("k1", /*synced=*/false), std::nullopt);
  EXPECT_EQ(*store_->Lookup("k1"), std::nullopt);
  EXPECT_EQ(*store_->Evict("k2"), Sha256Hex("shared"));
  ASSERT_TRUE(store_->Put(third, "own").ok());
  totals = store_->Totals();
  EXPECT_EQ(totals->entries, 1);
  EXPECT_EQ(totals->blobs, 1);
  EXPECT_EQ(totals->blob_bytes, 3);
  EXPECT_TRUE((*store_->Usage())[0].pinned);
  // An entry recompiled to other bytes lets its old blob go.
  ASSERT_TRUE(store_->Put(Entry("k3", "other"), "other").ok());
  EXPECT_FALSE(store_->ReadBlob(Sha256Hex("own"))->has_value());
  EXPECT_EQ(store_->Totals()->blob_bytes, 5);
}

TEST_P(StoreConformanceTest, CorruptBlobIsQuarantinedAndReadAsAMiss) {
  ASSERT_TRUE(store_->Put(Entry("k1", "object-bytes"), "object-bytes").ok());
  const std::string digest = Sha256Hex("object-bytes");
  GetParam().corrupt(*store_, digest);
  auto blob = store_->ReadBlob(digest);
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_FALSE(blob->has_value());
  EXPECT_EQ(store_->Totals()->quarantined, 1);
  EXPECT_EQ(store_->Totals()->blobs, 0);
  // A fresh put (the recompile) heals it.
  ASSERT_TRUE(store_->Put(Entry("k1", "object-bytes"), "object-bytes").ok());
  EXPECT_EQ(**store_->ReadBlob(digest), "object-bytes");
}

TEST_P(StoreConformanceTest, CorruptEntryIsQuarantinedAndReadAsAMiss) {
  ASSERT_TRUE(store_->Put(Entry("k1", "object-bytes"), "object-bytes").ok());
  ASSERT_TRUE(store_->Put(Entry("k2", "other-bytes"), "other-bytes").ok());
  GetParam().corrupt_entry(*store_, "k1");
  auto entry = store_->Lookup("k1");
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ(*entry, std::nullopt);
  auto totals = store_->Totals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_EQ(totals->corrupt_entries, 1);
  EXPECT_EQ(totals->entries, 1);
  EXPECT_EQ(totals->unreadable_ranges, 0);
  EXPECT_EQ(store_->Evict("k1").status(), absl::NotFoundError("no entry k1"));
  ASSERT_EQ(store_->List()->size(), 1u);
  // The recompile heals it.
  ASSERT_TRUE(store_->Put(Entry("k1", "object-bytes"), "object-bytes").ok());
  EXPECT_EQ((*store_->Lookup("k1"))->digest(), Sha256Hex("object-bytes"));
}

TEST_P(StoreConformanceTest, BlobsAreSharedAndEvictedWithTheirLastEntry) {
  ASSERT_TRUE(store_->Put(Entry("k1", "same"), "same").ok());
  ASSERT_TRUE(store_->Put(Entry("k2", "same"), "same").ok());
  EXPECT_EQ(store_->Totals()->blobs, 1);
  auto first = store_->Evict("k1");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, std::nullopt) << "the blob stays: k2 references it";
  EXPECT_TRUE(store_->ReadBlob(Sha256Hex("same"))->has_value());
  auto last = store_->Evict("k2");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, Sha256Hex("same"));
  EXPECT_FALSE(store_->ReadBlob(Sha256Hex("same"))->has_value());
  EXPECT_EQ(store_->Evict("k2").status(), absl::NotFoundError("no entry k2"));
}

TEST_P(StoreConformanceTest, ListAndPrefixAreInKeyOrder) {
  for (const char* key : {"bb01", "aa01", "aa02"}) {
    ASSERT_TRUE(store_->Put(Entry(key, key), key).ok());
  }
  auto entries = store_->List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].key(), "aa01");
  EXPECT_EQ((*entries)[2].key(), "bb01");
  EXPECT_EQ(*store_->KeysWithPrefix("aa", 10), (std::vector<std::string>{"aa01", "aa02"}));
  EXPECT_EQ(*store_->KeysWithPrefix("aa", 1), (std::vector<std::string>{"aa01"}));
  EXPECT_TRUE(store_->KeysWithPrefix("cc", 10)->empty());
}

// Each page as "key:last use ms:pinned", its entries separated by spaces.
std::string Pages(ArtifactStore& store, int page_size) {
  std::string pages, after;
  while (true) {
    auto page = store.ListAfter(after, page_size);
    if (!page.ok()) return page.status().ToString();
    if (page->empty()) return pages;
    if (!pages.empty()) pages += " | ";
    for (const ListedEntry& entry : *page) {
      if (&entry != &page->front()) pages += " ";
      pages += absl::StrCat(entry.metadata.key(), ":", absl::ToUnixMillis(entry.usage.last_use),
                            entry.usage.pinned ? ":pinned" : "");
      after = entry.metadata.key();
    }
  }
}

TEST_P(StoreConformanceTest, ListAfterPagesInKeyOrderWithUsage) {
  for (const char* key : {"cc01", "aa01", "bb01", "aa02", "dd01"}) {
    kiln::v1::ArtifactMetadata entry = Entry(key, key);
    entry.set_created_unix_ms(1000);
    ASSERT_TRUE(store_->Put(entry, key).ok());
  }
  ASSERT_TRUE(store_->RecordUse("bb01", absl::FromUnixMillis(7000)).ok());
  ASSERT_TRUE(store_->SetPinned("cc01", true).ok());
  EXPECT_EQ(Pages(*store_, 2), "aa01:1000 aa02:1000 | bb01:7000 cc01:1000:pinned | dd01:1000");
  EXPECT_EQ(Pages(*store_, 10), "aa01:1000 aa02:1000 bb01:7000 cc01:1000:pinned dd01:1000");
  // From a key that is gone (evicted between pages): what follows it.
  ASSERT_TRUE(store_->Evict("bb01").ok());
  auto page = store_->ListAfter("bb01", 1);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].metadata.key(), "cc01");
  EXPECT_EQ((*page)[0].usage.object_bytes, 4);
  EXPECT_TRUE(store_->ListAfter("dd01", 5)->empty());
  EXPECT_TRUE(store_->ListAfter("", 0)->empty());
}

TEST_P(StoreConformanceTest, ListAfterSkipsADamagedEntry) {
  for (const char* key : {"aa01", "aa02", "aa03"}) {
    ASSERT_TRUE(store_->Put(Entry(key, key), key).ok());
  }
  GetParam().corrupt_entry(*store_, "aa02");
  auto page = store_->ListAfter("", 10);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].metadata.key(), "aa01");
  EXPECT_EQ((*page)[1].metadata.key(), "aa03");
}

TEST_P(StoreConformanceTest, PutAllStoresEveryEntryOrNone) {
  using Entries = std::vector<std::pair<kiln::v1::ArtifactMetadata, std::string>>;
  kiln::v1::ArtifactMetadata first = Entry("k1", "shared");
  first.set_created_unix_ms(1000);
  const Entries wrong = {{first, "shared"}, {Entry("k2", "bytes"), "other bytes"}};
  EXPECT_EQ(store_->PutAll(wrong),
            absl::InvalidArgumentError("entry k2: digest does not match the blob"));
  const Entries twice = {{first, "shared"}, {first, "shared"}};
  EXPECT_EQ(store_->PutAll(twice), absl::InvalidArgumentError("entry k1 is given twice"));
  EXPECT_FALSE(store_->Lookup("k1")->has_value());
  EXPECT_EQ(store_->Totals()->entries, 0);

  const Entries all = {
      {first, "shared"}, {Entry("k2", "shared"), "shared"}, {Entry("k3", "own"), "own"}};
  ASSERT_TRUE(store_->PutAll(all).ok());
  auto totals = store_->Totals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_EQ(totals->entries, 3);
  EXPECT_EQ(totals->blobs, 2);
  EXPECT_EQ(totals->blob_bytes, 6 + 3);
  EXPECT_EQ((*store_->Lookup("k2"))->digest(), Sha256Hex("shared"));
  EXPECT_EQ(**store_->ReadBlob(Sha256Hex("own")), "own");
  auto usage = store_->Usage();
  ASSERT_TRUE(usage.ok()) << usage.status();
  ASSERT_EQ(usage->size(), 3u);
  EXPECT_EQ((*usage)[0].last_use, absl::FromUnixMillis(1000));
  EXPECT_EQ((*usage)[2].object_bytes, 3);
  EXPECT_TRUE(store_->PutAll({}).ok());
}

TEST_P(StoreConformanceTest, PutEntriesReferencesBlobsPutBefore) {
  using Entries = std::vector<std::pair<kiln::v1::ArtifactMetadata, int64_t>>;
  EXPECT_EQ(store_->PutBlob(Sha256Hex("shared"), "other"),
            absl::InvalidArgumentError(
                absl::StrCat("blob ", Sha256Hex("shared"), ": digest does not match the blob")));
  ASSERT_TRUE(store_->PutBlob(Sha256Hex("shared"), "shared").ok());
  // A blob alone is no entry and in no count.
  EXPECT_EQ(store_->Totals()->blobs, 0);
  EXPECT_EQ(store_->Usage()->size(), 0u);

  const kiln::v1::ArtifactMetadata first = Entry("k1", "shared");
  const kiln::v1::ArtifactMetadata missing = Entry("k2", "never put");
  EXPECT_EQ(store_->PutEntries({{first, 6}, {missing, 9}}),
            absl::FailedPreconditionError(absl::StrCat("entry k2: its blob ", missing.digest(),
                                                       " is not stored (evicted since it was "
                                                       "put?)")));
  EXPECT_EQ(store_->PutEntries({{first, 6}, {first, 6}}),
            absl::InvalidArgumentError("entry k1 is given twice"));
  EXPECT_FALSE(store_->Lookup("k1")->has_value());

  ASSERT_TRUE(store_->PutEntries({{first, 6}, {Entry("k2", "shared"), 6}}).ok());
  auto totals = store_->Totals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_EQ(totals->entries, 2);
  EXPECT_EQ(totals->blobs, 1);
  EXPECT_EQ(totals->blob_bytes, 6);
  EXPECT_EQ(**store_->ReadBlob(Sha256Hex("shared")), "shared");
  EXPECT_EQ((*store_->Usage())[1].object_bytes, 6);
  // The last entry of the blob takes it along.
  EXPECT_EQ(*store_->Evict("k1"), std::nullopt);
  EXPECT_EQ(*store_->Evict("k2"), Sha256Hex("shared"));
  EXPECT_FALSE(store_->ReadBlob(Sha256Hex("shared"))->has_value());
  EXPECT_EQ(store_->PutEntries({{first, 6}}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_P(StoreConformanceTest, PutAllKeepsPinsAndLetsGoOfBlobsAsPutDoes) {
  using Entries = std::vector<std::pair<kiln::v1::ArtifactMetadata, std::string>>;
  ASSERT_TRUE(store_->Put(Entry("k1", "shared"), "shared").ok());
  ASSERT_TRUE(store_->Put(Entry("k2", "shared"), "shared").ok());
  ASSERT_TRUE(store_->Put(Entry("k3", "own"), "own").ok());
  ASSERT_TRUE(store_->SetPinned("k3", true).ok());
  // Both entries of "shared" move to another blob in one write: it goes.
  // k3 moves on too, but k4 takes "own" over in the same write: it stays.
  const Entries moves = {{Entry("k1", "new"), "new"},
                         {Entry("k2", "new"), "new"},
                         {Entry("k3", "other"), "other"},
                         {Entry("k4", "own"), "own"}};
  ASSERT_TRUE(store_->PutAll(moves).ok());
  EXPECT_FALSE(store_->ReadBlob(Sha256Hex("shared"))->has_value());
  EXPECT_EQ(**store_->ReadBlob(Sha256Hex("own")), "own");
  auto totals = store_->Totals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_EQ(totals->entries, 4);
  EXPECT_EQ(totals->blobs, 3);
  EXPECT_EQ(totals->blob_bytes, 3 + 5 + 3);
  auto usage = store_->Usage();
  ASSERT_TRUE(usage.ok()) << usage.status();
  ASSERT_EQ(usage->size(), 4u);
  EXPECT_TRUE((*usage)[2].pinned);
  EXPECT_FALSE((*usage)[3].pinned);
  // The counts stay right for what comes after: the last entry of a blob
  // takes it along.
  EXPECT_EQ(*store_->Evict("k4"), Sha256Hex("own"));
  EXPECT_EQ(*store_->Evict("k1"), std::nullopt);
  EXPECT_EQ(*store_->Evict("k2"), Sha256Hex("new"));
  EXPECT_EQ(store_->Totals()->blob_bytes, 5);
}

INSTANTIATE_TEST_SUITE_P(
    Backends, StoreConformanceTest,
    ::testing::Values(
        Backend{"memory", [](const std::string&) { return std::make_unique<MemoryStore>(); },
                [](ArtifactStore& store, const std::string& digest) {
                  static_cast<MemoryStore&>(store).OverwriteBlobForTesting(digest, "flipped");
                },
                [](ArtifactStore& store, const std::string& key) {
                  static_cast<MemoryStore&>(store).OverwriteEntryForTesting(key, "\xff\xff");
                }},
        Backend{
            "rocksdb",
            [](const std::string& dir) -> std::unique_ptr<ArtifactStore> {
              auto store = RocksDbStore::Open(dir);
              EXPECT_TRUE(store.ok()) << store.status();
              return store.ok() ? std::move(*store) : nullptr;
            },
            [](ArtifactStore& store, const std::string& digest) {
              ASSERT_TRUE(static_cast<RocksDbStore&>(store)
                              .OverwriteBlobForTesting(digest, "flipped")
                              .ok());
            },
            [](ArtifactStore& store, const std::string& key) {
              ASSERT_TRUE(
                  static_cast<RocksDbStore&>(store).OverwriteEntryForTesting(key, "\xff\xff").ok());
            }}),
    [](const ::testing::TestParamInfo<Backend>& info) { return info.param.name; });

TEST(RocksDbStoreTest, PersistsAcrossReopenAndRefusesASecondOpener) {
  auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(dir.ok());
  {
    auto store = RocksDbStore::Open(*dir + "/db");
    ASSERT_TRUE(store.ok());
    kiln::v1::ArtifactMetadata entry;
    entry.set_key("k1");
    entry.set_digest(Sha256Hex("bytes"));
    ASSERT_TRUE((*store)->Put(entry, "bytes").ok());
    auto second = RocksDbStore::Open(*dir + "/db");
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  }
  auto reopened = RocksDbStore::Open(*dir + "/db");
  ASSERT_TRUE(reopened.ok());
  EXPECT_TRUE((*reopened)->Lookup("k1")->has_value());
  // The totals come back from the usage records, without a scan of blobs.
  EXPECT_EQ((*reopened)->Totals()->entries, 1);
  EXPECT_EQ((*reopened)->Totals()->blob_bytes, 5);
  RemoveRecursively(*dir).IgnoreError();
}

TEST(ObjectDirectoryTest, WritesReadOnlyContentAddressedFiles) {
  auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(dir.ok());
  ObjectDirectory objects(*dir + "/objects");
  const std::string digest = Sha256Hex("so");
  EXPECT_FALSE(objects.Contains(digest));
  ASSERT_TRUE(objects.Write(digest, "so").ok());
  EXPECT_TRUE(objects.Contains(digest));
  EXPECT_EQ(objects.PathFor(digest),
            *dir + "/objects/" + digest.substr(0, 2) + "/" + digest + ".so");
  EXPECT_EQ(*ReadFile(objects.PathFor(digest)), "so");
  ASSERT_TRUE(objects.Remove(digest).ok());
  EXPECT_FALSE(objects.Contains(digest));
  RemoveRecursively(*dir).IgnoreError();
}

}  // namespace
}  // namespace kiln
