#include "common/sha256.h"

// OpenSSL 3 deprecates the low-level SHA256_* calls in favour of EVP, but the
// first EVP digest in a process loads the provider machinery, most of a
// fresh process's cache-hit budget. The low-level calls load nothing and
// compute the same function.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include "absl/strings/escaping.h"

namespace kiln {

struct Sha256::State {
  SHA256_CTX context;
};

Sha256::Sha256() : state_(std::make_unique<State>()) { SHA256_Init(&state_->context); }

Sha256::~Sha256() = default;

void Sha256::Update(absl::string_view bytes) {
  SHA256_Update(&state_->context, bytes.data(), bytes.size());
}

std::string Sha256::HexDigest() {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256_Final(digest, &state_->context);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

std::string Sha256Hex(absl::string_view bytes) {
  Sha256 hasher;
  hasher.Update(bytes);
  return hasher.HexDigest();
}

bool IsSha256Hex(absl::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace kiln
