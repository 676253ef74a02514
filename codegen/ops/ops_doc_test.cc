#include "codegen/ops/ops_doc.h"

#include "common/files.h"
#include "gtest/gtest.h"

namespace kiln::ops {
namespace {

TEST(OpsDocTest, DocsOpsMdMatchesTheOpTable) {
  auto doc = ReadFile("docs/OPS.md");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_TRUE(*doc == OpsMarkdown())
      << "docs/OPS.md is stale: bazel run //tools/kiln -- ops > docs/OPS.md";
}

}  // namespace
}  // namespace kiln::ops
