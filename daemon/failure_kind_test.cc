#include "daemon/failure_kind.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace kiln {
namespace {

std::string KindOf(const absl::Status& status) { return FailureKindName(ClassifyFailure(status)); }

TEST(FailureKindTest, EachCodeAndPlaceHasItsKind) {
  EXPECT_EQ(KindOf(absl::InvalidArgumentError("node 3 'mm' (aten.mm.default): input 1 has 3 "
                                              "dims; mm takes 2")),
            "invalid_graph");
  EXPECT_EQ(KindOf(absl::FailedPreconditionError("this kilnd does not compile for x86-64-v4")),
            "invalid_graph");
  EXPECT_EQ(KindOf(absl::OutOfRangeError("dim 5 of a rank-2 tensor")), "invalid_graph");
  EXPECT_EQ(KindOf(absl::UnimplementedError("node 1 'f' (aten.fft_fft.default): Kiln has no "
                                            "aten.fft_fft")),
            "unsupported");
  EXPECT_EQ(KindOf(absl::InvalidArgumentError(
                "graph has 200000 nodes, over the limit kMaxNodes = 131072")),
            "resource_limit");
  EXPECT_EQ(KindOf(absl::ResourceExhaustedError("no space left on device in /tmp")),
            "resource_limit");
  EXPECT_EQ(KindOf(absl::DeadlineExceededError("compile did not finish within 2m")), "timeout");
  EXPECT_EQ(KindOf(absl::UnavailableError("kilnd is shutting down")), "unavailable");
  EXPECT_EQ(KindOf(absl::CancelledError("drained")), "unavailable");
  EXPECT_EQ(KindOf(absl::InternalError("check_plan: kernel 2 reads v5 before it is written")),
            "internal");
  EXPECT_EQ(KindOf(absl::DataLossError("blob digest mismatch")), "internal");
}

TEST(FailureKindTest, OnlyAMarkedInternalErrorIsTheCompilers) {
  const absl::Status marked =
      MarkedAsCompilerFailure(absl::InternalError("kernel.cc:3:1: error: unknown type name"));
  EXPECT_EQ(KindOf(marked), "compiler_error");
  EXPECT_EQ(marked.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(marked.message(), "kernel.cc:3:1: error: unknown type name");
  // Other codes keep their own kind when the compiler reports them.
  EXPECT_EQ(KindOf(MarkedAsCompilerFailure(absl::DeadlineExceededError("2m"))), "timeout");
  EXPECT_EQ(KindOf(MarkedAsCompilerFailure(absl::ResourceExhaustedError("memory"))),
            "resource_limit");
  EXPECT_TRUE(MarkedAsCompilerFailure(absl::OkStatus()).ok());
  EXPECT_EQ(WithoutCompilerMark(marked),
            absl::InternalError("kernel.cc:3:1: error: unknown type name"));
}

TEST(FailureKindTest, CountsListEveryKindZerosIncluded) {
  FailureCounts counts;
  EXPECT_EQ(counts.Count(absl::UnimplementedError("no such op")),
            absl::UnimplementedError("no such op"));
  EXPECT_EQ(counts.Count(absl::UnimplementedError("no such op")),
            absl::UnimplementedError("no such op"));
  EXPECT_EQ(counts.Count(absl::InvalidArgumentError("dangling id")),
            absl::InvalidArgumentError("dangling id"));
  // The compiler's mark counts, and is gone from what Count returns.
  EXPECT_EQ(counts.Count(MarkedAsCompilerFailure(absl::InternalError("clang failed"))),
            absl::InternalError("clang failed"));
  kiln::v1::StatsResponse stats;
  counts.AddTo(stats);
  const std::map<std::string, int64_t> by_kind(stats.failures_by_kind().begin(),
                                               stats.failures_by_kind().end());
  EXPECT_EQ(by_kind, (std::map<std::string, int64_t>{{"compiler_error", 1},
                                                     {"internal", 0},
                                                     {"invalid_graph", 1},
                                                     {"resource_limit", 0},
                                                     {"timeout", 0},
                                                     {"unavailable", 0},
                                                     {"unsupported", 2}}));
}

}  // namespace
}  // namespace kiln
