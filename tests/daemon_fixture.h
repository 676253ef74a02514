// A real kilnd for end-to-end tests: its own socket under a short /tmp path
// (Unix socket paths are limited to 108 bytes), its own cache directory,
// started and killed like a user would.
#ifndef KILN_TESTS_DAEMON_FIXTURE_H_
#define KILN_TESTS_DAEMON_FIXTURE_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"

namespace kiln {

class DaemonFixture {
 public:
  DaemonFixture();  // creates the directories; does not start kilnd
  ~DaemonFixture();  // SIGKILLs a running kilnd, removes the directories

  // Starts kilnd and waits until it answers.
  absl::Status Start(const std::vector<std::string>& extra_flags = {});
  void Kill(int signal);   // sends `signal` and reaps the process
  int WaitForExit();       // the exit status (or 128 + signal)
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // A client that never auto-starts a daemon.
  absl::StatusOr<std::unique_ptr<Client>> Connect() const;
  // Runs a binary (the `kiln` CLI, say) with KILN_SOCKET / KILN_CACHE_DIR
  // pointing here.
  absl::StatusOr<ProcessResult> RunTool(std::vector<std::string> argv) const;

  const std::string& socket_path() const { return socket_path_; }
  const std::string& cache_dir() const { return cache_dir_; }
  const std::string& root() const { return root_; }

 private:
  std::string root_, socket_path_, cache_dir_;
  pid_t pid_ = -1;
};

// A parameterized suite whose cases share one kilnd and one client, started
// before the first case and stopped after the last.
template <typename Param>
class SharedDaemonTest : public ::testing::TestWithParam<Param> {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new DaemonFixture();
    ASSERT_TRUE(daemon_->Start().ok());
    auto client = daemon_->Connect();
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = client->release();
  }
  static void TearDownTestSuite() {
    delete client_;
    delete daemon_;
    client_ = nullptr;
    daemon_ = nullptr;
  }

  static inline DaemonFixture* daemon_ = nullptr;
  static inline Client* client_ = nullptr;
};

// Runfiles paths of the binaries under test.
inline constexpr char kKilndPath[] = "daemon/kilnd";
inline constexpr char kKilnCliPath[] = "tools/kiln/kiln";

}  // namespace kiln

#endif  // KILN_TESTS_DAEMON_FIXTURE_H_
