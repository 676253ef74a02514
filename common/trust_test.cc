#include "common/trust.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

constexpr uid_t kStranger = 54321;  // a uid nobody on the test machine uses

class TrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDirectory("/tmp/kiln-trustXXXXXX");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    trusted_ = {geteuid(), 0};
  }
  void TearDown() override { RemoveRecursively(dir_).IgnoreError(); }

  // Only root can give a file away; elsewhere the ownership cases cannot run.
  bool CanChown() const { return geteuid() == 0; }

  std::string Make(const std::string& name, mode_t mode) {
    const std::string path = dir_ + "/" + name;
    EXPECT_EQ(mkdir(path.c_str(), mode), 0) << path;
    EXPECT_EQ(chmod(path.c_str(), mode), 0);
    return path;
  }

  std::string dir_;
  std::vector<uid_t> trusted_;
};

TEST_F(TrustTest, AcceptsAPrivateDirectoryUnderStickyTmp) {
  const std::string cache = Make("cache", 0700);
  EXPECT_TRUE(CheckTrustedPath(cache, "cache directory", trusted_).ok());
  // Relative spellings and a trailing slash name the same directory.
  EXPECT_TRUE(CheckTrustedPath(cache + "/./", "cache directory", trusted_).ok());
}

TEST_F(TrustTest, RefusesADirectoryOwnedBySomeoneElse) {
  if (!CanChown()) GTEST_SKIP() << "needs root to give a directory to another uid";
  const std::string planted = Make("kiln-0", 0700);
  ASSERT_EQ(chown(planted.c_str(), kStranger, kStranger), 0);
  const absl::Status status = CheckTrustedPath(planted, "socket directory", trusted_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              HasSubstr("refusing socket directory " + planted + " is owned by uid 54321"));
  // ... and everything below it, whoever owns that.
  const std::string inner = planted + "/inner";
  ASSERT_EQ(mkdir(inner.c_str(), 0700), 0);
  EXPECT_THAT(CheckTrustedPath(inner, "cache directory", trusted_).message(),
              HasSubstr("its directory " + planted + " is owned by uid 54321"));
  // A uid the user named for a shared daemon is trusted.
  EXPECT_TRUE(CheckTrustedPath(inner, "cache directory", {geteuid(), 0, kStranger}).ok());
}

TEST_F(TrustTest, RefusesWritableByOthersUnlessAStickyAncestor) {
  const std::string open = Make("open", 0777);
  EXPECT_THAT(CheckTrustedPath(open, "cache directory", trusted_).message(),
              HasSubstr("is writable by other users (mode 0777); run: chmod go-w " + open));
  const std::string group = Make("group", 0770);
  EXPECT_EQ(CheckTrustedPath(group, "cache directory", trusted_).code(),
            absl::StatusCode::kFailedPrecondition);
  // A sticky directory is fine above the path (like /tmp) but not as it.
  const std::string sticky = Make("sticky", 01777);
  EXPECT_EQ(CheckTrustedPath(sticky, "cache directory", trusted_).code(),
            absl::StatusCode::kFailedPrecondition);
  const std::string below = sticky + "/mine";
  ASSERT_EQ(mkdir(below.c_str(), 0700), 0);
  EXPECT_TRUE(CheckTrustedPath(below, "cache directory", trusted_).ok());
}

TEST_F(TrustTest, SymlinksAreCheckedWhereTheyLead) {
  const std::string real = Make("real", 0700);
  const std::string link = dir_ + "/link";
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  EXPECT_THAT(CheckTrustedPath(link, "cache directory", trusted_).message(),
              HasSubstr("is a symlink"));
  ASSERT_EQ(mkdir((real + "/sub").c_str(), 0700), 0);
  EXPECT_TRUE(CheckTrustedPath(link + "/sub", "cache directory", trusted_).ok());

  const std::string open = Make("open", 0777);
  ASSERT_EQ(mkdir((open + "/sub").c_str(), 0700), 0);
  const std::string to_open = dir_ + "/to-open";
  ASSERT_EQ(symlink(open.c_str(), to_open.c_str()), 0);
  EXPECT_THAT(CheckTrustedPath(to_open + "/sub", "cache directory", trusted_).message(),
              HasSubstr("its directory " + open + " is writable by other users"));
}

TEST_F(TrustTest, OpenTrustedBelowFollowsNoSymlinkAndOpensOnlyFiles) {
  const std::string root = Make("cache", 0700);
  ASSERT_EQ(mkdir((root + "/objects").c_str(), 0755), 0);
  ASSERT_TRUE(WriteFileAtomically(root + "/objects/a.so", "bytes", 0444).ok());
  auto fd = OpenTrustedBelow(root, "objects/a.so", trusted_);
  ASSERT_TRUE(fd.ok()) << fd.status();
  close(*fd);

  ASSERT_EQ(symlink("/etc/passwd", (root + "/objects/b.so").c_str()), 0);
  EXPECT_THAT(OpenTrustedBelow(root, "objects/b.so", trusted_).status().message(),
              HasSubstr("a symlink where Kiln expects a file"));
  ASSERT_EQ(symlink("/etc", (root + "/escape").c_str()), 0);
  EXPECT_THAT(OpenTrustedBelow(root, "escape/passwd", trusted_).status().message(),
              HasSubstr("a symlink where Kiln expects a directory"));
  EXPECT_THAT(OpenTrustedBelow(root, "objects/../../x", trusted_).status().message(),
              HasSubstr("it climbs out with .."));
  ASSERT_EQ(mkfifo((root + "/objects/fifo.so").c_str(), 0600), 0);
  EXPECT_THAT(OpenTrustedBelow(root, "objects/fifo.so", trusted_).status().message(),
              HasSubstr("not a regular file"));
  EXPECT_EQ(OpenTrustedBelow(root, "objects/missing.so", trusted_).status().code(),
            absl::StatusCode::kNotFound);

  ASSERT_TRUE(WriteFileAtomically(root + "/objects/open.so", "bytes", 0666).ok());
  EXPECT_THAT(OpenTrustedBelow(root, "objects/open.so", trusted_).status().message(),
              HasSubstr("is writable by other users (mode 0666)"));
  if (CanChown()) {
    ASSERT_EQ(chown((root + "/objects/a.so").c_str(), kStranger, kStranger), 0);
    EXPECT_THAT(OpenTrustedBelow(root, "objects/a.so", trusted_).status().message(),
                HasSubstr("is owned by uid 54321"));
  }
}

TEST(TrustedUidsTest, AddsTheConfiguredSharedDaemonUid) {
  unsetenv("KILN_DAEMON_UID");
  auto plain = TrustedUids();
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)[0], geteuid());
  setenv("KILN_DAEMON_UID", "54321", 1);
  auto shared = TrustedUids();
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ(shared->back(), kStranger);
  setenv("KILN_DAEMON_UID", "kiln", 1);
  EXPECT_THAT(TrustedUids().status().message(),
              HasSubstr("KILN_DAEMON_UID=kiln is not a numeric uid"));
  unsetenv("KILN_DAEMON_UID");
}

}  // namespace
}  // namespace kiln
