// Fuzz target: the artifact store's entries. The input is the bytes of a
// stored entry (binary kiln.v1.ArtifactMetadata, cache/rocksdb_store.h);
// those that parse are put into a RocksDbStore (on tmpfs, opened once)
// and into a MemoryStore with a fixed blob, then read back through every
// read the daemon makes: Lookup, KeysWithPrefix, List, ReadBlob, Evict.
// Both stores must give back what was put; nothing may crash.
//
// Not covered: entry bytes that do not parse as they come out of RocksDB
// (Lookup quarantines them); a value cannot be planted under the store
// while it holds the database open. rocksdb_store_test covers that path.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "cache/memory_store.h"
#include "cache/rocksdb_store.h"
#include "common/files.h"
#include "common/sha256.h"
#include "tests/fuzz/fuzz_checks.h"

namespace kiln::fuzz {
namespace {

constexpr char kBlob[] =
    "\x7f"
    "ELF not really";

ArtifactStore& Rocks() {
  static RocksDbStore* store = [] {
    std::string pattern =
        access("/dev/shm", W_OK) == 0 ? "/dev/shm/kiln-fuzz-XXXXXX" : "/tmp/kiln-fuzz-XXXXXX";
    Check(mkdtemp(pattern.data()) != nullptr, "cannot make a temporary directory");
    static std::string directory = pattern;
    std::atexit([] { RemoveRecursively(directory).IgnoreError(); });
    auto opened = RocksDbStore::Open(pattern + "/store");
    Check(opened.ok(), "cannot open the store: " + opened.status().ToString());
    return opened->release();
  }();
  return *store;
}

void RoundTrip(ArtifactStore& store, const kiln::v1::ArtifactMetadata& metadata,
               const char* which) {
  const std::string& key = metadata.key();
  const std::string what = std::string(which) + " ";
  CheckCode(store.Put(metadata, kBlob), {}, (what + "Put").c_str());
  auto found = store.Lookup(key);
  Check(found.ok() && found->has_value(), what + "Lookup after Put found nothing");
  Check((*found)->SerializeAsString() == metadata.SerializeAsString(),
        what + "Lookup gave back other metadata");
  auto keys = store.KeysWithPrefix(key.substr(0, 2), 1000);
  Check(keys.ok(), what + "KeysWithPrefix failed");
  auto listed = store.List();
  Check(listed.ok() && listed->size() == 1, what + "List of one entry");
  auto blob = store.ReadBlob(metadata.digest());
  Check(blob.ok() && blob->has_value() && **blob == kBlob, what + "ReadBlob");
  auto evicted = store.Evict(key);
  Check(evicted.ok(), what + "Evict failed");
  auto gone = store.Lookup(key);
  Check(gone.ok() && !gone->has_value(), what + "Lookup after Evict found the entry");
}

}  // namespace
}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::fuzz;
  kiln::v1::ArtifactMetadata metadata;
  if (!metadata.ParseFromArray(data, static_cast<int>(size))) return 0;
  metadata.set_digest(kiln::Sha256Hex(kBlob));  // Put refuses any other
  static kiln::MemoryStore memory;
  RoundTrip(memory, metadata, "MemoryStore");
  RoundTrip(Rocks(), metadata, "RocksDbStore");
  return 0;
}
