#include "daemon/failure_kind.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"

namespace kiln {
namespace {

// The payload that marks a compiler's failure; its value is not read.
constexpr char kFailedInCompiler[] = "kiln.dev/failed-in-compiler";

}  // namespace

const char* FailureKindName(FailureKind kind) {
  switch (kind) {
    case FailureKind::kInvalidGraph:
      return "invalid_graph";
    case FailureKind::kUnsupported:
      return "unsupported";
    case FailureKind::kResourceLimit:
      return "resource_limit";
    case FailureKind::kTimeout:
      return "timeout";
    case FailureKind::kCompilerError:
      return "compiler_error";
    case FailureKind::kUnavailable:
      return "unavailable";
    case FailureKind::kInternal:
      return "internal";
  }
  return "internal";
}

FailureKind ClassifyFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      // codegen/limits.h words every refusal "..., over the limit kMaxNodes = ...",
      // and kilnd its own "..., over the limit max_graph_nodes = ...".
      return absl::StrContains(status.message(), "over the limit ") ? FailureKind::kResourceLimit
                                                                    : FailureKind::kInvalidGraph;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return FailureKind::kInvalidGraph;
    case absl::StatusCode::kUnimplemented:
      return FailureKind::kUnsupported;
    case absl::StatusCode::kResourceExhausted:
      return FailureKind::kResourceLimit;
    case absl::StatusCode::kDeadlineExceeded:
      return FailureKind::kTimeout;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
      return FailureKind::kUnavailable;
    case absl::StatusCode::kInternal:
      return status.GetPayload(kFailedInCompiler).has_value() ? FailureKind::kCompilerError
                                                              : FailureKind::kInternal;
    default:
      return FailureKind::kInternal;
  }
}

absl::Status MarkedAsCompilerFailure(absl::Status status) {
  if (!status.ok()) status.SetPayload(kFailedInCompiler, absl::Cord("1"));
  return status;
}

absl::Status WithoutCompilerMark(absl::Status status) {
  status.ErasePayload(kFailedInCompiler);
  return status;
}

absl::Status FailureCounts::Count(absl::Status failure) {
  counts_[static_cast<int>(ClassifyFailure(failure))].fetch_add(1, std::memory_order_relaxed);
  return WithoutCompilerMark(std::move(failure));
}

void FailureCounts::AddTo(kiln::v1::StatsResponse& stats) const {
  for (int kind = 0; kind < kNumFailureKinds; ++kind) {
    (*stats.mutable_failures_by_kind())[FailureKindName(static_cast<FailureKind>(kind))] =
        counts_[kind].load(std::memory_order_relaxed);
  }
}

}  // namespace kiln
