#include "cache/local_index.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

constexpr char kMagic[] = "kiln-index";
constexpr size_t kMaxHeaderBytes = 128;

std::string RecordChecksum(absl::string_view version, absl::string_view payload) {
  Sha256 hasher;
  hasher.Update(version);
  hasher.Update(" ");
  hasher.Update(payload);
  return hasher.HexDigest();
}

std::string EncodeRecord(const std::string& payload) {
  const std::string version = absl::StrCat(kLocalIndexRecordVersion);
  return absl::StrCat(kMagic, " ", version, " ", payload.size(), " ",
                      RecordChecksum(version, payload), "\n", payload);
}

// The payload of `record` read from `path`, after every check of the
// grammar in local_index.h.
absl::StatusOr<absl::string_view> DecodeRecord(const std::string& path, absl::string_view record) {
  const size_t newline = record.substr(0, kMaxHeaderBytes).find('\n');
  if (newline == absl::string_view::npos) {
    return absl::DataLossError(absl::StrCat(path, " is not an index record (no header)"));
  }
  const std::vector<absl::string_view> fields = absl::StrSplit(record.substr(0, newline), ' ');
  if (fields.size() != 4 || fields[0] != kMagic) {
    return absl::DataLossError(absl::StrCat(path, " is not an index record (bad header)"));
  }
  if (fields[1] != absl::StrCat(kLocalIndexRecordVersion)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is an index record of version ",
                                                      fields[1], "; this build reads ",
                                                      kLocalIndexRecordVersion));
  }
  const absl::string_view payload = record.substr(newline + 1);
  uint64_t length = 0;
  if (!absl::SimpleAtoi(fields[2], &length) || length != payload.size()) {
    return absl::DataLossError(absl::StrCat(path, " is truncated or padded (header says ",
                                            fields[2], " bytes, has ", payload.size(), ")"));
  }
  if (RecordChecksum(fields[1], payload) != fields[3]) {
    return absl::DataLossError(absl::StrCat(path, " fails its checksum; not trusted"));
  }
  return payload;
}

// Reads `path` into `bytes`, not following a symlink at its last
// component; false when there is no such file.
absl::StatusOr<bool> ReadRegularFile(const std::string& path, std::string& bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    if (errno == ELOOP) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is a symbolic link; index records are never followed"));
    }
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  }
  struct stat info;
  absl::Status status;
  if (fstat(fd, &info) != 0) {
    status = absl::InternalError(absl::StrCat("cannot stat ", path, ": ", strerror(errno)));
  } else if (!S_ISREG(info.st_mode)) {
    status = absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  } else if (info.st_size > kMaxIndexRecordBytes) {
    status = absl::FailedPreconditionError(
        absl::StrCat(path, " is ", info.st_size, " bytes, past the limit of ", kMaxIndexRecordBytes,
                     " for an index record; not read"));
  } else {
    bytes.resize(static_cast<size_t>(info.st_size));
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = read(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        status = absl::DataLossError(
            absl::StrCat("cannot read ", path, ": ", n < 0 ? strerror(errno) : "short read"));
        break;
      }
      done += n;
    }
  }
  close(fd);
  RETURN_IF_ERROR(status);
  return true;
}

// The message in the record at `path`, or nullopt when there is no such file.
template <typename Message>
absl::StatusOr<std::optional<Message>> ReadRecord(const std::string& path) {
  // A hit reads two records: into a buffer the thread keeps, so that it
  // allocates no block of their size (which costs the allocator a sweep of
  // its free lists each time in a busy process).
  constexpr size_t kKeptBytes = 64 << 10;
  thread_local std::string bytes;
  absl::Cleanup shrink = [] {
    if (bytes.capacity() > kKeptBytes) std::string().swap(bytes);
  };
  ASSIGN_OR_RETURN(const bool found, ReadRegularFile(path, bytes));
  if (!found) return std::nullopt;
  ASSIGN_OR_RETURN(const absl::string_view payload, DecodeRecord(path, bytes));
  Message message;
  if (!message.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError(absl::StrCat(path, " passes its checksum but does not parse"));
  }
  return message;
}

// Writes `payload` as the record at `path` unless a regular file is there
// (lstat: a symlink planted there is replaced, as rename replaces the link).
absl::Status PublishRecord(const std::string& path, const std::string& payload,
                           bool synced = true) {
  struct stat info;
  if (lstat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode)) return absl::OkStatus();
  const std::string record = EncodeRecord(payload);
  if (static_cast<int64_t>(record.size()) > kMaxIndexRecordBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the record for ", path, " would be ",
                                                   record.size(), " bytes, past the limit of ",
                                                   kMaxIndexRecordBytes, " for an index record"));
  }
  RETURN_IF_ERROR(MakeDirectories(Dirname(path), 0700));
  return WriteFileAtomically(path, record, 0444, synced);
}

absl::Status RemoveRecord(const std::string& path) {
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(absl::StrCat("cannot remove ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string MachineId() {
  auto id = ReadFile("/etc/machine-id");
  if (id.ok() && !id->empty()) return std::string(absl::StripAsciiWhitespace(*id));
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

std::string LocalIndex::PathFor(const std::string& key) const {
  return absl::StrCat(cache_dir_, "/index/", key.substr(0, 2), "/", key);
}

std::string LocalIndex::AliasPathFor(const std::string& request_digest) const {
  return absl::StrCat(cache_dir_, "/requests/", request_digest.substr(0, 2), "/", request_digest);
}

absl::Status LocalIndex::WriteDescriptor(const kiln::v1::CacheDescriptor& descriptor) const {
  return WriteFileAtomically(cache_dir_ + "/descriptor",
                             EncodeRecord(descriptor.SerializeAsString()), 0444);
}

absl::StatusOr<std::optional<kiln::v1::CacheDescriptor>> LocalIndex::ReadDescriptor() const {
  return ReadRecord<kiln::v1::CacheDescriptor>(cache_dir_ + "/descriptor");
}

absl::Status LocalIndex::Publish(const kiln::v1::ArtifactMetadata& metadata, bool synced) const {
  return PublishRecord(PathFor(metadata.key()), metadata.SerializeAsString(), synced);
}

absl::Status LocalIndex::Remove(const std::string& key) const { return RemoveRecord(PathFor(key)); }

absl::Status LocalIndex::RemoveAll() const {
  RETURN_IF_ERROR(RemoveRecursively(cache_dir_ + "/index"));
  return RemoveRecursively(cache_dir_ + "/requests");
}

absl::Status LocalIndex::Touch(const std::string& key) const {
  const std::string path = PathFor(key);
  const struct timespec now[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  if (utimensat(AT_FDCWD, path.c_str(), now, AT_SYMLINK_NOFOLLOW) != 0) {
    return absl::InternalError(absl::StrCat("cannot mark ", path, " used: ", strerror(errno)));
  }
  return absl::OkStatus();
}

std::optional<absl::Time> LocalIndex::LastTouched(const std::string& key) const {
  struct stat status;
  if (lstat(PathFor(key).c_str(), &status) != 0) return std::nullopt;
  return absl::TimeFromTimespec(status.st_mtim);
}

absl::StatusOr<absl::flat_hash_map<std::string, absl::Time>> LocalIndex::AllTouched() const {
  ASSIGN_OR_RETURN(const std::vector<std::string> keys, Keys());
  absl::flat_hash_map<std::string, absl::Time> touched;
  touched.reserve(keys.size());
  for (const std::string& key : keys) {
    if (std::optional<absl::Time> when = LastTouched(key)) touched.emplace(key, *when);
  }
  return touched;
}

absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> LocalIndex::Find(
    const std::string& key) const {
  const std::string path = PathFor(key);
  ASSIGN_OR_RETURN(auto metadata, ReadRecord<kiln::v1::ArtifactMetadata>(path));
  // A whole, valid record copied or renamed to another key's name is no
  // less wrong than a damaged one.
  if (metadata.has_value() && metadata->key() != key) {
    return absl::DataLossError(
        absl::StrCat(path, " holds the record of key ", metadata->key(), "; not trusted"));
  }
  return metadata;
}

absl::StatusOr<std::vector<std::string>> LocalIndex::Keys() const {
  return ListShardedFiles(cache_dir_ + "/index");
}

absl::Status LocalIndex::PublishAlias(const std::string& request_digest,
                                      const std::string& key) const {
  kiln::v1::RequestAlias alias;
  alias.set_request_digest(request_digest);
  alias.set_key(key);
  return PublishRecord(AliasPathFor(request_digest), alias.SerializeAsString(), /*synced=*/false);
}

absl::Status LocalIndex::RemoveAlias(const std::string& request_digest) const {
  return RemoveRecord(AliasPathFor(request_digest));
}

absl::StatusOr<std::optional<std::string>> LocalIndex::FindAlias(
    const std::string& request_digest) const {
  const std::string path = AliasPathFor(request_digest);
  ASSIGN_OR_RETURN(auto alias, ReadRecord<kiln::v1::RequestAlias>(path));
  if (!alias.has_value()) return std::nullopt;
  if (alias->request_digest() != request_digest) {
    return absl::DataLossError(absl::StrCat(path, " holds the alias of request ",
                                            alias->request_digest(), "; not trusted"));
  }
  return alias->key();
}

absl::StatusOr<std::vector<std::string>> LocalIndex::AliasDigests() const {
  return ListShardedFiles(cache_dir_ + "/requests");
}

}  // namespace kiln
