// Ed25519 signatures on fleet-tier entries (OpenSSL).
//
// An artifact is native code: whoever can write the shared tier would run
// their code on every machine that reads it. So each entry is signed by the
// kilnd that compiled it, and a reader checks the signature against the
// public keys it trusts before it stores or serves anything. Machines that
// only read hold just a public key: they cannot forge an entry.
//
// Keys are PEM files, as OpenSSL writes them:
//   openssl genpkey -algorithm ed25519 -out kiln-signing.pem
//   openssl pkey -in kiln-signing.pem -pubout -out kiln-signing.pub
// A trusted-keys file may hold several public keys (a rotation).
#ifndef KILN_CACHE_REMOTE_SIGNING_H_
#define KILN_CACHE_REMOTE_SIGNING_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "openssl/types.h"

namespace kiln {

struct Signature {
  std::string key_id;  // SigningKeyId of the key that made it
  std::string bytes;   // 64 bytes
};

class SigningKeys {
 public:
  // `private_key_path` (may be empty: this machine only reads) must be
  // readable by its owner alone, as ssh insists for its keys:
  // FailedPrecondition otherwise. Its public key is trusted too. Every
  // public key in `trusted_keys_path` (may be empty) is trusted.
  // InvalidArgument naming the file when a key is not an Ed25519 PEM key;
  // at least one key is needed.
  static absl::StatusOr<SigningKeys> Load(const std::string& private_key_path,
                                          const std::string& trusted_keys_path);
  // The same from PEM text (tests, benchmarks).
  static absl::StatusOr<SigningKeys> FromPem(absl::string_view private_key_pem,
                                             absl::string_view trusted_keys_pem);

  bool can_sign() const { return private_key_ != nullptr; }
  // FailedPrecondition when there is no private key.
  absl::StatusOr<Signature> Sign(absl::string_view message) const;
  // PermissionDenied naming the key when the key is not trusted or the
  // signature does not match.
  absl::Status Verify(absl::string_view message, const Signature& signature) const;

 private:
  std::string private_key_id_;
  std::shared_ptr<EVP_PKEY> private_key_;
  std::map<std::string, std::shared_ptr<EVP_PKEY>> trusted_;  // by key id
};

// A new Ed25519 key pair as PEM: {private key, public key}.
struct KeyPairPem {
  std::string private_key;
  std::string public_key;
};
absl::StatusOr<KeyPairPem> GenerateSigningKeyPair();

}  // namespace kiln

#endif  // KILN_CACHE_REMOTE_SIGNING_H_
