// Fuzz target: the local index's record parser (cache/local_index.h), as
// a client reads kilnd's index files. The input is the first byte `mode`,
// then `body`:
//   mode bit 0 clear: body is the whole file, as found on disk
//   mode bit 0 set:   body is a payload wrapped in a well-formed header and
//                     a correct checksum (bits 1-2 pick the version: 1, or
//                     another), so the protobuf parse and the key check are
//                     reached, not only the checksum
// The file is read back as an index entry (Find) and as the cache
// descriptor (ReadDescriptor). A record is trusted (OK) or refused with
// DataLoss / FailedPrecondition; a trusted entry names its own key.
#include "cache/local_index.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/sha256.h"
#include "tests/fuzz/fuzz_checks.h"

namespace kiln::fuzz {
namespace {

const std::string kKey(64, 'a');

// A cache directory on tmpfs when there is one (every input is two file
// writes), made once per process.
const std::string& CacheDir() {
  static const std::string* dir = [] {
    std::string pattern =
        access("/dev/shm", W_OK) == 0 ? "/dev/shm/kiln-fuzz-XXXXXX" : "/tmp/kiln-fuzz-XXXXXX";
    Check(mkdtemp(pattern.data()) != nullptr, "cannot make a temporary directory");
    Check(mkdir((pattern + "/index").c_str(), 0700) == 0, "mkdir index");
    Check(mkdir((pattern + "/index/aa").c_str(), 0700) == 0, "mkdir index/aa");
    std::atexit([] { RemoveRecursively(*dir).IgnoreError(); });
    return new std::string(pattern);
  }();
  return *dir;
}

void Write(const std::string& path, const std::string& bytes) {
  unlink(path.c_str());  // kilnd's records are 0444
  Check(WriteFileAtomically(path, bytes, 0644).ok(), "cannot write " + path);
}

}  // namespace
}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::fuzz;
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::string record(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode & 1) {
    const std::string version = (mode & 6) ? absl::StrCat(kiln::kLocalIndexRecordVersion) : "2";
    const std::string payload = std::move(record);
    record = absl::StrCat("kiln-index ", version, " ", payload.size(), " ",
                          kiln::Sha256Hex(absl::StrCat(version, " ", payload)), "\n", payload);
  }
  const kiln::LocalIndex index(CacheDir());
  Write(index.PathFor(kKey), record);
  Write(CacheDir() + "/descriptor", record);

  const auto entry = index.Find(kKey);
  CheckCode(entry.status(), {absl::StatusCode::kDataLoss, absl::StatusCode::kFailedPrecondition},
            "Find");
  if (entry.ok()) {
    Check(entry->has_value(), "Find of a written record found nothing");
    Check((*entry)->key() == kKey, "Find trusted the record of another key");
  }
  const auto descriptor = index.ReadDescriptor();
  CheckCode(descriptor.status(),
            {absl::StatusCode::kDataLoss, absl::StatusCode::kFailedPrecondition}, "ReadDescriptor");
  return 0;
}
