#include "cache/remote/signing.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

using KeyPtr = std::shared_ptr<EVP_PKEY>;
using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using DigestContext = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

// What OpenSSL's error queue says last (and clears it).
std::string OpenSslError() {
  unsigned long code = 0;
  unsigned long last = 0;
  while ((code = ERR_get_error()) != 0) last = code;
  if (last == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(last, text, sizeof(text));
  return text;
}

int CountPemBlocks(absl::string_view pem) {
  int blocks = 0;
  for (size_t at = pem.find("-----BEGIN "); at != absl::string_view::npos;
       at = pem.find("-----BEGIN ", at + 1)) {
    ++blocks;
  }
  return blocks;
}

Bio MemoryBio(absl::string_view pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
}

// First 16 hex digits of the SHA-256 of the raw public key: names the key
// in entries and errors without printing it.
absl::StatusOr<std::string> KeyId(EVP_PKEY* key) {
  unsigned char raw[32];
  size_t length = sizeof(raw);
  if (EVP_PKEY_get_raw_public_key(key, raw, &length) != 1) {
    return absl::InternalError(absl::StrCat("cannot read a public key: ", OpenSslError()));
  }
  return Sha256Hex(absl::string_view(reinterpret_cast<const char*>(raw), length)).substr(0, 16);
}

absl::Status CheckEd25519(EVP_PKEY* key, absl::string_view what) {
  if (EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     " is not an Ed25519 key (make one with: openssl genpkey -algorithm "
                     "ed25519)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SigningKeys> SigningKeys::Load(const std::string& private_key_path,
                                              const std::string& trusted_keys_path) {
  std::string private_pem, trusted_pem;
  if (!private_key_path.empty()) {
    ASSIGN_OR_RETURN(private_pem, ReadSecretFile(private_key_path, "signing key"));
  }
  if (!trusted_keys_path.empty()) {
    ASSIGN_OR_RETURN(trusted_pem, ReadFile(trusted_keys_path));
  }
  absl::StatusOr<SigningKeys> keys = FromPem(private_pem, trusted_pem);
  if (!keys.ok()) {
    std::vector<std::string> files;
    for (const std::string* path : {&private_key_path, &trusted_keys_path}) {
      if (!path->empty()) files.push_back(*path);
    }
    return absl::Status(keys.status().code(), absl::StrCat(keys.status().message(), " (in ",
                                                           absl::StrJoin(files, ", "), ")"));
  }
  return keys;
}

absl::StatusOr<SigningKeys> SigningKeys::FromPem(absl::string_view private_key_pem,
                                                 absl::string_view trusted_keys_pem) {
  SigningKeys keys;
  if (!private_key_pem.empty()) {
    Bio bio = MemoryBio(private_key_pem);
    KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
    if (key == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("the signing key is not a PEM private key: ", OpenSslError()));
    }
    RETURN_IF_ERROR(CheckEd25519(key.get(), "the signing key"));
    ASSIGN_OR_RETURN(keys.private_key_id_, KeyId(key.get()));
    keys.trusted_[keys.private_key_id_] = key;
    keys.private_key_ = std::move(key);
  }
  if (!trusted_keys_pem.empty()) {
    Bio bio = MemoryBio(trusted_keys_pem);
    // Every PEM block must be a key: one that does not parse must not be
    // skipped quietly (a rotation would silently trust one key fewer).
    for (int index = 0; index < CountPemBlocks(trusted_keys_pem); ++index) {
      KeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
      if (key == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("trusted key ", index + 1, " is not a PEM public key: ", OpenSslError()));
      }
      RETURN_IF_ERROR(CheckEd25519(key.get(), "a trusted key"));
      ASSIGN_OR_RETURN(std::string id, KeyId(key.get()));
      keys.trusted_[id] = std::move(key);
    }
    ERR_clear_error();  // the read past the last key
  }
  if (keys.trusted_.empty()) {
    return absl::InvalidArgumentError(
        "no Ed25519 key found: the fleet tier needs a signing key or trusted public keys");
  }
  return keys;
}

absl::StatusOr<Signature> SigningKeys::Sign(absl::string_view message) const {
  if (private_key_ == nullptr) {
    return absl::FailedPreconditionError("this machine has no signing key: it only reads");
  }
  DigestContext context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  Signature signature{private_key_id_, std::string(64, '\0')};
  size_t length = signature.bytes.size();
  if (EVP_DigestSignInit(context.get(), nullptr, nullptr, nullptr, private_key_.get()) != 1 ||
      EVP_DigestSign(context.get(), reinterpret_cast<unsigned char*>(signature.bytes.data()),
                     &length, reinterpret_cast<const unsigned char*>(message.data()),
                     message.size()) != 1) {
    return absl::InternalError(absl::StrCat("cannot sign: ", OpenSslError()));
  }
  signature.bytes.resize(length);
  return signature;
}

absl::Status SigningKeys::Verify(absl::string_view message, const Signature& signature) const {
  auto key = trusted_.find(signature.key_id);
  if (key == trusted_.end()) {
    return absl::PermissionDeniedError(
        absl::StrCat("signed by key ", signature.key_id.substr(0, 16), ", which is not trusted"));
  }
  DigestContext context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (EVP_DigestVerifyInit(context.get(), nullptr, nullptr, nullptr, key->second.get()) != 1 ||
      EVP_DigestVerify(
          context.get(), reinterpret_cast<const unsigned char*>(signature.bytes.data()),
          signature.bytes.size(), reinterpret_cast<const unsigned char*>(message.data()),
          message.size()) != 1) {
    ERR_clear_error();
    return absl::PermissionDeniedError(absl::StrCat("bad signature (key ", signature.key_id, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<KeyPairPem> GenerateSigningKeyPair() {
  EVP_PKEY* raw = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  if (raw == nullptr) return absl::InternalError(absl::StrCat("keygen: ", OpenSslError()));
  KeyPtr key(raw, &EVP_PKEY_free);
  auto write = [&](bool is_private) -> absl::StatusOr<std::string> {
    Bio bio(BIO_new(BIO_s_mem()), &BIO_free);
    const int written = is_private ? PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr,
                                                              nullptr, 0, nullptr, nullptr)
                                   : PEM_write_bio_PUBKEY(bio.get(), key.get());
    if (written != 1) return absl::InternalError(absl::StrCat("PEM: ", OpenSslError()));
    char* data = nullptr;
    const long length = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, length);
  };
  KeyPairPem pair;
  ASSIGN_OR_RETURN(pair.private_key, write(true));
  ASSIGN_OR_RETURN(pair.public_key, write(false));
  return pair;
}

}  // namespace kiln
