// Cache bundles: cache entries and their blobs in one checksummed file, for
// moving a warmed cache to another machine (`kiln export` / `kiln import`,
// docs/OPERATIONS.md "Bundles").
//
//   bundle   := header entry* trailer
//   header   := "KILNBNDL" (8 bytes) | format version (u32) | entry count (u64)
//   entry    := metadata length (u32) | kiln.v1.ArtifactMetadata (binary)
//               | blob length (u64) | blob (shared-object bytes)
//   trailer  := SHA-256 (32 bytes) of every byte before it
//   Integers are little-endian.
//
// A reader checks the magic and version, that each length fits in what is
// left of the file and within BundleLimits before anything is allocated for
// it, that each metadata parses and names its key and digest as 64 hex
// digits (both become file names), that no key repeats, that each blob
// hashes to its metadata's digest (hashed as it is read, in bounded
// chunks), that the file ends right after the trailer, and the trailer
// itself. So any flipped byte is refused, and no length in the file decides
// how much memory a reader takes. The checksum detects damage, not
// tampering: a bundle is as trustworthy as where it came from.
//
// IF YOU CHANGE THE LAYOUT, BUMP kBundleFormatVersion.
#ifndef KILN_CACHE_BUNDLE_H_
#define KILN_CACHE_BUNDLE_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/sha256.h"
#include "proto/artifact.pb.h"

namespace kiln {

inline constexpr uint32_t kBundleFormatVersion = 1;

struct BundleEntry {
  kiln::v1::ArtifactMetadata metadata;
  std::string blob;
};

// Writes a bundle one entry at a time, so that an export holds one blob in
// memory, not all of them. The file appears at `path` only when Finish
// succeeds (written beside it, synced, renamed over it); a writer destroyed
// before that removes its temporary file. Not thread-safe.
class BundleWriter {
 public:
  // Starts a bundle of exactly `count` entries.
  static absl::StatusOr<std::unique_ptr<BundleWriter>> Create(const std::string& path,
                                                              uint64_t count);
  ~BundleWriter();
  BundleWriter(const BundleWriter&) = delete;
  BundleWriter& operator=(const BundleWriter&) = delete;

  // InvalidArgument when `blob` does not hash to metadata.digest() or more
  // than `count` entries are added.
  absl::Status Add(const kiln::v1::ArtifactMetadata& metadata, absl::string_view blob);
  // Writes the trailer and publishes the file. FailedPrecondition when fewer
  // than `count` entries were added.
  absl::Status Finish();
  // Bytes written so far (the whole file once finished).
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  BundleWriter(std::string path, std::string temp_path, FILE* file, uint64_t count);
  absl::Status Write(absl::string_view bytes);

  const std::string path_;
  const std::string temp_path_;
  FILE* file_;  // null once finished
  const uint64_t count_;
  uint64_t added_ = 0;
  uint64_t bytes_written_ = 0;
  Sha256 hash_;
};

// Writes `entries` to `path` as one bundle.
absl::Status WriteBundle(const std::string& path, const std::vector<BundleEntry>& entries);

// What a reader accepts. A reader holds at most one blob and every entry's
// metadata, so these bound its memory whatever the file says.
struct BundleLimits {
  // The largest blob an entry may declare (kilnd's --max_artifact_bytes).
  uint64_t max_blob_bytes = uint64_t{128} << 20;
  // The most metadata bytes all entries together may declare (kilnd's
  // --max_bundle_metadata_bytes); an entry's is a few kilobytes.
  uint64_t max_metadata_bytes = uint64_t{64} << 20;
};

// One checked entry: its metadata, its blob's length, and its blob when the
// scan was asked for blobs (empty otherwise).
using BundleVisitor = std::function<absl::Status(const kiln::v1::ArtifactMetadata& metadata,
                                                 uint64_t blob_bytes, absl::string_view blob)>;

// Reads the bundle at `path` front to back with every check above, calling
// `visit` with each entry once it is checked, then checks the trailer: a
// caller commits what it was handed only when ScanBundle returns OK.
// Without `with_blobs` no blob is ever held (each is hashed in 1 MiB
// chunks); with it, one at a time. An error from `visit` stops the scan and
// is returned. Errors name the file, and the entry when one is at fault
// ("warm.kb: entry 3 (key 1a2b3c4d5e6f…): blob does not match its digest"):
// NotFound when it cannot be opened, DataLoss for damage (including a
// truncated file), InvalidArgument for a file that is not a bundle or a
// bundle of another format version, ResourceExhausted for a length past
// `limits` (naming the length and the limit).
absl::Status ScanBundle(const std::string& path, const BundleLimits& limits, bool with_blobs,
                        const BundleVisitor& visit);

// Every entry of the bundle at `path`, in file order, after checking it
// whole; errors as ScanBundle's. Holds every blob: for tests and small
// bundles (kilnd imports with two ScanBundle passes).
absl::StatusOr<std::vector<BundleEntry>> ReadBundle(const std::string& path,
                                                    const BundleLimits& limits = {});

}  // namespace kiln

#endif  // KILN_CACHE_BUNDLE_H_
