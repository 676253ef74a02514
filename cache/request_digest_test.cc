// A request's digest covers what to build: a respecialization's input
// layouts are part of it, and a request without them keeps its digest.
#include "cache/request_digest.h"

#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(RequestDigestTest, InputLayoutsArePartOfTheDigest) {
  RequestSalts salts;
  salts.by_target[kiln::v1::TARGET_NATIVE] = "salt";
  kiln::v1::CompileRequest request;
  request.mutable_graph()->set_name("g");
  request.mutable_graph()->add_inputs()->mutable_type()->add_sizes()->set_constant(4);
  const absl::StatusOr<std::string> plain = RequestDigest(request, salts);
  ASSERT_TRUE(plain.ok()) << plain.status();

  kiln::v1::CompileRequest at_eight = request;
  at_eight.add_input_layouts()->add_sizes()->set_constant(8);
  kiln::v1::CompileRequest at_nine = request;
  at_nine.add_input_layouts()->add_sizes()->set_constant(9);
  const absl::StatusOr<std::string> eight = RequestDigest(at_eight, salts);
  const absl::StatusOr<std::string> nine = RequestDigest(at_nine, salts);
  ASSERT_TRUE(eight.ok() && nine.ok());
  EXPECT_NE(*eight, *plain);
  EXPECT_NE(*eight, *nine);
  EXPECT_EQ(*RequestDigest(at_eight, salts), *eight) << "deterministic";
  // How to answer is not what to build.
  at_eight.set_priority(kiln::v1::CompileRequest::PRIORITY_WARMUP);
  at_eight.set_repair(true);
  EXPECT_EQ(*RequestDigest(at_eight, salts), *eight);
}

}  // namespace
}  // namespace kiln
