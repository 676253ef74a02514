// A real kilnd for end-to-end tests: its own socket under a short /tmp path
// (Unix socket paths are limited to 108 bytes), its own cache directory,
// started and killed like a user would.
#ifndef KILN_TESTS_DAEMON_FIXTURE_H_
#define KILN_TESTS_DAEMON_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "tools/daemon_process/daemon_process.h"

namespace kiln {

// A thin test face on the shared launcher (DaemonProcess): the socket and
// cache directory under a fresh /tmp/kilnXXXXXX, kilnd's output in
// root()/kilnd.log (printed when the test has failed).
class DaemonFixture {
 public:
  // Creates the directories; does not start kilnd. `env`: changes to
  // kilnd's environment.
  explicit DaemonFixture(EnvChanges env = {});
  ~DaemonFixture();  // SIGKILLs a running kilnd, removes the directories

  // Starts kilnd and waits until it answers (a version mismatch counts).
  absl::Status Start(const std::vector<std::string>& extra_flags = {}) {
    return process_->Start(extra_flags);
  }
  // Sends `signal` and reaps the process.
  void Kill(int signal) { process_->Kill(signal); }
  // The exit status (or 128 + signal).
  int WaitForExit() { return process_->WaitForExit(); }
  bool running() const { return process_->pid() > 0; }
  // Whether kilnd still runs (reaps it when it exited by itself).
  bool Alive() { return process_->Alive(); }
  int exit_status() const { return process_->exit_status(); }
  std::string Log() const { return process_->LogSince(0); }
  pid_t pid() const { return process_->pid(); }

  // A client that never auto-starts a daemon.
  absl::StatusOr<std::unique_ptr<Client>> Connect() const { return process_->Connect(); }
  // Runs a binary (the `kiln` CLI, say) with KILN_SOCKET / KILN_CACHE_DIR
  // pointing here.
  absl::StatusOr<ProcessResult> RunTool(std::vector<std::string> argv) const;

  const std::string& socket_path() const { return process_->socket_path(); }
  const std::string& cache_dir() const { return process_->cache_dir(); }
  const std::string& root() const { return process_->root(); }

 private:
  std::unique_ptr<DaemonProcess> process_;
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
