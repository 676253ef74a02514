// SpawnProcess's options, checked on a real child (/bin/sleep) through
// /proc: its session, its signal mask and dispositions, its descriptors.
#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// A sleeping child, killed and reaped when the test is done with it.
class Child {
 public:
  explicit Child(const SpawnOptions& options) {
    // glibc's posix_spawn returns once the child has exec'ed: /proc shows
    // sleep's own state from here on.
    auto pid = SpawnProcess({"/bin/sleep", "30"}, options);
    EXPECT_TRUE(pid.ok()) << pid.status();
    pid_ = pid.value_or(-1);
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
  }
  pid_t pid() const { return pid_; }
  // The wait status (the child is reaped).
  int Wait() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }
  // A mask line of /proc/PID/status ("SigBlk", "SigIgn") as bits.
  uint64_t SignalMask(const std::string& line) const {
    auto status = ReadFile(absl::StrCat("/proc/", pid_, "/status"));
    EXPECT_TRUE(status.ok()) << status.status();
    for (absl::string_view text : absl::StrSplit(status.value_or(""), '\n')) {
      if (!absl::ConsumePrefix(&text, line + ":")) continue;
      uint64_t mask = 0;
      EXPECT_TRUE(absl::SimpleHexAtoi(absl::StripAsciiWhitespace(text), &mask)) << text;
      return mask;
    }
    ADD_FAILURE() << "no " << line << " in /proc/" << pid_ << "/status";
    return 0;
  }
  bool HasDescriptor(int fd) const {
    struct stat info;
    return lstat(absl::StrCat("/proc/", pid_, "/fd/", fd).c_str(), &info) == 0;
  }

 private:
  pid_t pid_ = -1;
};

constexpr uint64_t Bit(int signal) { return uint64_t{1} << (signal - 1); }

TEST(SpawnProcessTest, NewSessionLeavesOurs) {
  Child own(SpawnOptions{});
  EXPECT_EQ(getsid(own.pid()), getsid(0)) << "without the option, our session";
  SpawnOptions options;
  options.new_session = true;
  Child child(options);
  EXPECT_NE(getsid(child.pid()), getsid(0));
  EXPECT_EQ(getsid(child.pid()), child.pid()) << "it leads a session of its own";
}

// What the spawning thread blocks or ignores, the child would inherit.
class BlockedSignalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGUSR1);
    ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &blocked, &old_mask_), 0);
    ASSERT_NE(signal(SIGTERM, SIG_IGN), SIG_ERR);
  }
  void TearDown() override {
    signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  sigset_t old_mask_;
};

TEST_F(BlockedSignalsTest, WithoutTheOptionsTheChildInheritsThem) {
  Child child(SpawnOptions{});
  EXPECT_EQ(child.SignalMask("SigBlk") & (Bit(SIGTERM) | Bit(SIGUSR1)),
            Bit(SIGTERM) | Bit(SIGUSR1));
  EXPECT_EQ(child.SignalMask("SigIgn") & Bit(SIGTERM), Bit(SIGTERM));
}

TEST_F(BlockedSignalsTest, ClearedMaskAndDefaultSignalsLetSigtermKill) {
  SpawnOptions options;
  options.clear_signal_mask = true;
  options.default_signals = {SIGTERM, SIGINT, SIGHUP, SIGPIPE};
  Child child(options);
  EXPECT_EQ(child.SignalMask("SigBlk"), 0u);
  EXPECT_EQ(child.SignalMask("SigIgn") & Bit(SIGTERM), 0u);
  ASSERT_EQ(kill(child.pid(), SIGTERM), 0);
  const int status = child.Wait();
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST_F(BlockedSignalsTest, ClearingTheMaskAloneKeepsIgnoredSignalsIgnored) {
  SpawnOptions options;
  options.clear_signal_mask = true;
  Child child(options);
  EXPECT_EQ(child.SignalMask("SigBlk"), 0u);
  EXPECT_EQ(child.SignalMask("SigIgn") & Bit(SIGTERM), Bit(SIGTERM));
}

TEST(SpawnProcessTest, CloseOtherFdsClosesDescriptorsWithoutCloexec) {
  const int inherited = open("/dev/null", O_RDONLY);  // no O_CLOEXEC, on purpose
  ASSERT_GE(inherited, 3);
  const int redirected = open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(redirected, 3);
  {
    Child child(SpawnOptions{});
    EXPECT_TRUE(child.HasDescriptor(inherited)) << "without the option it is inherited";
  }
  SpawnOptions options;
  options.close_other_fds = true;
  options.redirects = {{redirected, STDOUT_FILENO}};
  Child child(options);
  EXPECT_FALSE(child.HasDescriptor(inherited));
  EXPECT_TRUE(child.HasDescriptor(STDOUT_FILENO)) << "redirects happen before the close";
  EXPECT_TRUE(child.HasDescriptor(STDIN_FILENO));
  EXPECT_FALSE(child.HasDescriptor(redirected));
  close(inherited);
  close(redirected);
}

TEST(SpawnProcessTest, StdinIsDevNullUnlessRedirected) {
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  const auto stdin_target = [](const Child& child) {
    char target[256];
    const ssize_t n =
        readlink(absl::StrCat("/proc/", child.pid(), "/fd/0").c_str(), target, sizeof(target));
    return n > 0 ? std::string(target, n) : std::string("?");
  };
  {
    Child child(SpawnOptions{});
    EXPECT_EQ(stdin_target(child), "/dev/null");
  }
  SpawnOptions options;
  options.redirects = {{pipe_fds[0], STDIN_FILENO}};
  Child child(options);
  EXPECT_TRUE(absl::StartsWith(stdin_target(child), "pipe:")) << stdin_target(child);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

TEST(SpawnProcessTest, ErrorsNameTheProgram) {
  EXPECT_EQ(SpawnProcess({"/no/such/program"}).status(),
            absl::UnavailableError("cannot start /no/such/program: No such file or directory"));
  SpawnOptions options;
  options.name = "the compile worker /no/such/program";
  EXPECT_EQ(SpawnProcess({"/no/such/program"}, options).status(),
            absl::UnavailableError(
                "cannot start the compile worker /no/such/program: No such file or directory"));
}

}  // namespace
}  // namespace kiln
