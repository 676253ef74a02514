// Compile failures by kind, for `kiln stats` and /metrics
// (StatsResponse.failures_by_kind, `kiln_failures_total{kind="..."}`).
//
// A small fixed set, so that a label never carries anything from a request:
//
//   invalid_graph   the graph or request is wrong: InvalidArgument (a
//                   malformed graph, a bad argument, a cycle),
//                   FailedPrecondition (a target this kilnd lacks), OutOfRange
//   unsupported     Unimplemented: an op or a symbolic form Kiln lacks (the
//                   graph is not wrong; a later Kiln may take it)
//   resource_limit  a graph over a codegen/limits.h limit (InvalidArgument
//                   naming "the limit kMax..."), or ResourceExhausted: a full
//                   disk, a compile over its memory cap
//   timeout         DeadlineExceeded: a compile over --compile_timeout
//   compiler_error  Internal from clang or lld (generated code that does not
//                   compile, a crashed compiler): a Kiln bug
//   unavailable     Unavailable, Cancelled, Aborted: no compile worker, or
//                   kilnd draining
//   internal        anything else: a broken invariant in codegen, lost data
//
// Which failures are the compiler's is marked where the compiler is called
// (MarkedAsCompilerFailure in ArtifactCache::Build): an Internal from codegen
// and one from clang have the same code. ArtifactCache::Compile counts each
// failed request and removes the mark before answering.
#ifndef KILN_DAEMON_FAILURE_KIND_H_
#define KILN_DAEMON_FAILURE_KIND_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "proto/service.pb.h"

namespace kiln {

enum class FailureKind {
  kInvalidGraph,
  kUnsupported,
  kResourceLimit,
  kTimeout,
  kCompilerError,
  kUnavailable,
  kInternal,
};
inline constexpr int kNumFailureKinds = 7;

// The label value: "invalid_graph", "unsupported", ...
const char* FailureKindName(FailureKind kind);

// The kind of a failed compile request (`status` is not OK).
FailureKind ClassifyFailure(const absl::Status& status);

// `status` marked as the compiler's (a payload; code and message unchanged),
// and the same without the mark.
absl::Status MarkedAsCompilerFailure(absl::Status status);
absl::Status WithoutCompilerMark(absl::Status status);

// Counts per kind. Thread-safe, lock-free.
class FailureCounts {
 public:
  // Counts `failure`; returns it without the compiler's mark (for callers
  // and tests, a failure is its code and message).
  absl::Status Count(absl::Status failure);
  // Sets every kind's count in stats.failures_by_kind, zeros included.
  void AddTo(kiln::v1::StatsResponse& stats) const;

 private:
  std::array<std::atomic<int64_t>, kNumFailureKinds> counts_{};
};

}  // namespace kiln

#endif  // KILN_DAEMON_FAILURE_KIND_H_
