#include "cache/bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

constexpr absl::string_view kMagic = "KILNBNDL";
constexpr size_t kTrailerBytes = 32;  // a raw SHA-256
constexpr size_t kHeaderBytes = 8 + 4 + 8;

std::string LittleEndian(uint64_t value, int bytes) {
  std::string out(bytes, '\0');
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

uint64_t FromLittleEndian(absl::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    value |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  }
  return value;
}

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  return absl::Status(errno == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kInternal,
                      absl::StrCat(what, " ", path, ": ", strerror(errno)));
}

std::string EntryName(uint64_t index, const std::string& key) {
  if (key.empty()) return absl::StrCat("entry ", index);
  return absl::StrCat("entry ", index, " (key ", key.substr(0, 12), "…)");
}

// Reads the bundle front to back, hashing every byte it hands out; refuses
// a read past what the file holds before the trailer.
class BundleReader {
 public:
  BundleReader(std::string path, FILE* file, uint64_t size)
      : path_(std::move(path)), file_(file), remaining_(size) {}
  ~BundleReader() { fclose(file_); }

  uint64_t remaining() const { return remaining_; }

  // `bytes` (a fixed-size field, or a length already checked against its
  // limit) into memory.
  absl::StatusOr<std::string> Read(uint64_t bytes, absl::string_view what, bool hashed = true) {
    std::string out;
    RETURN_IF_ERROR(Stream(bytes, what, hashed, [&](absl::string_view chunk) {
      if (out.empty()) out.reserve(bytes);
      out.append(chunk.data(), chunk.size());
    }));
    return out;
  }

  absl::StatusOr<uint64_t> ReadInteger(int bytes, absl::string_view what) {
    ASSIGN_OR_RETURN(const std::string raw, Read(bytes, what));
    return FromLittleEndian(raw);
  }

  // Reads `bytes` in chunks of at most kChunkBytes, handing each to `take`.
  absl::Status Stream(uint64_t bytes, absl::string_view what, bool hashed,
                      const std::function<void(absl::string_view)>& take) {
    if (bytes > remaining_) {
      return absl::DataLossError(absl::StrCat(path_, ": ", what, " needs ", bytes,
                                              " bytes; the file has ", remaining_,
                                              " left (truncated or damaged)"));
    }
    constexpr uint64_t kChunkBytes = 1 << 20;
    std::string chunk(std::min(bytes, kChunkBytes), '\0');
    for (uint64_t left = bytes; left > 0;) {
      const size_t size = std::min(left, kChunkBytes);
      if (fread(chunk.data(), 1, size, file_) != size) {
        return absl::DataLossError(absl::StrCat(path_, ": cannot read ", what, ": ",
                                                ferror(file_) ? strerror(errno) : "end of file"));
      }
      const absl::string_view read(chunk.data(), size);
      if (hashed) hash_.Update(read);
      take(read);
      left -= size;
      remaining_ -= size;
    }
    return absl::OkStatus();
  }

  std::string HexDigest() { return hash_.HexDigest(); }

 private:
  const std::string path_;
  FILE* const file_;
  uint64_t remaining_;  // bytes not yet read, the trailer included
  Sha256 hash_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BundleWriter>> BundleWriter::Create(const std::string& path,
                                                                   uint64_t count) {
  std::string temp_path = path + ".tmpXXXXXX";
  const int fd = mkostemp(temp_path.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot create", temp_path);
  FILE* file = fdopen(fd, "wb");
  if (file == nullptr) {
    const absl::Status status = ErrnoError("cannot open", temp_path);
    close(fd);
    unlink(temp_path.c_str());
    return status;
  }
  std::unique_ptr<BundleWriter> writer(new BundleWriter(path, std::move(temp_path), file, count));
  RETURN_IF_ERROR(writer->Write(
      absl::StrCat(kMagic, LittleEndian(kBundleFormatVersion, 4), LittleEndian(count, 8))));
  return writer;
}

BundleWriter::BundleWriter(std::string path, std::string temp_path, FILE* file, uint64_t count)
    : path_(std::move(path)), temp_path_(std::move(temp_path)), file_(file), count_(count) {}

BundleWriter::~BundleWriter() {
  if (file_ == nullptr) return;
  fclose(file_);
  unlink(temp_path_.c_str());
}

absl::Status BundleWriter::Write(absl::string_view bytes) {
  if (file_ == nullptr) return absl::FailedPreconditionError("the bundle is finished");
  if (!bytes.empty() && fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    return ErrnoError("cannot write", temp_path_);
  }
  hash_.Update(bytes);
  bytes_written_ += bytes.size();
  return absl::OkStatus();
}

absl::Status BundleWriter::Add(const kiln::v1::ArtifactMetadata& metadata, absl::string_view blob) {
  if (added_ == count_) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": more entries than the ", count_, " announced"));
  }
  if (Sha256Hex(blob) != metadata.digest()) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", EntryName(added_, metadata.key()),
                                                   ": blob does not match its digest"));
  }
  const std::string serialized = metadata.SerializeAsString();
  RETURN_IF_ERROR(Write(
      absl::StrCat(LittleEndian(serialized.size(), 4), serialized, LittleEndian(blob.size(), 8))));
  RETURN_IF_ERROR(Write(blob));
  ++added_;
  return absl::OkStatus();
}

absl::Status BundleWriter::Finish() {
  if (added_ != count_) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": ", added_, " entries written of the ", count_, " announced"));
  }
  const std::string trailer = absl::HexStringToBytes(hash_.HexDigest());
  if (fwrite(trailer.data(), 1, trailer.size(), file_) != trailer.size() || fflush(file_) != 0 ||
      fchmod(fileno(file_), 0644) != 0 || fsync(fileno(file_)) != 0) {
    return ErrnoError("cannot write", temp_path_);
  }
  bytes_written_ += trailer.size();
  const int closed = fclose(file_);
  file_ = nullptr;
  if (closed != 0 || rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const absl::Status status = ErrnoError("cannot write", path_);
    unlink(temp_path_.c_str());
    return status;
  }
  return absl::OkStatus();
}

absl::Status WriteBundle(const std::string& path, const std::vector<BundleEntry>& entries) {
  ASSIGN_OR_RETURN(std::unique_ptr<BundleWriter> writer,
                   BundleWriter::Create(path, entries.size()));
  for (const BundleEntry& entry : entries) RETURN_IF_ERROR(writer->Add(entry.metadata, entry.blob));
  return writer->Finish();
}

absl::Status ScanBundle(const std::string& path, const BundleLimits& limits, bool with_blobs,
                        const BundleVisitor& visit) {
  FILE* file = fopen(path.c_str(), "rbe");
  if (file == nullptr) return ErrnoError("cannot open", path);
  struct stat info;
  if (fstat(fileno(file), &info) != 0) {
    const absl::Status status = ErrnoError("cannot read", path);
    fclose(file);
    return status;
  }
  BundleReader reader(path, file, static_cast<uint64_t>(info.st_size));
  if (reader.remaining() < kHeaderBytes + kTrailerBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a Kiln bundle (", info.st_size, " bytes is too short)"));
  }
  ASSIGN_OR_RETURN(const std::string magic, reader.Read(kMagic.size(), "the header"));
  if (magic != kMagic) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a Kiln bundle (it starts with \"",
                                                   absl::CHexEscape(magic), "\", not \"", kMagic,
                                                   "\")"));
  }
  ASSIGN_OR_RETURN(const uint64_t version, reader.ReadInteger(4, "the header"));
  if (version != kBundleFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": bundle format version ", version, "; this Kiln reads version ",
                     kBundleFormatVersion, " (export it again with this version's kiln)"));
  }
  ASSIGN_OR_RETURN(const uint64_t count, reader.ReadInteger(8, "the header"));

  uint64_t metadata_total = 0;
  // Key -> entry index. Each key came with at least its own bytes of
  // metadata, so max_metadata_bytes bounds this too.
  absl::flat_hash_map<std::string, uint64_t> seen;
  for (uint64_t i = 0; i < count; ++i) {
    const std::string where = absl::StrCat(path, ": ", EntryName(i, ""));
    ASSIGN_OR_RETURN(const uint64_t metadata_bytes,
                     reader.ReadInteger(4, EntryName(i, "") + "'s metadata length"));
    if (metadata_bytes > reader.remaining()) {
      return absl::DataLossError(absl::StrCat(where, "'s metadata needs ", metadata_bytes,
                                              " bytes; the file has ", reader.remaining(),
                                              " left (truncated or damaged)"));
    }
    metadata_total += metadata_bytes;
    if (metadata_total > limits.max_metadata_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          where, "'s metadata (", metadata_bytes, " bytes) takes the bundle's metadata to ",
          metadata_total, " bytes, past the limit of ", limits.max_metadata_bytes,
          " (kilnd --max_bundle_metadata_bytes)"));
    }
    ASSIGN_OR_RETURN(const std::string serialized,
                     reader.Read(metadata_bytes, EntryName(i, "") + "'s metadata"));
    kiln::v1::ArtifactMetadata metadata;
    if (!metadata.ParseFromString(serialized)) {
      return absl::DataLossError(absl::StrCat(where, ": metadata does not parse"));
    }
    const std::string& key = metadata.key();
    if (!IsSha256Hex(key) || !IsSha256Hex(metadata.digest())) {
      return absl::DataLossError(
          absl::StrCat(where, ": key or digest is not 64 lowercase hex digits"));
    }
    const std::string name = absl::StrCat(path, ": ", EntryName(i, key));
    if (auto [it, inserted] = seen.emplace(key, i); !inserted) {
      return absl::DataLossError(absl::StrCat(name, ": repeats entry ", it->second));
    }
    ASSIGN_OR_RETURN(const uint64_t blob_bytes,
                     reader.ReadInteger(8, EntryName(i, key) + "'s blob length"));
    if (blob_bytes > limits.max_blob_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(name, ": its blob declares ", blob_bytes, " bytes, past the limit of ",
                       limits.max_blob_bytes, " (kilnd --max_artifact_bytes)"));
    }
    std::string blob;
    if (with_blobs) blob.reserve(blob_bytes);
    Sha256 blob_hash;
    RETURN_IF_ERROR(reader.Stream(blob_bytes, EntryName(i, key) + "'s blob", /*hashed=*/true,
                                  [&](absl::string_view chunk) {
                                    blob_hash.Update(chunk);
                                    if (with_blobs) blob.append(chunk.data(), chunk.size());
                                  }));
    if (blob_hash.HexDigest() != metadata.digest()) {
      return absl::DataLossError(absl::StrCat(name, ": blob does not match its digest"));
    }
    RETURN_IF_ERROR(visit(metadata, blob_bytes, blob));
  }
  const std::string computed = reader.HexDigest();
  ASSIGN_OR_RETURN(const std::string trailer,
                   reader.Read(kTrailerBytes, "the checksum", /*hashed=*/false));
  if (reader.remaining() != 0) {
    return absl::DataLossError(absl::StrCat(path, ": ", reader.remaining(),
                                            " bytes after the checksum (damaged or not one "
                                            "bundle)"));
  }
  if (absl::BytesToHexString(trailer) != computed) {
    return absl::DataLossError(
        absl::StrCat(path, ": checksum does not match: the file is damaged"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BundleEntry>> ReadBundle(const std::string& path,
                                                    const BundleLimits& limits) {
  std::vector<BundleEntry> entries;
  RETURN_IF_ERROR(
      ScanBundle(path, limits, /*with_blobs=*/true,
                 [&](const kiln::v1::ArtifactMetadata& metadata, uint64_t, absl::string_view blob) {
                   entries.push_back(BundleEntry{metadata, std::string(blob)});
                   return absl::OkStatus();
                 }));
  return entries;
}

}  // namespace kiln
