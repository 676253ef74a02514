#include "common/sha256.h"

#include <openssl/evp.h>

#include "common/logging.h"
#include "absl/strings/escaping.h"

namespace kiln {

struct Sha256::State {
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  ~State() { EVP_MD_CTX_free(context); }
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  KILN_CHECK(EVP_DigestInit_ex(state_->context, EVP_sha256(), nullptr) == 1);
}

Sha256::~Sha256() = default;

void Sha256::Update(absl::string_view bytes) {
  KILN_CHECK(EVP_DigestUpdate(state_->context, bytes.data(), bytes.size()) == 1);
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  KILN_CHECK(EVP_DigestFinal_ex(state_->context, digest, &length) == 1);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string Sha256Hex(absl::string_view bytes) {
  Sha256 hasher;
  hasher.Update(bytes);
  return hasher.HexDigest();
}

}  // namespace kiln
