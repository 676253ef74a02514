// Compile failures remembered per key: a compile that fails
// deterministically (IsDeterministicFailure) is remembered for
// Options::remember_for, so a retry (a training loop calling a broken graph
// again) fails at once with the same error instead of occupying a compile
// thread. `kiln evict` and an import of the key forget it. In memory only:
// a restarted daemon tries again. Thread-safe.
#ifndef KILN_DAEMON_REMEMBERED_FAILURES_H_
#define KILN_DAEMON_REMEMBERED_FAILURES_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kiln {

// Whether compiling the same inputs again would fail the same way: a
// compiler error or a crash-free failure in codegen (Internal,
// InvalidArgument, Unimplemented, FailedPrecondition, OutOfRange) and a
// timeout (DeadlineExceeded). Not: Unavailable (no worker, shutdown),
// ResourceExhausted (disk full, memory cap), and an Internal that reports a
// crashed or killed compiler process (worker_compiler.cc's "compile worker
// crashed/exited", subprocess_compiler.cc's "clang++ crashed").
bool IsDeterministicFailure(const absl::Status& status);

class RememberedFailures {
 public:
  struct Options {
    absl::Duration remember_for = absl::Minutes(10);  // zero: remember none
    // Bounds the memory: past it the failure closest to expiry is forgotten.
    size_t max_remembered = 1024;
    std::function<absl::Time()> now = [] { return absl::Now(); };
  };
  explicit RememberedFailures(Options options) : options_(std::move(options)) {}

  // The failure remembered for `key`, if it has not expired.
  std::optional<absl::Status> Find(const std::string& key);
  // Remembers `failure` for `key` if it is deterministic.
  void RememberIfDeterministic(const std::string& key, const absl::Status& failure);
  void Forget(const std::string& key);
  // Keys of remembered failures that start with `prefix` (expired or not).
  std::vector<std::string> KeysWithPrefix(const std::string& prefix);
  // Failures remembered and not expired.
  int64_t Count();

 private:
  struct Failure {
    absl::Status status;
    absl::Time expiry;
  };
  const Options options_;
  absl::Mutex mutex_;
  std::map<std::string, Failure> failures_ ABSL_GUARDED_BY(mutex_);  // ordered: prefixes
};

}  // namespace kiln

#endif  // KILN_DAEMON_REMEMBERED_FAILURES_H_
