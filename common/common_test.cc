#include <sys/stat.h>

#include "common/files.h"
#include "common/sha256.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 hasher;
  hasher.Update("a");
  hasher.Update("bc");
  EXPECT_EQ(hasher.HexDigest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(FilesTest, AtomicWriteThenRead) {
  auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string path = *dir + "/a/b/file";
  ASSERT_TRUE(MakeDirectories(Dirname(path), 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(path, "hello", 0444).ok());
  EXPECT_EQ(*ReadFile(path), "hello");
  struct stat info;
  ASSERT_EQ(stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0444);
  EXPECT_EQ(ReadFile(*dir + "/missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(RemoveRecursively(*dir).ok());
  EXPECT_EQ(ReadFile(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(FilesTest, PrivateDirectoryRefusesOpenMode) {
  auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(dir.ok());
  const std::string sock_dir = *dir + "/sock";
  ASSERT_TRUE(EnsurePrivateDirectory(sock_dir).ok());
  chmod(sock_dir.c_str(), 0755);
  const absl::Status status = EnsurePrivateDirectory(sock_dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("open to other users (mode 0755)"), std::string::npos) << status;
  RemoveRecursively(*dir).IgnoreError();
}

}  // namespace
}  // namespace kiln
