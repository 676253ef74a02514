#include "cache/bundle.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/sha256.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

BundleEntry Entry(const std::string& blob, const std::string& graph_name) {
  BundleEntry entry;
  entry.metadata.set_key(Sha256Hex(absl::StrCat("key of ", blob)));
  entry.metadata.set_digest(Sha256Hex(blob));
  entry.metadata.set_object_bytes(blob.size());
  entry.metadata.set_graph_name(graph_name);
  entry.blob = blob;
  return entry;
}

std::string LittleEndian(uint64_t value, int bytes) {
  std::string out(bytes, '\0');
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

// The most memory this process has had resident so far.
int64_t PeakResidentBytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return int64_t{usage.ru_maxrss} << 10;
}

class BundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    path_ = dir_ + "/bundle.kb";
    entries_ = {Entry("first object", "f"), Entry(std::string(1000, 'x'), "g"), Entry("", "empty")};
    ASSERT_TRUE(WriteBundle(path_, entries_).ok());
  }
  void TearDown() override { RemoveRecursively(dir_).IgnoreError(); }

  // The bundle with byte `offset` flipped, as a file.
  std::string Flipped(size_t offset) {
    std::string bytes = *ReadFile(path_);
    bytes[offset] ^= 0x01;
    const std::string flipped = dir_ + "/flipped.kb";
    EXPECT_TRUE(WriteFileAtomically(flipped, bytes, 0600).ok());
    return flipped;
  }

  std::string dir_, path_;
  std::vector<BundleEntry> entries_;
};

TEST_F(BundleTest, ReadsBackWhatWasWritten) {
  auto read = ReadBundle(path_);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 3u);
  for (size_t i = 0; i < entries_.size(); ++i) {
    EXPECT_EQ((*read)[i].metadata.SerializeAsString(), entries_[i].metadata.SerializeAsString());
    EXPECT_EQ((*read)[i].blob, entries_[i].blob);
  }
  EXPECT_TRUE(WriteBundle(dir_ + "/empty.kb", {}).ok());
  EXPECT_TRUE(ReadBundle(dir_ + "/empty.kb")->empty());
}

TEST_F(BundleTest, EveryFlippedByteIsRefused) {
  const size_t size = ReadFile(path_)->size();
  for (size_t offset = 0; offset < size; ++offset) {
    const absl::StatusOr<std::vector<BundleEntry>> read = ReadBundle(Flipped(offset));
    EXPECT_FALSE(read.ok()) << "byte " << offset << " of " << size << " flipped, still read";
  }
}

TEST_F(BundleTest, NamesTheEntryWhoseBlobIsDamaged) {
  // The first entry's blob is its last 12 bytes before the second entry.
  const std::string serialized = entries_[0].metadata.SerializeAsString();
  const size_t blob_offset = 20 + 4 + serialized.size() + 8;
  const std::string flipped = Flipped(blob_offset + 3);
  EXPECT_EQ(ReadBundle(flipped).status(),
            absl::DataLossError(absl::StrCat(flipped, ": entry 0 (key ",
                                             entries_[0].metadata.key().substr(0, 12),
                                             "…): blob does not match its digest")));
}

TEST_F(BundleTest, RefusesTheChecksumTruncationAndOtherFiles) {
  const size_t size = ReadFile(path_)->size();
  const std::string flipped = Flipped(size - 1);
  EXPECT_EQ(
      ReadBundle(flipped).status(),
      absl::DataLossError(absl::StrCat(flipped, ": checksum does not match: the file is damaged")));

  const std::string truncated = dir_ + "/truncated.kb";
  ASSERT_TRUE(WriteFileAtomically(truncated, ReadFile(path_)->substr(0, size - 40), 0600).ok());
  EXPECT_EQ(ReadBundle(truncated).status().code(), absl::StatusCode::kDataLoss);

  const std::string longer = dir_ + "/longer.kb";
  ASSERT_TRUE(WriteFileAtomically(longer, *ReadFile(path_) + "x", 0600).ok());
  EXPECT_EQ(ReadBundle(longer).status(),
            absl::DataLossError(
                absl::StrCat(longer, ": 1 bytes after the checksum (damaged or not one bundle)")));

  const std::string other = dir_ + "/other.kb";
  ASSERT_TRUE(WriteFileAtomically(other, std::string(64, 'a'), 0600).ok());
  EXPECT_EQ(ReadBundle(other).status(),
            absl::InvalidArgumentError(absl::StrCat(
                other, ": not a Kiln bundle (it starts with \"aaaaaaaa\", not \"KILNBNDL\")")));
  EXPECT_EQ(ReadBundle(dir_ + "/absent.kb").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(BundleTest, AHugeLengthIsRefusedWithoutAllocatingIt) {
  // Entry 0's metadata length (bytes 20..23) set to 0xffffffff.
  std::string bytes = *ReadFile(path_);
  for (int i = 20; i < 24; ++i) bytes[i] = '\xff';
  const std::string damaged = dir_ + "/huge.kb";
  ASSERT_TRUE(WriteFileAtomically(damaged, bytes, 0600).ok());
  const absl::Status status = ReadBundle(damaged).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("entry 0's metadata needs 4294967295 bytes"),
            absl::string_view::npos)
      << status;
}

TEST_F(BundleTest, ASparseFileDeclaringAHugeBlobIsRefusedBeforeItsMemoryIsTaken) {
  // One entry whose blob length says 2 GiB, in a file extended (sparse) to
  // hold that many bytes: a length that fits the file.
  const BundleEntry entry = Entry("x", "sparse");
  const std::string metadata = entry.metadata.SerializeAsString();
  constexpr uint64_t kDeclared = uint64_t{2} << 30;
  const std::string head =
      absl::StrCat("KILNBNDL", LittleEndian(1, 4), LittleEndian(1, 8),
                   LittleEndian(metadata.size(), 4), metadata, LittleEndian(kDeclared, 8));
  const std::string sparse = dir_ + "/sparse.kb";
  ASSERT_TRUE(WriteFileAtomically(sparse, head, 0600).ok());
  ASSERT_EQ(truncate(sparse.c_str(), head.size() + kDeclared + 32), 0);

  const int64_t peak_before = PeakResidentBytes();
  EXPECT_EQ(ReadBundle(sparse).status(),
            absl::ResourceExhaustedError(absl::StrCat(
                sparse, ": entry 0 (key ", entry.metadata.key().substr(0, 12),
                "…): its blob declares 2147483648 bytes, past the limit of 134217728 (kilnd "
                "--max_artifact_bytes)")));
  EXPECT_LT(PeakResidentBytes() - peak_before, BundleLimits().max_blob_bytes);
}

TEST_F(BundleTest, LengthsPastTheLimitsAreRefusedNamingThem) {
  BundleLimits limits;
  limits.max_blob_bytes = 999;  // entry 1's blob is 1000 bytes
  EXPECT_EQ(ReadBundle(path_, limits).status(),
            absl::ResourceExhaustedError(
                absl::StrCat(path_, ": entry 1 (key ", entries_[1].metadata.key().substr(0, 12),
                             "…): its blob declares 1000 bytes, past the limit of 999 (kilnd "
                             "--max_artifact_bytes)")));
  limits.max_blob_bytes = 1000;
  EXPECT_TRUE(ReadBundle(path_, limits).ok());

  const uint64_t first = entries_[0].metadata.ByteSizeLong();
  const uint64_t second = entries_[1].metadata.ByteSizeLong();
  limits.max_metadata_bytes = first + second - 1;
  EXPECT_EQ(ReadBundle(path_, limits).status(),
            absl::ResourceExhaustedError(absl::StrCat(
                path_, ": entry 1's metadata (", second, " bytes) takes the bundle's metadata to ",
                first + second, " bytes, past the limit of ", first + second - 1,
                " (kilnd --max_bundle_metadata_bytes)")));
}

TEST_F(BundleTest, AScanWithoutBlobsHandsOutLengthsAndStopsAtAnError) {
  std::vector<std::pair<std::string, uint64_t>> seen;
  auto visit = [&](const kiln::v1::ArtifactMetadata& metadata, uint64_t blob_bytes,
                   absl::string_view blob) {
    EXPECT_TRUE(blob.empty());
    seen.emplace_back(metadata.graph_name(), blob_bytes);
    if (seen.size() == 2) return absl::AbortedError("enough");
    return absl::OkStatus();
  };
  EXPECT_EQ(ScanBundle(path_, BundleLimits(), /*with_blobs=*/false, visit),
            absl::AbortedError("enough"));
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, uint64_t>>{{"f", 12}, {"g", 1000}}));
}

TEST_F(BundleTest, WriterChecksDigestsAndCount) {
  auto writer = BundleWriter::Create(dir_ + "/partial.kb", 2);
  ASSERT_TRUE(writer.ok()) << writer.status();
  BundleEntry wrong = Entry("bytes", "w");
  wrong.blob = "other bytes";
  EXPECT_EQ((*writer)->Add(wrong.metadata, wrong.blob),
            absl::InvalidArgumentError(absl::StrCat(dir_, "/partial.kb: entry 0 (key ",
                                                    wrong.metadata.key().substr(0, 12),
                                                    "…): blob does not match its digest")));
  ASSERT_TRUE((*writer)->Add(entries_[0].metadata, entries_[0].blob).ok());
  EXPECT_EQ((*writer)->Finish(), absl::FailedPreconditionError(absl::StrCat(
                                     dir_, "/partial.kb: 1 entries written of the 2 announced")));
  writer->reset();  // an unfinished bundle leaves nothing behind
  EXPECT_EQ(ReadFile(dir_ + "/partial.kb").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(BundleTest, RefusesARepeatedKey) {
  std::vector<BundleEntry> twice = {entries_[0], entries_[0]};
  ASSERT_TRUE(WriteBundle(dir_ + "/twice.kb", twice).ok());
  EXPECT_EQ(ReadBundle(dir_ + "/twice.kb").status(),
            absl::DataLossError(absl::StrCat(dir_, "/twice.kb: entry 1 (key ",
                                             entries_[0].metadata.key().substr(0, 12),
                                             "…): repeats entry 0")));
}

}  // namespace
}  // namespace kiln
