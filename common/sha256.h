// SHA-256 for cache keys and artifact digests (OpenSSL underneath). Never use
// std::hash or absl::Hash for anything persisted: both are seeded per process.
#ifndef KILN_COMMON_SHA256_H_
#define KILN_COMMON_SHA256_H_

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

// Incremental hasher. Not thread-safe; cheap to create.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(absl::string_view bytes);
  // Returns the 64-character lowercase hex digest. Call once.
  std::string HexDigest();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Lowercase hex SHA-256 of `bytes`.
std::string Sha256Hex(absl::string_view bytes);

// Whether `text` has the form of a digest: 64 lowercase hex digits. Digests
// name files, so one from outside is checked before it becomes a path.
bool IsSha256Hex(absl::string_view text);

}  // namespace kiln

#endif  // KILN_COMMON_SHA256_H_
