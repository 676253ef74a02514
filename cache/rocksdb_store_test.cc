// RocksDbStore under real damage: bytes flipped in its files on disk.
#include "cache/rocksdb_store.h"

#include <dirent.h>

#include <algorithm>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cache/index_reconcile.h"
#include "cache/local_index.h"
#include "common/files.h"
#include "common/sha256.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// Bytes no compressor shrinks, so they appear verbatim in the files.
std::string RandomBytes(int seed, size_t size) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

kiln::v1::ArtifactMetadata Entry(const std::string& key, const std::string& blob) {
  kiln::v1::ArtifactMetadata metadata;
  metadata.set_key(key);
  metadata.set_digest(Sha256Hex(blob));
  metadata.set_object_bytes(blob.size());
  metadata.set_graph_name("graph-of-" + key);
  metadata.set_compiler("compiler-of-" + key);  // in the entry only, not its usage record
  return metadata;
}

std::vector<std::string> FilesEndingIn(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> files;
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return files;
  while (const dirent* file = readdir(listing)) {
    if (absl::EndsWith(file->d_name, suffix)) files.push_back(dir + "/" + file->d_name);
  }
  closedir(listing);
  return files;
}

// Flips one byte in the middle of where `needle` occurs in one of `files`;
// returns that file, or "" when no file holds it.
std::string FlipByteWithin(const std::vector<std::string>& files, const std::string& needle) {
  for (const std::string& path : files) {
    auto bytes = ReadFile(path);
    if (!bytes.ok()) continue;
    const size_t at = bytes->find(needle);
    if (at == std::string::npos) continue;
    (*bytes)[at + needle.size() / 2] ^= 0x40;
    if (!WriteFileAtomically(path, *bytes, 0644).ok()) return "";
    return path;
  }
  return "";
}

class RocksDbDamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    db_ = dir_ + "/db";
  }
  void TearDown() override { RemoveRecursively(dir_).IgnoreError(); }

  std::unique_ptr<RocksDbStore> OpenStore() {
    auto store = RocksDbStore::Open(db_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  std::string dir_, db_;
};

TEST_F(RocksDbDamageTest, AFlippedByteInABlobsTableIsQuarantinedAndHealedByAPut) {
  std::vector<std::string> blobs;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 3; ++i) {
      blobs.push_back(RandomBytes(i, 10000));  // a block each
      const std::string key = absl::StrCat("k", i);
      ASSERT_TRUE(store->Put(Entry(key, blobs[i]), blobs[i]).ok());
    }
    ASSERT_TRUE(store->FlushForTesting().ok());
  }
  ASSERT_NE(FlipByteWithin(FilesEndingIn(db_, ".sst"), blobs[1].substr(1000, 64)), "");

  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const std::string digest = Sha256Hex(blobs[1]);
  auto blob = store->ReadBlob(digest);
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(*blob, std::nullopt) << "a damaged blob reads as a miss";
  EXPECT_EQ(store->heals(), 1) << "and the store rebuilt itself without the damaged block";
  auto totals = store->Totals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_EQ(totals->entries, 3) << "the count survives the damaged table";
  EXPECT_EQ(totals->quarantined, 1);
  EXPECT_EQ(totals->corrupt_entries, 0);
  EXPECT_EQ(totals->unreadable_ranges, 0) << "the damaged block is gone";
  EXPECT_EQ(*store->ReadBlob(digest), std::nullopt) << "and stays a miss";

  ASSERT_TRUE(store->Put(Entry("k1", blobs[1]), blobs[1]).ok()) << "the recompile heals it";
  EXPECT_EQ(store->ReadBlob(digest)->value_or("missing"), blobs[1]);
  EXPECT_EQ(store->ReadBlob(Sha256Hex(blobs[0]))->value_or("missing"), blobs[0]);
  auto listed = store->List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 3u);
}

TEST_F(RocksDbDamageTest, AFlippedByteInAnEntriesTableIsQuarantined) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 3; ++i) {
      const std::string blob = RandomBytes(i, 100);
      ASSERT_TRUE(store->Put(Entry(absl::StrCat("k", i), blob), blob).ok());
    }
    ASSERT_TRUE(store->FlushForTesting().ok());
  }
  ASSERT_NE(FlipByteWithin(FilesEndingIn(db_, ".sst"), "compiler-of-k1"), "");

  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto entry = store->Lookup("k1");
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ(*entry, std::nullopt);
  auto totals = store->Totals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_EQ(totals->corrupt_entries, 1);
  EXPECT_EQ(store->Evict("k1").status(), absl::NotFoundError("no entry k1"));
  const std::string blob = RandomBytes(1, 100);
  ASSERT_TRUE(store->Put(Entry("k1", blob), blob).ok());
  EXPECT_EQ((*store->Lookup("k1"))->digest(), Sha256Hex(blob));
}

TEST_F(RocksDbDamageTest, AFlippedByteInTheWalLosesTheEntriesAfterItAndTheIndexFollows) {
  LocalIndex index(dir_);
  std::vector<std::string> blobs;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 10; ++i) {
      blobs.push_back(RandomBytes(i, 500));
      const kiln::v1::ArtifactMetadata entry = Entry(absl::StrCat("k", i), blobs[i]);
      ASSERT_TRUE(store->Put(entry, blobs[i]).ok());  // synced, never flushed
      ASSERT_TRUE(index.Publish(entry).ok());
    }
  }
  // The sixth write's bytes are damaged in the log.
  ASSERT_NE(FlipByteWithin(FilesEndingIn(db_, ".log"), blobs[5].substr(100, 64)), "")
      << "the entries should be in the WAL only";

  auto store = OpenStore();
  ASSERT_NE(store, nullptr) << "point-in-time recovery opens the store";
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(store->Lookup(absl::StrCat("k", i))->has_value(), i < 5) << "k" << i;
  }
  auto reconciled = ReconcileLocalIndex(*store, index);
  ASSERT_TRUE(reconciled.ok()) << reconciled.status();
  EXPECT_EQ(reconciled->checked, 10);
  EXPECT_EQ(reconciled->lost, 5);
  EXPECT_EQ(reconciled->damaged, 0);
  for (int i = 0; i < 10; ++i) {
    auto record = index.Find(absl::StrCat("k", i));
    ASSERT_TRUE(record.ok()) << record.status();
    EXPECT_EQ(record->has_value(), i < 5) << "k" << i;
  }
}

// The damaged table must leave the LSM tree: a compaction over it would
// fail and, with paranoid_checks, stop every write until a restart that
// brings the same file back.
class RocksDbHealTest : public RocksDbDamageTest {
 protected:
  // Puts k0..k{n-1} (10 KB random blobs) and flushes them into one table.
  void Fill(int n) {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < n; ++i) {
      blobs_.push_back(RandomBytes(i, 10000));
      ASSERT_TRUE(store->Put(Entry(absl::StrCat("k", i), blobs_[i]), blobs_[i]).ok());
    }
    ASSERT_TRUE(store->FlushForTesting().ok());
  }

  // Every key but the damaged ones reads back whole; the damaged ones are
  // misses; nothing in the store is unreadable.
  void ExpectConsistent(RocksDbStore& store, const std::set<int>& lost) {
    for (int i = 0; i < static_cast<int>(blobs_.size()); ++i) {
      const std::string key = absl::StrCat("k", i);
      auto entry = store.Lookup(key);
      ASSERT_TRUE(entry.ok()) << key << ": " << entry.status();
      auto blob = store.ReadBlob(Sha256Hex(blobs_[i]));
      ASSERT_TRUE(blob.ok()) << key << ": " << blob.status();
      if (lost.count(i) > 0) {
        EXPECT_FALSE(blob->has_value()) << key;
      } else {
        EXPECT_TRUE(entry->has_value()) << key;
        EXPECT_EQ(blob->value_or("missing"), blobs_[i]) << key;
      }
    }
    auto totals = store.Totals();
    ASSERT_TRUE(totals.ok()) << totals.status();
    EXPECT_EQ(totals->unreadable_ranges, 0);
  }

  std::vector<std::string> blobs_;
};

TEST_F(RocksDbHealTest, AfterADamagedReadCompactionsAndWritesSucceedAndAReopenIsConsistent) {
  Fill(6);
  ASSERT_NE(FlipByteWithin(FilesEndingIn(db_, ".sst"), blobs_[2].substr(5000, 64)), "");
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    auto blob = store->ReadBlob(Sha256Hex(blobs_[2]));
    ASSERT_TRUE(blob.ok()) << blob.status();
    EXPECT_EQ(*blob, std::nullopt) << "the damaged key is a miss";
    EXPECT_EQ(store->Totals()->quarantined, 1);
    EXPECT_EQ(store->heals(), 1);

    const absl::Status compacted = store->CompactForTesting();
    EXPECT_TRUE(compacted.ok()) << "no damaged table is left to fail a compaction: " << compacted;
    for (int i = 6; i < 9; ++i) {
      blobs_.push_back(RandomBytes(i, 10000));
      const absl::Status put = store->Put(Entry(absl::StrCat("k", i), blobs_[i]), blobs_[i]);
      EXPECT_TRUE(put.ok()) << "writes go on: " << put;
    }
    EXPECT_TRUE(store->FlushForTesting().ok());
    EXPECT_TRUE(store->CompactForTesting().ok());
    ExpectConsistent(*store, {2});
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ExpectConsistent(*store, {2});
  EXPECT_EQ(store->heals(), 0) << "the damage did not come back with the restart";
  ASSERT_TRUE(store->Put(Entry("k2", blobs_[2]), blobs_[2]).ok()) << "the recompile heals the key";
  ExpectConsistent(*store, {});
}

TEST_F(RocksDbHealTest, ACompactionThatMeetsTheDamageFirstHealsTheStore) {
  Fill(6);
  ASSERT_NE(FlipByteWithin(FilesEndingIn(db_, ".sst"), blobs_[3].substr(5000, 64)), "");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  // Nothing has read the damaged block: the compaction is first to.
  const absl::Status compacted = store->CompactForTesting();
  EXPECT_TRUE(compacted.ok()) << compacted;
  EXPECT_EQ(store->heals(), 1);
  blobs_.push_back(RandomBytes(6, 10000));
  const absl::Status put = store->Put(Entry("k6", blobs_[6]), blobs_[6]);
  EXPECT_TRUE(put.ok()) << put;
  ExpectConsistent(*store, {3});
}

TEST_F(RocksDbHealTest, BackgroundCompactionsOverADamagedTableDoNotStopWrites) {
  Fill(6);
  ASSERT_NE(FlipByteWithin(FilesEndingIn(db_, ".sst"), blobs_[1].substr(5000, 64)), "");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  // Level 0 compacts into level 1 by itself from four tables on.
  for (int i = 6; i < 16; ++i) {
    blobs_.push_back(RandomBytes(i, 10000));
    const absl::Status put = store->Put(Entry(absl::StrCat("k", i), blobs_[i]), blobs_[i]);
    ASSERT_TRUE(put.ok()) << "k" << i << ": " << put;
    const absl::Status flushed = store->FlushForTesting();
    ASSERT_TRUE(flushed.ok()) << "k" << i << ": " << flushed;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(store->CompactForTesting().ok());
  EXPECT_GE(store->heals(), 1);
  ExpectConsistent(*store, {1});
}

// Damages the database behind the store's back, then checks that Open
// moves it aside, starts empty and says so.
void ExpectOpensEmptyAfter(const std::string& db, const std::function<void()>& damage) {
  {
    auto store = RocksDbStore::Open(db);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Put(Entry("k1", "bytes"), "bytes").ok());
  }
  damage();
  ::testing::internal::CaptureStderr();
  auto store = RocksDbStore::Open(db);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(absl::StrContains(log, "THE STORE WAS DAMAGED AND IS RESET")) << log;
  EXPECT_TRUE(absl::StrContains((*store)->moved_aside(), db + ".corrupt-"));
  EXPECT_TRUE(absl::StrContains(log, (*store)->moved_aside())) << log;
  EXPECT_TRUE(ReadFile((*store)->moved_aside() + "/CURRENT").ok()) << "kept for inspection";
  EXPECT_EQ(*(*store)->Lookup("k1"), std::nullopt);
  ASSERT_TRUE((*store)->Put(Entry("k2", "more"), "more").ok());
  EXPECT_TRUE((*store)->Lookup("k2")->has_value());
}

// A format 2 store's usage records lack the listing's fields: opening it
// writes them from the metadata, keeping each entry's last use and pin.
TEST_F(RocksDbDamageTest, AFormat2StoreIsUpgradedKeepingUsesAndPins) {
  {
    auto store = RocksDbStore::Open(db_);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Put(Entry("k1", "one"), "one").ok());
  }
  {
    rocksdb::DB* raw = nullptr;
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const char* name : {"default", "entries", "blobs", "quarantine", "usage"}) {
      families.emplace_back(name, rocksdb::ColumnFamilyOptions());
    }
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), db_, families, &handles, &raw).ok());
    kiln::v1::StoredUsage old;  // as format 2 wrote it
    old.set_digest(Sha256Hex("one"));
    old.set_object_bytes(3);
    old.set_last_use_unix_ms(7000);
    old.set_pinned(true);
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), handles[4], "k1", old.SerializeAsString()).ok());
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), handles[0], "format", "2").ok());
    for (auto* handle : handles) ASSERT_TRUE(raw->DestroyColumnFamilyHandle(handle).ok());
    ASSERT_TRUE(raw->Close().ok());
    delete raw;
  }
  auto store = RocksDbStore::Open(db_);
  ASSERT_TRUE(store.ok()) << store.status();
  auto usage = (*store)->Usage();
  ASSERT_TRUE(usage.ok()) << usage.status();
  ASSERT_EQ(usage->size(), 1u);
  EXPECT_EQ((*usage)[0].graph_name, "graph-of-k1");
  EXPECT_EQ((*usage)[0].last_use, absl::FromUnixMillis(7000));
  EXPECT_TRUE((*usage)[0].pinned);
  EXPECT_EQ((*store)->Totals()->entries, 1);
}

// A database that cannot open is repaired from the table files and WAL
// that read whole: only what a damaged file held is lost.
class RocksDbRepairTest : public RocksDbDamageTest {
 protected:
  // k0..k2 flushed into one table per family, k3..k5 into another, k6 in
  // the WAL only.
  void SetUp() override {
    RocksDbDamageTest::SetUp();
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 7; ++i) {
      const std::string blob = RandomBytes(i, 1000);
      ASSERT_TRUE(store->Put(Entry(absl::StrCat("k", i), blob), blob).ok());
      if (i == 2 || i == 5) ASSERT_TRUE(store->FlushForTesting().ok());
    }
  }

  // Opens the damaged store, checks that it was repaired (not reset) and
  // that it holds exactly `keys`, each whole, in every view.
  void ExpectRepairedHolding(const std::vector<std::string>& keys) {
    ::testing::internal::CaptureStderr();
    auto store = RocksDbStore::Open(db_);
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_TRUE(absl::StrContains(log, "THE STORE WAS DAMAGED AND IS REPAIRED")) << log;
    EXPECT_TRUE(absl::StrContains(log, absl::StrCat("kept ", keys.size(), " entries"))) << log;
    EXPECT_FALSE(absl::StrContains(log, "IS RESET")) << log;
    auto entries = (*store)->List();
    auto usages = (*store)->Usage();
    ASSERT_TRUE(entries.ok() && usages.ok());
    std::vector<std::string> listed, used;
    for (const auto& entry : *entries) listed.push_back(entry.key());
    for (const EntryUsage& usage : *usages) used.push_back(usage.key);
    EXPECT_EQ(listed, keys);
    EXPECT_EQ(used, keys);
    auto totals = (*store)->Totals();
    ASSERT_TRUE(totals.ok()) << totals.status();
    EXPECT_EQ(totals->entries, static_cast<int64_t>(keys.size()));
    EXPECT_EQ(totals->blobs, static_cast<int64_t>(keys.size()));
    EXPECT_EQ(totals->blob_bytes, static_cast<int64_t>(1000 * keys.size()));
    for (const std::string& key : keys) {
      auto entry = (*store)->Lookup(key);
      ASSERT_TRUE(entry.ok() && entry->has_value()) << key;
      const std::string blob = RandomBytes(key[1] - '0', 1000);
      EXPECT_EQ((*store)->ReadBlob((*entry)->digest())->value_or("missing"), blob) << key;
    }
    EXPECT_EQ((*store)->heals(), 0);
    ASSERT_TRUE((*store)->Put(Entry("k9", "more"), "more").ok());
    EXPECT_TRUE((*store)->Lookup("k9")->has_value());
  }

  std::vector<std::string> AllKeys() { return {"k0", "k1", "k2", "k3", "k4", "k5", "k6"}; }
};

TEST_F(RocksDbRepairTest, AFlippedByteInCurrentLosesNothing) {
  auto current = ReadFile(db_ + "/CURRENT");
  ASSERT_TRUE(current.ok());
  (*current)[0] ^= 0x20;  // "mANIFEST-...": names no file
  ASSERT_TRUE(WriteFileAtomically(db_ + "/CURRENT", *current, 0644).ok());
  ExpectRepairedHolding(AllKeys());
}

TEST_F(RocksDbRepairTest, AFlippedByteInTheManifestLosesNothing) {
  ASSERT_NE(FlipByteWithin(FilesEndingIn(db_, ""), "leveldb.BytewiseComparator"), "");
  ExpectRepairedHolding(AllKeys());
}

TEST_F(RocksDbRepairTest, AFlippedByteInATablesFooterLosesOnlyThatTablesEntries) {
  // The entries family's second table (k3..k5): its metadata, not its data.
  std::string table;
  for (const std::string& path : FilesEndingIn(db_, ".sst")) {
    if (absl::StrContains(*ReadFile(path), "compiler-of-k4")) table = path;
  }
  ASSERT_NE(table, "");
  auto bytes = ReadFile(table);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() - 3] ^= 0x40;  // the footer's magic number
  ASSERT_TRUE(WriteFileAtomically(table, *bytes, 0644).ok());
  ExpectRepairedHolding({"k0", "k1", "k2", "k6"});
}

// RocksDB's repair learns a family from its table files and drops what the
// WAL holds for a family it did not learn.
TEST_F(RocksDbDamageTest, ARepairKeepsTheFirstEntryOfANewStore) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Put(Entry("k1", "bytes"), "bytes").ok());
  }
  ASSERT_TRUE(WriteFileAtomically(db_ + "/CURRENT", "MANIFEST-9\xff\n", 0644).ok());
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto entry = store->Lookup("k1");
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_TRUE(entry->has_value());
  EXPECT_EQ(store->ReadBlob(Sha256Hex("bytes"))->value_or("missing"), "bytes");
  EXPECT_EQ(store->Totals()->entries, 1);
}

TEST_F(RocksDbDamageTest, AStoreThatRepairCannotFixStartsEmpty) {
  ExpectOpensEmptyAfter(db_, [&] {
    ASSERT_TRUE(WriteFileAtomically(db_ + "/CURRENT", "MANIFEST-9\xff\n", 0644).ok());
    // Where the repair would write its new CURRENT: it fails.
    ASSERT_TRUE(MakeDirectories(db_ + "/000001.dbtmp/x", 0700).ok());
  });
}

// A copy of a damaged database beside `db`'s directory.
void MakeCopy(const std::string& db, const std::string& name) {
  const std::string copy = absl::StrCat(Dirname(db), "/", name);
  ASSERT_TRUE(MakeDirectories(copy, 0700).ok());
  ASSERT_TRUE(WriteFileAtomically(copy + "/CURRENT", "MANIFEST-000001\n", 0644).ok());
}

// Opens the store in `db`; returns what is beside it after the open.
std::vector<std::string> CopiesLeftAfterOpen(const std::string& db, int max_corrupt_copies) {
  RocksDbStore::Options options;
  options.max_corrupt_copies = max_corrupt_copies;
  auto store = RocksDbStore::Open(db, options);
  EXPECT_TRUE(store.ok()) << store.status();
  std::vector<std::string> copies;
  for (const std::string& path : FilesEndingIn(Dirname(db), "")) {
    if (absl::StrContains(path, "/db.")) copies.push_back(path.substr(Dirname(db).size() + 1));
  }
  std::sort(copies.begin(), copies.end());
  return copies;
}

TEST_F(RocksDbDamageTest, OpenKeepsOnlyTheNewestCopiesOfDamagedDatabases) {
  for (const char* copy : {"db.corrupt-1700000000000", "db.corrupt-1700000000001-2",
                           "db.corrupt-1700000000001", "db.corrupt-1600000000000"}) {
    MakeCopy(db_, copy);
  }
  ASSERT_TRUE(MakeDirectories(dir_ + "/db.other", 0700).ok());
  EXPECT_EQ(CopiesLeftAfterOpen(db_, 2),
            (std::vector<std::string>{"db.corrupt-1700000000001", "db.corrupt-1700000000001-2",
                                      "db.other"}));
  EXPECT_EQ(CopiesLeftAfterOpen(db_, 0), (std::vector<std::string>{"db.other"}));
}

TEST_F(RocksDbRepairTest, ARepairsCopyCountsAgainstTheBound) {
  MakeCopy(db_, "db.corrupt-1600000000000");
  ASSERT_TRUE(WriteFileAtomically(db_ + "/CURRENT", "MANIFEST-9\xff\n", 0644).ok());
  const std::vector<std::string> copies = CopiesLeftAfterOpen(db_, 1);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_NE(copies[0], "db.corrupt-1600000000000") << "the older copy goes";
  const std::vector<std::string> kept = FilesEndingIn(dir_ + "/" + copies[0], "");
  EXPECT_TRUE(std::any_of(kept.begin(), kept.end(), [](const std::string& path) {
    return absl::StrContains(path, "/MANIFEST-");
  })) << "the repair's copy holds the MANIFEST it set aside";
}

// A heal copies each family on its own: what it keeps must agree, so that
// the counts and listings show what a lookup finds.
TEST_F(RocksDbDamageTest, AfterAHealThatLostEveryEntryNothingIsCountedOrListed) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 5; ++i) {
      const std::string blob = RandomBytes(i, 100);
      ASSERT_TRUE(store->Put(Entry(absl::StrCat("k", i), blob), blob).ok());
    }
    ASSERT_TRUE(store->FlushForTesting().ok());
  }
  // Every entry is in the one damaged block; their usage and blobs are not.
  ASSERT_NE(FlipByteWithin(FilesEndingIn(db_, ".sst"), "compiler-of-k0"), "");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->Lookup("k0"), std::nullopt);
  EXPECT_EQ(store->heals(), 1);
  auto totals = store->Totals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_EQ(totals->entries, 0);
  EXPECT_EQ(totals->blobs, 0);
  EXPECT_EQ(totals->blob_bytes, 0);
  EXPECT_EQ(totals->corrupt_entries, 1);
  EXPECT_EQ(store->List()->size(), 0u);
  EXPECT_EQ(store->Usage()->size(), 0u);
  EXPECT_EQ(store->ListAfter("", 10)->size(), 0u);
  EXPECT_EQ(*store->ReadBlob(Sha256Hex(RandomBytes(0, 100))), std::nullopt)
      << "a blob no entry references goes with the entries";
}

}  // namespace
}  // namespace kiln
