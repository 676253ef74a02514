#include "tests/daemon_fixture.h"

#include <stdlib.h>

#include <iostream>

#include "common/subprocess.h"

namespace kiln {
namespace {

DaemonProcess::Options FixtureOptions(EnvChanges env) {
  DaemonProcess::Options options;
  options.kilnd = kKilndPath;
  options.env = std::move(env);
  options.client.client_name = "e2e-test";
  return options;
}

}  // namespace

DaemonFixture::DaemonFixture(EnvChanges env)
    : process_(*DaemonProcess::Create(FixtureOptions(std::move(env)))) {}

DaemonFixture::~DaemonFixture() {
  // The log goes with the root: show it while it can still explain a failure.
  if (::testing::Test::HasFailure()) {
    std::cerr << "kilnd's log (" << process_->log_path() << "):\n" << process_->LogSince(0);
  }
}

absl::StatusOr<ProcessResult> DaemonFixture::RunTool(std::vector<std::string> argv) const {
  // The child's environment, not this process's: tests run tools against
  // several daemons from several threads at once.
  RunOptions options;
  options.timeout = absl::Minutes(2);
  options.env = {{"KILN_SOCKET", socket_path()}, {"KILN_CACHE_DIR", cache_dir()}};
  return RunProcess(argv, options);
}

}  // namespace kiln
