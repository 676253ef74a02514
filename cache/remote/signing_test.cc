#include "cache/remote/signing.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

KeyPairPem NewPair() {
  absl::StatusOr<KeyPairPem> pair = GenerateSigningKeyPair();
  EXPECT_TRUE(pair.ok()) << pair.status();
  return *pair;
}

TEST(SigningKeysTest, AReaderVerifiesWhatTheWriterSignedAndCannotSign) {
  const KeyPairPem pair = NewPair();
  absl::StatusOr<SigningKeys> writer = SigningKeys::FromPem(pair.private_key, "");
  absl::StatusOr<SigningKeys> reader = SigningKeys::FromPem("", pair.public_key);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE(writer->can_sign());
  EXPECT_FALSE(reader->can_sign());

  absl::StatusOr<Signature> signature = writer->Sign("metadata bytes");
  ASSERT_TRUE(signature.ok()) << signature.status();
  EXPECT_EQ(signature->bytes.size(), 64u);
  EXPECT_EQ(signature->key_id.size(), 16u);
  EXPECT_TRUE(reader->Verify("metadata bytes", *signature).ok());
  EXPECT_TRUE(writer->Verify("metadata bytes", *signature).ok());

  absl::StatusOr<Signature> forged = reader->Sign("metadata bytes");
  EXPECT_EQ(forged.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(forged.status().message(), HasSubstr("only reads"));
}

TEST(SigningKeysTest, AChangedMessageOrSignatureOrAnUntrustedKeyIsRefused) {
  const KeyPairPem pair = NewPair();
  const KeyPairPem other = NewPair();
  SigningKeys writer = *SigningKeys::FromPem(pair.private_key, "");
  SigningKeys stranger = *SigningKeys::FromPem(other.private_key, "");
  SigningKeys reader = *SigningKeys::FromPem("", pair.public_key);
  Signature signature = *writer.Sign("metadata bytes");

  absl::Status changed = reader.Verify("metadata bytez", signature);
  EXPECT_EQ(changed.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(changed.message(), HasSubstr("bad signature"));

  Signature flipped = signature;
  flipped.bytes[10] ^= 1;
  EXPECT_EQ(reader.Verify("metadata bytes", flipped).code(), absl::StatusCode::kPermissionDenied);

  absl::Status untrusted = reader.Verify("metadata bytes", *stranger.Sign("metadata bytes"));
  EXPECT_EQ(untrusted.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(untrusted.message(), HasSubstr("not trusted"));

  // A stranger's signature under our key's id is still refused.
  Signature impostor = *stranger.Sign("metadata bytes");
  impostor.key_id = signature.key_id;
  EXPECT_EQ(reader.Verify("metadata bytes", impostor).code(), absl::StatusCode::kPermissionDenied);
}

TEST(SigningKeysTest, ATrustedKeysFileMayHoldSeveralKeys) {
  const KeyPairPem old_pair = NewPair();
  const KeyPairPem new_pair = NewPair();
  SigningKeys reader = *SigningKeys::FromPem("", old_pair.public_key + new_pair.public_key);
  for (const KeyPairPem* pair : {&old_pair, &new_pair}) {
    SigningKeys writer = *SigningKeys::FromPem(pair->private_key, "");
    EXPECT_TRUE(reader.Verify("m", *writer.Sign("m")).ok());
  }
}

TEST(SigningKeysTest, BadKeysAreNamed) {
  absl::StatusOr<SigningKeys> none = SigningKeys::FromPem("", "");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("no Ed25519 key"));

  absl::StatusOr<SigningKeys> garbage = SigningKeys::FromPem("not a key", "");
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(garbage.status().message(), HasSubstr("not a PEM private key"));

  // A damaged second key of a rotation is named, not skipped.
  std::string pem = NewPair().public_key;
  std::string damaged = NewPair().public_key;
  damaged[40] = '!';
  absl::StatusOr<SigningKeys> rotation = SigningKeys::FromPem("", pem + damaged);
  EXPECT_EQ(rotation.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(rotation.status().message(), HasSubstr("trusted key 2 is not a PEM public key"));
}

TEST(SigningKeysTest, LoadRefusesASigningKeyOthersCanRead) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string path = dir + "/signing.pem";
  std::ofstream(path) << NewPair().private_key;
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  absl::StatusOr<SigningKeys> loose = SigningKeys::Load(path, "");
  EXPECT_EQ(loose.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(loose.status().message(), HasSubstr("chmod 600"));

  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  absl::StatusOr<SigningKeys> keys = SigningKeys::Load(path, "");
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_TRUE(keys->can_sign());

  absl::StatusOr<SigningKeys> missing = SigningKeys::Load(dir + "/nope.pem", "");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln
