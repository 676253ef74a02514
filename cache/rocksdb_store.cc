#include "cache/rocksdb_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "rocksdb/write_batch.h"

namespace kiln {
namespace {

constexpr char kFormatKey[] = "format";

absl::Status FromRocks(const rocksdb::Status& status, absl::string_view what) {
  if (status.ok()) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", status.ToString());
  if (status.IsIOError() && absl::StrContains(status.ToString(), "lock")) {
    return absl::FailedPreconditionError(
        absl::StrCat(message, " (is another kilnd using this cache directory?)"));
  }
  if (status.IsCorruption()) return absl::DataLossError(message);
  return absl::InternalError(message);
}

rocksdb::WriteOptions SyncedWrite() {
  rocksdb::WriteOptions options;
  options.sync = true;  // a compile costs far more than an fsync
  return options;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbStore>> RocksDbStore::Open(const std::string& directory) {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.max_open_files = 256;
  options.keep_log_file_num = 4;
  rocksdb::ColumnFamilyOptions blob_options;
  blob_options.OptimizeForPointLookup(64);
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {"entries", rocksdb::ColumnFamilyOptions()},
      {"blobs", blob_options},
      {"quarantine", rocksdb::ColumnFamilyOptions()},
  };
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(options, directory, families, &handles, &db),
                            absl::StrCat("cannot open the store in ", directory)));
  std::unique_ptr<RocksDbStore> store(new RocksDbStore());
  store->db_.reset(db);
  store->default_ = handles[0];
  store->entries_ = handles[1];
  store->blobs_ = handles[2];
  store->quarantine_ = handles[3];

  std::string format;
  const rocksdb::Status read = db->Get(rocksdb::ReadOptions(), store->default_, kFormatKey, &format);
  const std::string expected = absl::StrCat(kStoreFormatVersion);
  if (read.IsNotFound()) {
    RETURN_IF_ERROR(FromRocks(db->Put(SyncedWrite(), store->default_, kFormatKey, expected),
                              "cannot write the store format"));
  } else if (!read.ok()) {
    return FromRocks(read, "cannot read the store format");
  } else if (format != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat("the store in ", directory, " has format ", format, "; this kilnd reads ",
                     expected, ". Use another --cache_dir or remove the old one"));
  }
  return store;
}

RocksDbStore::~RocksDbStore() {
  for (auto* handle : {entries_, blobs_, quarantine_, default_}) {
    if (handle != nullptr) db_->DestroyColumnFamilyHandle(handle);
  }
  if (db_ != nullptr) db_->Close().PermitUncheckedError();
}

absl::StatusOr<std::optional<kiln::v1::ArtifactMetadata>> RocksDbStore::Lookup(
    const std::string& key) {
  rocksdb::PinnableSlice value;
  const rocksdb::Status status = db_->Get(rocksdb::ReadOptions(), entries_, key, &value);
  if (status.IsNotFound()) return std::nullopt;
  RETURN_IF_ERROR(FromRocks(status, absl::StrCat("cannot read entry ", key)));
  kiln::v1::ArtifactMetadata metadata;
  if (!metadata.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return absl::DataLossError(absl::StrCat("entry ", key, " does not parse"));
  }
  return metadata;
}

absl::StatusOr<std::optional<std::string>> RocksDbStore::ReadBlob(const std::string& digest) {
  std::string bytes;
  const rocksdb::Status status = db_->Get(rocksdb::ReadOptions(), blobs_, digest, &bytes);
  if (status.IsNotFound()) return std::nullopt;
  RETURN_IF_ERROR(FromRocks(status, absl::StrCat("cannot read blob ", digest)));
  if (Sha256Hex(bytes) != digest) {
    KILN_LOG(ERROR) << "blob " << digest << " is corrupt (" << bytes.size()
                    << " bytes do not hash to their digest); quarantined";
    rocksdb::WriteBatch batch;
    batch.Put(quarantine_, digest, bytes);
    batch.Delete(blobs_, digest);
    RETURN_IF_ERROR(FromRocks(db_->Write(SyncedWrite(), &batch), "cannot quarantine a blob"));
    return std::nullopt;
  }
  return bytes;
}

absl::Status RocksDbStore::Put(const kiln::v1::ArtifactMetadata& metadata, absl::string_view blob) {
  if (Sha256Hex(blob) != metadata.digest()) {
    return absl::InvalidArgumentError(
        absl::StrCat("entry ", metadata.key(), ": digest does not match the blob"));
  }
  rocksdb::WriteBatch batch;
  batch.Put(entries_, metadata.key(), metadata.SerializeAsString());
  batch.Put(blobs_, metadata.digest(), rocksdb::Slice(blob.data(), blob.size()));
  return FromRocks(db_->Write(SyncedWrite(), &batch),
                   absl::StrCat("cannot store entry ", metadata.key()));
}

absl::StatusOr<std::vector<kiln::v1::ArtifactMetadata>> RocksDbStore::List() {
  std::vector<kiln::v1::ArtifactMetadata> entries;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), entries_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    kiln::v1::ArtifactMetadata metadata;
    if (!metadata.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      return absl::DataLossError(absl::StrCat("entry ", it->key().ToString(), " does not parse"));
    }
    entries.push_back(std::move(metadata));
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "cannot list entries"));
  return entries;
}

absl::StatusOr<std::vector<std::string>> RocksDbStore::KeysWithPrefix(const std::string& prefix,
                                                                     int limit) {
  std::vector<std::string> keys;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), entries_));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix) &&
                         static_cast<int>(keys.size()) < limit;
       it->Next()) {
    keys.push_back(it->key().ToString());
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "cannot list keys"));
  return keys;
}

absl::StatusOr<std::optional<std::string>> RocksDbStore::Evict(const std::string& key) {
  ASSIGN_OR_RETURN(const auto entry, Lookup(key));
  if (!entry.has_value()) return absl::NotFoundError(absl::StrCat("no entry ", key));
  ASSIGN_OR_RETURN(const auto entries, List());
  bool shared = false;
  for (const auto& other : entries) {
    shared |= other.key() != key && other.digest() == entry->digest();
  }
  rocksdb::WriteBatch batch;
  batch.Delete(entries_, key);
  if (!shared) batch.Delete(blobs_, entry->digest());
  RETURN_IF_ERROR(
      FromRocks(db_->Write(SyncedWrite(), &batch), absl::StrCat("cannot evict ", key)));
  if (shared) return std::nullopt;
  return entry->digest();
}

absl::StatusOr<StoreTotals> RocksDbStore::Totals() {
  StoreTotals totals;
  auto count = [&](rocksdb::ColumnFamilyHandle* family, int64_t* keys, int64_t* bytes) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), family));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      ++*keys;
      if (bytes != nullptr) *bytes += it->value().size();
    }
    return FromRocks(it->status(), "cannot count the store");
  };
  RETURN_IF_ERROR(count(entries_, &totals.entries, nullptr));
  RETURN_IF_ERROR(count(blobs_, &totals.blobs, &totals.blob_bytes));
  RETURN_IF_ERROR(count(quarantine_, &totals.quarantined, nullptr));
  return totals;
}

absl::Status RocksDbStore::OverwriteBlobForTesting(const std::string& digest,
                                                   absl::string_view bytes) {
  return FromRocks(db_->Put(SyncedWrite(), blobs_, digest, rocksdb::Slice(bytes.data(), bytes.size())),
                   "cannot overwrite blob");
}

}  // namespace kiln
