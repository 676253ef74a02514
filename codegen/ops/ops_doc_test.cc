#include "codegen/ops/ops_doc.h"

#include <string>

#include "common/files.h"
#include "gtest/gtest.h"

namespace kiln::ops {
namespace {

// docs/OPS.md opens with the OpInfo coverage section that
// client/python/opinfo_test.py writes and checks, up to this line; the op
// table follows.
constexpr char kCoverageEnd[] =
    "<!-- end of the OpInfo coverage (client/python/opinfo_test.py) -->\n\n";

TEST(OpsDocTest, DocsOpsMdMatchesTheOpTable) {
  auto doc = ReadFile("docs/OPS.md");
  ASSERT_TRUE(doc.ok()) << doc.status();
  std::string table = *doc;
  const size_t coverage_end = table.find(kCoverageEnd);
  if (coverage_end != std::string::npos) table.erase(0, coverage_end + sizeof(kCoverageEnd) - 1);
  EXPECT_TRUE(table == OpsMarkdown())
      << "docs/OPS.md's op table is stale: bazel run //tools/kiln -- ops > docs/OPS.md, then "
         "bazel run //client/python:opinfo_test -- --write-docs to put its coverage back";
}

}  // namespace
}  // namespace kiln::ops
