#include "daemon/traffic_store.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/sha256.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// "5x4:3 8x4:2 other:1", rows in the order stored.
std::string Print(const kiln::v1::TrafficHistogram& histogram) {
  std::string text;
  for (const auto& row : histogram.rows()) {
    absl::StrAppend(&text, absl::StrJoin(row.sizes(), "x"), ":", row.calls(), " ");
  }
  absl::StrAppend(&text, "other:", histogram.other_calls());
  return text;
}

std::string Print(const absl::StatusOr<kiln::v1::TrafficHistogram>& histogram) {
  return histogram.ok() ? Print(*histogram) : histogram.status().ToString();
}

struct Row {
  std::vector<int64_t> sizes;
  int64_t calls;
};

kiln::v1::TrafficReport Report(const std::string& digest, const std::vector<Row>& rows,
                               int64_t other_calls = 0) {
  kiln::v1::TrafficReport report;
  report.set_graph_digest(digest);
  for (const Row& row : rows) {
    auto* out = report.mutable_histogram()->add_rows();
    out->mutable_sizes()->Add(row.sizes.begin(), row.sizes.end());
    out->set_calls(row.calls);
  }
  report.mutable_histogram()->set_other_calls(other_calls);
  return report;
}

class TrafficStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    auto dir = MakeTempDirectory(absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/trafficXXXXXX"));
    ASSERT_TRUE(dir.ok()) << dir.status();
    root_ = *dir;
    dir_ = root_ + "/traffic";  // not there yet: the first Add makes it
  }
  void TearDown() override { RemoveRecursively(root_).IgnoreError(); }

  std::string root_, dir_;
  const std::string digest_ = Sha256Hex("graph");
};

TEST_F(TrafficStoreTest, ReportsMergeBySizes) {
  TrafficStore store(dir_);
  ASSERT_TRUE(store.Add(Report(digest_, {{{8, 4}, 2}, {{5, 4}, 3}}, 1)).ok());
  ASSERT_TRUE(store.Add(Report(digest_, {{{5, 4}, 4}, {{16, 4}, 1}, {{5, 4}, 1}}, 2)).ok());
  // Rows sorted by sizes; a size repeated within one report sums too.
  EXPECT_EQ(Print(store.Get(digest_)), "5x4:8 8x4:2 16x4:1 other:3");
}

TEST_F(TrafficStoreTest, GraphsAreKeptApart) {
  TrafficStore store(dir_);
  const std::string other = Sha256Hex("other graph");
  ASSERT_TRUE(store.Add(Report(digest_, {{{5, 4}, 3}})).ok());
  ASSERT_TRUE(store.Add(Report(other, {{{7}, 1}}, 4)).ok());
  EXPECT_EQ(Print(store.Get(digest_)), "5x4:3 other:0");
  EXPECT_EQ(Print(store.Get(other)), "7:1 other:4");
}

TEST_F(TrafficStoreTest, SumsOutliveTheStore) {
  {
    TrafficStore store(dir_);
    ASSERT_TRUE(store.Add(Report(digest_, {{{5, 4}, 3}, {{8, 4}, 2}}, 1)).ok());
  }
  TrafficStore reopened(dir_);
  EXPECT_EQ(Print(reopened.Get(digest_)), "5x4:3 8x4:2 other:1");
  ASSERT_TRUE(reopened.Add(Report(digest_, {{{8, 4}, 5}})).ok());
  EXPECT_EQ(Print(TrafficStore(dir_).Get(digest_)), "5x4:3 8x4:7 other:1");
}

TEST_F(TrafficStoreTest, AnUnknownGraphHasAnEmptyHistogram) {
  TrafficStore store(dir_);
  EXPECT_EQ(Print(store.Get(digest_)), "other:0") << "no directory yet";
  ASSERT_TRUE(store.Add(Report(Sha256Hex("other graph"), {{{5}, 1}})).ok());
  EXPECT_EQ(Print(store.Get(digest_)), "other:0");
}

TEST_F(TrafficStoreTest, ADigestMustBe64LowercaseHexDigits) {
  TrafficStore store(dir_);
  const std::string upper = absl::AsciiStrToUpper(digest_);
  for (const std::string& digest :
       {std::string("abc"), std::string(""), upper, "../" + digest_.substr(3), digest_ + "0"}) {
    const absl::Status expected = absl::InvalidArgumentError(
        absl::StrCat("graph digest '", digest, "' is not 64 lowercase hex digits"));
    EXPECT_EQ(store.Get(digest).status(), expected);
    EXPECT_EQ(store.Add(Report(digest, {{{5}, 1}})), expected);
  }
  const std::string long_digest(200, 'a');
  EXPECT_EQ(store.Get(long_digest).status(),
            absl::InvalidArgumentError(absl::StrCat("graph digest '", std::string(80, 'a'),
                                                    "' is not 64 lowercase hex digits")))
      << "the message quotes 80 characters at most";
  EXPECT_EQ(ReadFile(dir_).status().code(), absl::StatusCode::kNotFound) << "nothing written";
}

TEST_F(TrafficStoreTest, NegativeCountsAreRefusedAndNothingIsStored) {
  TrafficStore store(dir_);
  ASSERT_TRUE(store.Add(Report(digest_, {{{5, 4}, 3}})).ok());
  EXPECT_EQ(store.Add(Report(digest_, {{{8, 4}, 2}, {{5, 4}, -1}})),
            absl::InvalidArgumentError("a traffic row counts below zero calls"));
  EXPECT_EQ(store.Add(Report(digest_, {{{8, 4}, 2}}, -1)),
            absl::InvalidArgumentError("a traffic report counts below zero other calls"));
  EXPECT_EQ(Print(store.Get(digest_)), "5x4:3 other:0");
  EXPECT_EQ(Print(TrafficStore(dir_).Get(digest_)), "5x4:3 other:0");
}

TEST_F(TrafficStoreTest, SizesPastTheBoundCountInOtherCalls) {
  TrafficStore store(dir_);
  const int max_rows = TrafficStore::kMaxRows;
  std::vector<Row> rows;
  for (int b = 1; b <= max_rows + 3; ++b) rows.push_back({{b}, 2});
  ASSERT_TRUE(store.Add(Report(digest_, rows, 1)).ok());
  auto histogram = store.Get(digest_);
  ASSERT_TRUE(histogram.ok()) << histogram.status();
  ASSERT_EQ(histogram->rows_size(), max_rows);
  for (int r = 0; r < max_rows; ++r) {
    ASSERT_EQ(histogram->rows(r).sizes_size(), 1);
    EXPECT_EQ(histogram->rows(r).sizes(0), r + 1) << "the first sizes reported keep their rows";
    EXPECT_EQ(histogram->rows(r).calls(), 2);
  }
  EXPECT_EQ(histogram->other_calls(), 1 + 3 * 2);

  // Full: a known size still counts in its row, a new one in other_calls.
  ASSERT_TRUE(store.Add(Report(digest_, {{{7}, 5}, {{max_rows + 10}, 4}})).ok());
  histogram = store.Get(digest_);
  ASSERT_TRUE(histogram.ok()) << histogram.status();
  EXPECT_EQ(histogram->rows_size(), max_rows);
  EXPECT_EQ(histogram->rows(6).sizes(0), 7);
  EXPECT_EQ(histogram->rows(6).calls(), 7);
  EXPECT_EQ(histogram->other_calls(), 7 + 4);
}

TEST_F(TrafficStoreTest, ADamagedFileReadsAsEmptyAndTheNextAddStartsAfresh) {
  TrafficStore store(dir_);
  ASSERT_TRUE(store.Add(Report(digest_, {{{5, 4}, 3}}, 2)).ok());
  const std::string path = dir_ + "/" + digest_;
  ASSERT_TRUE(ReadFile(path).ok());
  // Not a TrafficHistogram: 'n' (0x6e) is a tag with wire type 6, which
  // does not exist.
  ASSERT_TRUE(WriteFileAtomically(path, "not a histogram \xff\xff", 0600).ok());
  EXPECT_EQ(Print(store.Get(digest_)), "other:0");
  ASSERT_TRUE(store.Add(Report(digest_, {{{8, 4}, 1}})).ok());
  EXPECT_EQ(Print(store.Get(digest_)), "8x4:1 other:0");
  EXPECT_EQ(Print(TrafficStore(dir_).Get(digest_)), "8x4:1 other:0");
}

}  // namespace
}  // namespace kiln
